package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestParallelAllocs checks that a call shared with helpers allocates only
// its task: the helpers are started once and keep their own buffers.
func TestParallelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	withWorkers(t, 2)
	for _, s := range [][3]int{{128, 256, 784}, {300, 200, 1000}} { // strips, rectangles
		m, n, k := s[0], s[1], s[2]
		a := make([]float32, m*k)
		b := make([]float32, k*n)
		c := make([]float32, m*n)
		f := func() { Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n) }
		f()
		if got := testing.AllocsPerRun(20, f); got > 1 {
			t.Errorf("%dx%dx%d on 2 workers: %v allocations per call, want at most 1", m, n, k, got)
		}
	}
}

// TestConcurrentCalls runs parallel calls from several goroutines at once,
// so that they compete for the helpers, and requires each result to have
// the bits of the same product computed alone on one goroutine.
func TestConcurrentCalls(t *testing.T) {
	shapes := [][3]int{{128, 256, 784}, {64, 576, 288}, {300, 200, 700}, {50, 300, 9}}
	type call struct {
		tc   gemmCase
		want []float32
	}
	var calls []call
	for i, s := range shapes {
		for _, st := range []storage{f32, bf16} {
			tc := gemmCase{transA: i%2 == 1, transB: i%3 == 0, sa: st, sb: st, m: s[0], n: s[1], k: s[2], alpha: 1, beta: 0.5, ldExtra: 1}
			calls = append(calls, call{tc, tc.runQuiet(t, uint64(len(calls)), 1)})
		}
	}
	withWorkers(t, 3)
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(calls))
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 3 {
				for _, i := range rng.Perm(len(calls)) {
					c := calls[i]
					got := c.tc.gemm(uint64(i))
					for x := range c.want {
						if math.Float32bits(got[x]) != math.Float32bits(c.want[x]) {
							errs <- fmt.Sprintf("%v: element %d = %v, want %v", c.tc, x, got[x], c.want[x])
							break
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
