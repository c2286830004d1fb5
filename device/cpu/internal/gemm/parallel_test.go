package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestParallelAllocs checks that a call shared with helpers allocates
// nothing: the helpers are started once and keep their own buffers, and
// the task comes from a pool (tasks).
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
		if got := testing.AllocsPerRun(20, f); got != 0 {
			t.Errorf("%dx%dx%d on 2 workers: %v allocations per call, want 0", m, n, k, got)
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

// TestCut checks the choice between strips and rectangles on two workers:
// strips for the MLP and convolution products, whose op(A) is small,
// rectangles where op(A) is large or where strips would pack more.
func TestCut(t *testing.T) {
	tests := []struct {
		m, n, k int
		bf16    bool
		strips  bool
		pieces  int
	}{
		{128, 256, 784, false, true, 8}, // MLP forward: 8 column tiles
		{256, 784, 128, false, true, 8}, // MLP dW, although grid splits rows
		{128, 784, 256, false, true, 8}, // MLP dX
		{64, 576, 288, false, true, 8},  // convolution forward
		{128, 256, 784, true, true, 8},  // bfloat16 pairs: half the k
		{1024, 1024, 1024, false, false, 2},
		{1000, 64, 100, false, false, 2}, // tall: strips would pack all of A twice
		{128, 512, 1500, false, false, 2},
		{128, 512, 1500, true, true, 8}, // over stripBudget as floats, not as pairs
	}
	for _, tt := range tests {
		im := &impl{mr: 12, nr: 32, pairs: tt.bf16} // the AVX-512 tiles
		j := job{im: im, m: tt.m, n: tt.n, k: tt.k}
		pm, pn := split(tt.m, tt.n, tt.k, im.mr, im.nr, 2, 0)
		strips, pieces := j.cut(pm*pn, pm, pn)
		if strips != tt.strips || pieces != tt.pieces {
			t.Errorf("%dx%dx%d (bf16 %v, grid %dx%d): strips %v, %d pieces; want %v, %d", tt.m, tt.n, tt.k, tt.bf16, pm, pn, strips, pieces, tt.strips, tt.pieces)
		}
	}
}

// countWork is a Work with one piece that counts who ran it.
type countWork struct {
	claimed sync.Once
	ran     chan struct{}
}

func (w *countWork) Work() { w.claimed.Do(func() { close(w.ran) }) }

// TestOffer: right after a product shared with helpers, they poll for
// work, and a Work offered to them runs on one of them while the caller
// does nothing else; Offer to no one, or beyond the channel, just reports
// fewer takers.
func TestOffer(t *testing.T) {
	withWorkers(t, 2)
	m, n, k := 128, 256, 784
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	Sgemm(false, true, m, n, k, 1, a, k, b, k, 0, c, n)
	deadline := time.Now().Add(spin / 2)
	for Polling() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Microsecond) // the helper finishes its piece, then polls
	}
	if Polling() == 0 {
		t.Skip("no helper polling half a spin after a parallel product (machine too busy)")
	}
	w := &countWork{ran: make(chan struct{})}
	if got := Offer(w, 1); got != 1 {
		t.Fatalf("Offer to a polling helper reached %d, want 1", got)
	}
	select {
	case <-w.ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a Work offered to a polling helper did not run within 10 s")
	}
	if got := Offer(&countWork{ran: make(chan struct{})}, 0); got != 0 {
		t.Errorf("Offer to 0 helpers reached %d", got)
	}
}
