package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// plainDevice hides the CPU device's optional interfaces: the graph then
// takes the general path (a 16-bit weight gradient widened by the cast's
// backward).
type plainDevice struct{ device.Device }

// TestLinearNarrowGrad: under autocast the weight gradient of Linear goes
// straight into the F32 parameter's gradient through GemmNarrow when the
// weight's copy has no other consumer; the gradients (weights and biases,
// over two backward passes that accumulate) and the memory left behind are
// those of the general path, bit for bit. A weight used twice takes the
// general path and matches it too.
func TestLinearNarrowGrad(t *testing.T) {
	d := cpu.New()
	if _, ok := any(d).(device.NarrowGemmer); !ok {
		t.Fatal("the CPU device does not implement device.NarrowGemmer")
	}
	for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, shared := range []bool{false, true} {
			grads := map[bool][][]float32{}
			for _, narrow := range []bool{true, false} {
				var dev device.Device = d
				if !narrow {
					dev = plainDevice{d}
				}
				rng := rand.New(rand.NewPCG(7, 8))
				w1 := autograd.NewParam("w1", tensor.NormalHost(rng, 0, 0.2, 24, 40))
				b1 := autograd.NewParam("b1", tensor.NormalHost(rng, 0, 0.2, 24))
				w2 := autograd.NewParam("w2", tensor.NormalHost(rng, 0, 0.2, 24, 24))
				params := []*autograd.Var{w1, b1, w2}
				before := d.MemStats().Live
				for _, p := range params {
					p.To(dev)
				}
				for step := range 2 { // the second backward adds to the first's gradients
					g := autograd.NewGraph(dev)
					g.SetPolicy(lowPolicy{low})
					x := g.Input(tensor.NormalHost(rng, 0, 1, 33, 40))
					h := g.ReLU(g.Linear(x, w1, b1))
					h = g.Linear(h, w2, nil)
					if shared {
						h = g.Linear(h, w2, nil)
					}
					labels := make([]int32, 33)
					for i := range labels {
						labels[i] = int32((i + step) % 24)
					}
					g.Backward(g.Scale(g.CrossEntropy(h, labels), 1024))
					g.Release()
				}
				var got [][]float32
				for _, p := range params {
					if p.Grad.DType() != dtype.F32 {
						t.Fatalf("%v: gradient of %s is %v", low, p.Name, p.Grad.DType())
					}
					got = append(got, p.Grad.ToHost())
					p.FreeGrad()
				}
				for _, p := range params {
					p.Value.Release() // and its autocast copy
				}
				if live := d.MemStats().Live; live != before {
					t.Errorf("%v narrow=%v: live memory %v after the steps, %v before", low, narrow, live, before)
				}
				grads[narrow] = got
			}
			for i, name := range []string{"w1", "b1", "w2"} {
				a, b := grads[true][i], grads[false][i]
				for j := range a {
					if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
						t.Fatalf("%v shared=%v: grad %s[%d] = %v through GemmNarrow, %v through the cast", low, shared, name, j, a[j], b[j])
					}
				}
			}
		}
	}
}

// TestCastAfterNoGrad: under autocast, a parameter used inside NoGrad and
// then, in the same graph, by an op that records gets the gradient of that
// op, as it does without the first use (the copy made under NoGrad records
// no cast, and used to be shared with the later op, whose gradient then
// never reached the parameter).
func TestCastAfterNoGrad(t *testing.T) {
	d := cpu.New()
	var grads [2][]float32
	for i, first := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(1, 2))
		w := autograd.NewParam("w", tensor.NormalHost(rng, 0, 1, 4, 3))
		w.To(d)
		g := autograd.NewGraph(d)
		g.SetPolicy(lowPolicy{dtype.F16})
		x := g.Input(tensor.NormalHost(rng, 0, 1, 2, 3))
		if first {
			g.NoGrad(func() { g.Linear(x, w, nil) })
		}
		g.Backward(g.Sum(g.Linear(x, w, nil)))
		if w.Grad == nil {
			t.Fatalf("NoGrad use first %v: no gradient reached the parameter", first)
		}
		grads[i] = w.Grad.ToHost()
		g.Release()
		w.FreeGrad()
		w.Value.Release()
	}
	for j := range grads[0] {
		if math.Float32bits(grads[0][j]) != math.Float32bits(grads[1][j]) {
			t.Fatalf("grad[%d] = %v after a NoGrad use, %v without", j, grads[1][j], grads[0][j])
		}
	}
}
