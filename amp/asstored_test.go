package amp_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// TestUnscaleAsStored trains the same F16 network with and without
// UnscaleAsStored and requires the same trajectory bit for bit: every
// weight after every step, the scale and the skips. The scale starts at
// 2^24, so the first steps overflow and are skipped (the Inf is found in
// the gradients the GEMM unscaled as it stored them); each step runs two
// backward passes before the scaler looks (the second adds to gradients
// the first unscaled, which must be scaled back first); one weight is used
// twice (its gradient cannot come from one product); and, in a second run,
// the hidden layers sit in a checkpointed segment (recomputed on a tape of
// their own). Before Unscale, the first weight's gradient must be the
// scaled one times 1/scale exactly: the fused store did run.
func TestUnscaleAsStored(t *testing.T) {
	dev := cpu.New()
	const n, in, hidden, classes = 96, 24, 40, 5
	for _, checkpoint := range []bool{false, true} {
		type run struct {
			weights [][]float32
			scales  []float32
			skipped int
			w1grad  []float32 // before the first Unscale
		}
		var runs [2]run
		for ri, asStored := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(3, 4))
			x := tensor.NormalHost(rng, 0, 1, n, in)
			y := make([]int32, n)
			for i := range y {
				y[i] = int32(i % classes)
			}
			w1 := autograd.NewParam("w1", tensor.NormalHost(rng, 0, 0.3, hidden, in))
			b1 := autograd.NewParam("b1", tensor.NormalHost(rng, 0, 0.1, hidden))
			w2 := autograd.NewParam("w2", tensor.NormalHost(rng, 0, 0.2, hidden, hidden))
			w3 := autograd.NewParam("w3", tensor.NormalHost(rng, 0, 0.2, classes, hidden))
			params := []*autograd.Var{w1, b1, w2, w3}
			for _, p := range params {
				p.To(dev)
			}
			opt := optim.NewSGD(params, optim.LR(0.05), optim.Momentum(0.9))
			s := amp.NewGradScaler(amp.InitScale(1<<24), amp.UnscaleAsStored(asStored))
			hiddenLayers := func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var {
				h := g.ReLU(g.Linear(in[0], w1, b1))
				h = g.ReLU(g.Linear(h, w2, nil))
				return []*autograd.Var{g.ReLU(g.Linear(h, w2, nil))} // w2 twice
			}
			r := &runs[ri]
			for step := range 12 {
				for micro := range 2 {
					g := autograd.NewGraph(dev)
					amp.Autocast(g, dtype.F16)
					xs := g.Input(x)
					var h *autograd.Var
					if checkpoint {
						h = g.Checkpoint(hiddenLayers, xs)[0]
					} else {
						h = hiddenLayers(g, []*autograd.Var{xs})[0]
					}
					labels := y
					if micro == 1 {
						labels = append([]int32(nil), y[1:]...)
						labels = append(labels, y[0])
					}
					g.Backward(s.Scale(g, g.CrossEntropy(g.Linear(h, w3, nil), labels)))
					if step == 3 && micro == 0 {
						r.w1grad = w1.Grad.ToHost()
					}
					g.Release()
				}
				if _, err := s.Step(opt); err != nil {
					t.Fatal(err)
				}
				r.scales = append(r.scales, s.LossScale())
				if err := s.Update(); err != nil {
					t.Fatal(err)
				}
				opt.ZeroGrad()
			}
			r.skipped = s.Skipped()
			for _, p := range params {
				r.weights = append(r.weights, p.Value.ToHost())
				p.Value.Release()
			}
			optim.Release(opt)
		}
		off, on := runs[0], runs[1]
		if off.skipped == 0 || off.skipped >= 12 {
			t.Fatalf("checkpoint=%v: %d of 12 steps skipped; the test wants some overflows and some steps", checkpoint, off.skipped)
		}
		if on.skipped != off.skipped {
			t.Fatalf("checkpoint=%v: %d steps skipped with UnscaleAsStored, %d without", checkpoint, on.skipped, off.skipped)
		}
		for i := range off.scales {
			if on.scales[i] != off.scales[i] {
				t.Fatalf("checkpoint=%v: step %d: scale %v with UnscaleAsStored, %v without", checkpoint, i, on.scales[i], off.scales[i])
			}
		}
		for pi, w := range off.weights {
			for j := range w {
				if math.Float32bits(on.weights[pi][j]) != math.Float32bits(w[j]) {
					t.Fatalf("checkpoint=%v: parameter %d [%d] = %v with UnscaleAsStored, %v without", checkpoint, pi, j, on.weights[pi][j], w[j])
				}
			}
		}
		scale := off.scales[3] // the scale step 3 ran under
		for j, v := range off.w1grad {
			if got, want := on.w1grad[j], float32(float64(v)/float64(scale)); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("checkpoint=%v: before Unscale, w1's gradient [%d] = %v with UnscaleAsStored; want the scaled %v / %v = %v (unscaled as stored)", checkpoint, j, got, v, scale, want)
			}
		}
	}
}
