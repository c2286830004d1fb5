package memplan_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
)

// TestMeasureSteadyState measures a model before its first step and the
// same model after two steps, holding a third step's gradients: the
// profiles predict the same peak for every choice tried (the first
// counting the optimiser's state and autocast's copies still to come, the
// second not counting the held gradients), and the dry step leaves the
// model as it found it: gradients, batch normalisation's statistics and
// dropout's streams.
func TestMeasureSteadyState(t *testing.T) {
	for _, w := range []workload{deepMLP(dtype.BF16), resnet(dtype.BF16), gpt(dtype.F32)} {
		t.Run(w.name, func(t *testing.T) {
			dev := cpu.New()
			// measure builds the model, trains it for steps steps and
			// measures it; the device holds nothing else.
			measure := func(steps int) *memplan.Profile {
				m := w.build(rand.New(rand.NewPCG(7, 11)))
				nn.To(m, dev)
				defer nn.Release(m)
				opt := w.opt(m.Params())
				defer optim.Release(opt)
				batch := w.batch(rand.New(rand.NewPCG(3, 5)), m)
				loss := func(g *autograd.Graph) *autograd.Var {
					if w.low != dtype.F32 {
						amp.Autocast(g, w.low)
					}
					return batch(g)
				}
				for i := range steps + 1 {
					g := autograd.NewGraph(dev)
					g.Backward(loss(g))
					if i < steps {
						opt.Step()
						opt.ZeroGrad()
					}
					g.Release()
				}
				// state is every bit a dry step could disturb.
				state := func() []uint64 {
					var bits []uint64
					for _, s := range nn.State(m) {
						for _, v := range s.Var.Value.ToHost() {
							bits = append(bits, uint64(math.Float32bits(v)))
						}
						if s.Var.Grad != nil {
							for _, v := range s.Var.Grad.ToHost() {
								bits = append(bits, uint64(math.Float32bits(v)))
							}
						}
					}
					for _, r := range nn.RNGs(m) {
						bits = append(bits, r.RNG.Seed, r.RNG.Counter)
					}
					return bits
				}
				before := state()
				p, err := memplan.Measure(memplan.Config{Dev: dev, Model: m, Loss: loss, Optim: opt})
				if err != nil {
					t.Fatal(err)
				}
				after := state()
				if len(before) != len(after) {
					t.Fatalf("%d state values before the dry step, %d after", len(before), len(after))
				}
				for i := range before {
					if before[i] != after[i] {
						t.Fatalf("state value %d changed in the dry step: %x, %x", i, before[i], after[i])
					}
				}
				return p
			}
			fresh := measure(0)
			steady := measure(2)
			n := len(fresh.Units)
			singles := make([]nn.Span, n)
			for i := range singles {
				singles[i] = nn.Span{Lo: i, Hi: i + 1}
			}
			for _, spans := range [][]nn.Span{nil, singles, nn.EvenSpans(n, 0), {{Lo: 0, Hi: n}}, {{Lo: n / 2, Hi: n}}} {
				if a, b := fresh.Predict(spans), steady.Predict(spans); a != b {
					t.Errorf("spans %v: %d predicted before the first step, %d after two", spans, a, b)
				}
			}
			if fresh.Predict(singles) != fresh.Measured {
				t.Errorf("the dry step's own choice predicted at %d, measured at %d", fresh.Predict(singles), fresh.Measured)
			}
		})
	}
}
