package memplan_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
)

// TestMeasureSteadyState measures a model before its first step and the
// same model after two steps, holding a third step's gradients: each
// choice's measured peak (Peak) is the same in both, the first counting
// the optimiser's state still to come, the second not counting the held
// gradients (in F32: under autocast a model trained without a plan keeps
// weight copies that a planned one does not). The dry steps leave the
// model as they found it: gradients, batch normalisation's statistics,
// dropout's streams, and autocast's copies, which the first step makes.
// The first dry step's own peak, every unit checkpointed alone and read
// around each, is the measured peak of that choice.
func TestMeasureSteadyState(t *testing.T) {
	for _, w := range []workload{deepMLP(dtype.F32), resnet(dtype.F32), gpt(dtype.F32), gpt(dtype.BF16)} {
		t.Run(w.name+"/"+w.low.String(), func(t *testing.T) {
			dev := cpu.New()
			// measure builds the model, trains it for steps steps and
			// measures it and the peaks of a few choices; the device holds
			// nothing else.
			measure := func(steps int) (*memplan.Profile, []int64) {
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
				// state is every bit a dry step could disturb, and the
				// weight copies autocast keeps.
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
					return append(bits, uint64(dev.MemStats().Live.Category(device.Cast)))
				}
				before := state()
				p, err := memplan.Measure(memplan.Config{Dev: dev, Model: m, Loss: loss, Optim: opt})
				if err != nil {
					t.Fatal(err)
				}
				n := len(p.Units)
				singles := make([]nn.Span, n)
				for i := range singles {
					singles[i] = nn.Span{Lo: i, Hi: i + 1}
				}
				var peaks []int64
				for _, spans := range [][]nn.Span{nil, singles, nn.EvenSpans(n, 0), {{Lo: 0, Hi: n}}, {{Lo: n / 2, Hi: n}}} {
					peak, err := p.Peak(spans)
					if err != nil {
						t.Fatal(err)
					}
					peaks = append(peaks, peak)
				}
				if peaks[1] != p.Measured {
					t.Errorf("every unit alone: measured %d by Peak, %d by the first dry step", peaks[1], p.Measured)
				}
				after := state()
				if len(before) != len(after) {
					t.Fatalf("%d state values before the dry steps, %d after", len(before), len(after))
				}
				for i := range before {
					if before[i] != after[i] {
						t.Fatalf("state value %d of %d changed in the dry steps: %x, %x", i, len(before), before[i], after[i])
					}
				}
				return p, peaks
			}
			fresh, a := measure(0)
			_, b := measure(2)
			if w.low == dtype.F32 && !slices.Equal(a, b) {
				t.Errorf("peaks %v before the first step, %v after two", a, b)
			}
			if a[0] != fresh.Unconstrained {
				t.Errorf("Unconstrained %d, Peak(nil) %d", fresh.Unconstrained, a[0])
			}
		})
	}
}
