package autograd_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestGraphFromTwoGoroutines misuses one Graph from two goroutines at once,
// as a program that shares a step's graph between workers would. Before the
// guard this lost ops from the tape and leaked the tensors of lost records
// without a word; now the misuse must end in a panic that names it, and
// whatever was recorded up to then must be intact: every op that returned
// is on the tape, and Release frees everything the graph allocated.
//
// Under -race the race detector itself reports the misuse (on fields the
// guard does not cover) and fails the test binary, so this end-to-end run
// is left to ordinary builds; TestGuardDetectsEntry covers the detection
// path deterministically under both.
func TestGraphFromTwoGoroutines(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race the race detector reports this misuse itself; TestGuardDetectsEntry covers the guard")
	}
	// Two Ps, so the goroutines really run at the same time even where
	// GOMAXPROCS is 1.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	dev := cpu.New()
	w := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1}, 1))
	// Over 300 runs on two busy cores the guard fired after a median of
	// 3,000 ops (at most 95,000), so rounds of 2 × 20,000 on a fresh graph
	// until a deadline make a miss practically impossible while each
	// round still checks that nothing was lost.
	deadline := time.Now().Add(30 * time.Second)
	for round := 1; ; round++ {
		msgs := hammer(t, dev, w, 20_000)
		if len(msgs) > 0 {
			for _, m := range msgs {
				if !strings.Contains(m, "two goroutines") {
					t.Errorf("panic %q; want one that says the graph was used from two goroutines", m)
				}
			}
			t.Logf("round %d: %q", round, msgs)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rounds of 2 × 20,000 ops from two goroutines at once without a panic; want a panic naming the misuse", round)
		}
	}
}

// hammer records up to limit ops from each of two goroutines on one fresh
// graph, stopping both at the first panic, and returns the panics. It
// checks that every op that returned is on the tape and that Release frees
// everything the graph allocated.
func hammer(t *testing.T, dev device.Device, w *autograd.Var, limit int) []string {
	t.Helper()
	before := dev.MemStats().Live.Total
	g := autograd.NewGraph(dev)
	x := g.Input(tensor.Host{Shape: []int{1}, Data: []float32{1}})
	var (
		stop     atomic.Bool
		start    sync.WaitGroup
		done     sync.WaitGroup
		recorded [2]int
		panics   [2]any
	)
	start.Add(2)
	for i := range 2 {
		done.Add(1)
		go func() {
			defer done.Done()
			defer func() {
				if r := recover(); r != nil {
					panics[i] = r
					stop.Store(true)
				}
			}()
			start.Done()
			start.Wait()
			y := x
			for n := 0; n < limit && !stop.Load(); n++ {
				y = g.Mul(y, w)
				recorded[i]++
			}
		}()
	}
	done.Wait()
	if got, want := g.Len(), recorded[0]+recorded[1]; got != want {
		t.Errorf("tape holds %d ops, want %d (%d + %d returned)", got, want, recorded[0], recorded[1])
	}
	g.Release()
	if got := dev.MemStats().Live.Total; got != before {
		t.Errorf("live bytes after Release %d, want %d as before the graph", got, before)
	}
	var msgs []string
	for _, p := range panics {
		if p != nil {
			msgs = append(msgs, fmt.Sprint(p))
		}
	}
	return msgs
}
