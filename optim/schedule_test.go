package optim_test

import (
	"math"
	"testing"

	"github.com/mixprec/mixprec/optim"
)

func near(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-6*math.Max(1, math.Abs(float64(b))) }

func TestCosine(t *testing.T) {
	s := optim.Cosine(0.1, 0.001, 10, 110)
	for _, c := range []struct {
		step int
		want float32
	}{{0, 0.01}, {9, 0.1}, {10, 0.1}, {60, 0.0505}, {110, 0.001}, {500, 0.001}} {
		if got := s(c.step); !near(got, c.want) {
			t.Errorf("Cosine step %d = %v, want %v", c.step, got, c.want)
		}
	}
}

// TestOneCycle pins the schedule to torch.optim.lr_scheduler.OneCycleLR
// (anneal_strategy 'cos', pct_start 0.3, div 25, final_div 1e4) at 100
// steps: lr 0.004 at step 0, 0.1 at step 29, 4e-7 at step 99.
func TestOneCycle(t *testing.T) {
	s := optim.OneCycle(0.1, 100, 0.3, 25, 1e4)
	for _, c := range []struct {
		step int
		want float32
	}{{0, 0.004}, {29, 0.1}, {99, 4e-7}} {
		if got := s(c.step); !near(got, c.want) {
			t.Errorf("OneCycle step %d = %v, want %v", c.step, got, c.want)
		}
	}
	for i := 1; i < 29; i++ {
		if s(i) <= s(i-1) {
			t.Errorf("OneCycle not increasing at step %d", i)
		}
	}
	for i := 30; i < 100; i++ {
		if s(i) >= s(i-1) {
			t.Errorf("OneCycle not decreasing at step %d", i)
		}
	}
}
