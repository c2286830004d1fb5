package autograd_test

import (
	"fmt"
	"github.com/mixprec/mixprec/internal/testdev"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// fn builds the op under test from its inputs.
type fn func(g *autograd.Graph, in []*autograd.Var) *autograd.Var

// gradCheck compares the analytic gradient of L = Σ r·f(inputs), r a fixed
// random projection, with central finite differences. Forward values come
// from the F32 kernels; the projections and difference quotients are
// computed in float64, and eps = 1e-3 balances truncation error (~eps²)
// against the F32 rounding of the outputs (~6e-8·|L|/eps).
func gradCheck(t *testing.T, dev device.Device, f fn, inputs ...tensor.Host) {
	t.Helper()
	const eps = 1e-3
	rng := rand.New(rand.NewPCG(7, 9))
	eval := func(hs []tensor.Host, r []float64) (float64, []float32, []int) {
		g := autograd.NewGraph(dev, autograd.WithoutGrad())
		defer g.Release()
		in := make([]*autograd.Var, len(hs))
		for i, h := range hs {
			in[i] = g.Input(h)
		}
		out := f(g, in)
		vals := out.Value.ToHost()
		var s float64
		for i, v := range vals {
			s += r[i] * float64(v)
		}
		return s, vals, out.Shape()
	}
	// Output size, for the projection.
	_, vals, outShape := eval(inputs, make([]float64, 1<<24))
	r := make([]float64, len(vals))
	for i := range r {
		r[i] = rng.Float64()*2 - 1
	}
	// Analytic gradients.
	g := autograd.NewGraph(dev)
	in := make([]*autograd.Var, len(inputs))
	for i, h := range inputs {
		in[i] = g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, h), true)
	}
	out := f(g, in)
	rh := make([]float32, len(r))
	for i, v := range r {
		rh[i] = float32(v)
	}
	// Round r to float32 so that the analytic and numeric sides project
	// with the same vector.
	for i := range r {
		r[i] = float64(rh[i])
	}
	rv := g.Leaf(tensor.FromSlice(dev, dtype.F32, device.Temp, rh, outShape...), false)
	g.Backward(g.Sum(g.Mul(out, rv)))
	for i, h := range inputs {
		if in[i].Grad == nil {
			t.Fatalf("input %d: no gradient", i)
		}
		got := in[i].Grad.ToHost()
		// Check up to 40 positions per input.
		idx := rng.Perm(len(h.Data))
		if len(idx) > 40 {
			idx = idx[:40]
		}
		for _, j := range idx {
			hs := make([]tensor.Host, len(inputs))
			copy(hs, inputs)
			d := append([]float32(nil), h.Data...)
			hs[i] = tensor.Host{Shape: h.Shape, Data: d}
			orig := d[j]
			d[j] = orig + eps
			fp, _, _ := eval(hs, r)
			d[j] = orig - eps
			fm, _, _ := eval(hs, r)
			// The perturbation actually applied, after float32 rounding.
			step := float64(orig+eps) - float64(orig-eps)
			want := (fp - fm) / step
			if diff := math.Abs(float64(got[j]) - want); diff > 2e-3+2e-2*math.Abs(want) {
				t.Errorf("input %d element %d: analytic %.6g, numeric %.6g", i, j, got[j], want)
			}
		}
	}
	g.Release()
	for _, v := range append(in, rv) {
		v.Value.Release()
	}
}

func randHost(rng *rand.Rand, lo, hi float32, shape ...int) tensor.Host {
	return tensor.UniformHost(rng, lo, hi, shape...)
}

// distinct returns values whose gaps exceed the finite-difference step, so
// that a pooling window's maximum does not change under perturbation.
func distinct(rng *rand.Rand, shape ...int) tensor.Host {
	h := tensor.NewHost(shape...)
	for i, j := range rng.Perm(len(h.Data)) {
		h.Data[i] = float32(j)*0.01 - 0.3
	}
	return h
}

// awayFromZero returns values uniform in ±[lo, hi], for ops with a kink at 0.
func awayFromZero(rng *rand.Rand, lo, hi float32, shape ...int) tensor.Host {
	h := randHost(rng, lo, hi, shape...)
	for i := range h.Data {
		if rng.IntN(2) == 0 {
			h.Data[i] = -h.Data[i]
		}
	}
	return h
}

func TestGradients(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(1, 2))
		u := func(shape ...int) tensor.Host { return randHost(rng, -1, 1, shape...) }
		pos := func(shape ...int) tensor.Host { return randHost(rng, 0.5, 2, shape...) }
		labels := []int32{3, 0, 4, 1, 1}
		dropRNG := autograd.NewRNG(42)
		cases := []struct {
			name string
			f    fn
			in   []tensor.Host
		}{
			{"add", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Add(v[0], v[1]) }, []tensor.Host{u(3, 4), u(3, 4)}},
			{"add/broadcast-row", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Add(v[0], v[1]) }, []tensor.Host{u(3, 4), u(4)}},
			{"add/broadcast-left", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Add(v[0], v[1]) }, []tensor.Host{u(3, 1), u(2, 3, 4)}},
			{"sub/broadcast-channel", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Sub(v[0], v[1]) }, []tensor.Host{u(2, 3, 2, 2), u(1, 3, 1, 1)}},
			{"mul", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(v[0], v[1]) }, []tensor.Host{u(3, 4), u(3, 4)}},
			{"mul/broadcast", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(v[0], v[1]) }, []tensor.Host{u(3, 4), u(3, 1)}},
			{"mul/self", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(v[0], v[0]) }, []tensor.Host{u(5)}},
			{"div", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Div(v[0], v[1]) }, []tensor.Host{u(3, 4), pos(4)}},
			{"scale", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Scale(v[0], -2.5) }, []tensor.Host{u(7)}},
			{"relu", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.ReLU(v[0]) }, []tensor.Host{awayFromZero(rng, 0.05, 1, 4, 5)}},
			{"gelu", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.GELU(v[0]) }, []tensor.Host{randHost(rng, -3, 3, 4, 5)}},
			{"tanh", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Tanh(v[0]) }, []tensor.Host{u(4, 5)}},
			{"sigmoid", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Sigmoid(v[0]) }, []tensor.Host{u(4, 5)}},
			{"exp", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Exp(v[0]) }, []tensor.Host{u(6)}},
			{"log", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Log(v[0]) }, []tensor.Host{pos(6)}},
			{"pow", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Pow(v[0], 2.5) }, []tensor.Host{pos(6)}},
			{"reshape", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.Mul(g.Reshape(v[0], 4, -1), v[1])
			}, []tensor.Host{u(2, 6), u(4, 3)}},
			{"sum", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Sum(v[0]) }, []tensor.Host{u(3, 4)}},
			{"mean", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mean(v[0]) }, []tensor.Host{u(3, 4)}},
			{"sum-axis", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.SumAxis(v[0], 1) }, []tensor.Host{u(2, 3, 4)}},
			{"log-softmax", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.LogSoftmax(v[0]) }, []tensor.Host{randHost(rng, -3, 3, 4, 6)}},
			{"cross-entropy", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.CrossEntropy(v[0], labels) }, []tensor.Host{randHost(rng, -3, 3, 5, 6)}},
			{"mse", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MSE(v[0], v[1]) }, []tensor.Host{u(3, 4), u(3, 4)}},
			{"matmul", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MatMul(v[0], v[1]) }, []tensor.Host{u(3, 5), u(5, 4)}},
			{"bmm", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MatMul(v[0], v[1]) }, []tensor.Host{u(2, 3, 5), u(2, 5, 4)}},
			{"linear", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Linear(v[0], v[1], v[2]) }, []tensor.Host{u(4, 5), u(3, 5), u(3)}},
			{"linear/no-bias-3d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Linear(v[0], v[1], nil) }, []tensor.Host{u(2, 4, 5), u(3, 5)}},
			{"conv2d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Conv2d(v[0], v[1], v[2], 1, 1) },
				[]tensor.Host{u(2, 3, 5, 4), u(4, 3, 3, 3), u(4)}},
			{"conv2d/stride2-nobias", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Conv2d(v[0], v[1], nil, 2, 0) },
				[]tensor.Host{u(2, 2, 7, 6), u(3, 2, 3, 2)}},
			{"conv2d/1x1", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Conv2d(v[0], v[1], v[2], 2, 0) },
				[]tensor.Host{u(3, 4, 4, 4), u(2, 4, 1, 1), u(2)}},
			{"maxpool", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MaxPool2d(v[0], 2, 2, 0) },
				[]tensor.Host{distinct(rng, 2, 3, 4, 6)}},
			{"maxpool/3x3s2p1", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MaxPool2d(v[0], 3, 2, 1) },
				[]tensor.Host{distinct(rng, 1, 2, 5, 5)}},
			{"avgpool", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.AvgPool2d(v[0], 3, 2, 1) },
				[]tensor.Host{u(2, 2, 5, 6)}},
			{"global-avgpool", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.GlobalAvgPool(v[0]) },
				[]tensor.Host{u(2, 3, 4, 5)}},
			{"batchnorm/train", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchNorm(v[0], v[1], v[2], autograd.BatchNormParams{Training: true, Momentum: 0.1, Eps: 1e-5})
			}, []tensor.Host{randHost(rng, -2, 3, 4, 3, 2, 2), pos(3), u(3)}},
			{"batchnorm/train-1d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchNorm(v[0], v[1], v[2], autograd.BatchNormParams{Training: true, Momentum: 0.1, Eps: 1e-5})
			}, []tensor.Host{u(6, 4), pos(4), u(4)}},
			{"batchnorm/eval", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				rm := tensor.FromSlice(g.Device(), dtype.F32, device.Temp, []float32{0.1, -0.2, 0.3}, 3)
				rv := tensor.FromSlice(g.Device(), dtype.F32, device.Temp, []float32{1.5, 0.5, 2}, 3)
				defer rm.Release()
				defer rv.Release()
				return g.BatchNorm(v[0], v[1], v[2], autograd.BatchNormParams{RunningMean: rm, RunningVar: rv, Momentum: 0.1, Eps: 1e-5})
			}, []tensor.Host{u(2, 3, 2, 2), pos(3), u(3)}},
			{"dropout", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				// A fresh stream per evaluation gives every evaluation the same mask.
				r := *dropRNG
				return g.Dropout(v[0], 0.4, &r)
			}, []tensor.Host{u(8, 8)}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { gradCheck(t, dev, c.f, c.in...) })
		}
		if s := dev.MemStats(); s.Live.Total != 0 {
			t.Errorf("memory leaked after all checks: %v", s)
		}
	})
}

// TestCastGradient checks that the gradient of an F32 -> F16 cast is the
// incoming gradient rounded to F16 and widened back, so an F32 parameter
// used in F16 receives an F32 gradient.
func TestCastGradient(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		g := autograd.NewGraph(dev)
		defer g.Release()
		w := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1, 2, 3}, 3))
		defer w.Value.Release()
		h := g.Cast(w, dtype.F16)
		if h.DType() != dtype.F16 {
			t.Fatalf("cast dtype = %v, want f16", h.DType())
		}
		r := []float32{0.1, -1.0 / 3, 1e-5}
		rv := g.Leaf(tensor.FromSlice(dev, dtype.F16, device.Temp, r, 3), false)
		defer rv.Value.Release()
		g.Backward(g.Sum(g.Mul(h, rv)))
		if w.Grad.DType() != dtype.F32 {
			t.Errorf("parameter gradient dtype = %v, want f32", w.Grad.DType())
		}
		got := w.Grad.ToHost()
		for i, x := range r {
			if want := dtype.Round(dtype.F16, x); got[i] != want {
				t.Errorf("grad[%d] = %v, want %v", i, got[i], want)
			}
		}
		w.FreeGrad()
	})
}

func ExampleGraph() {
	dev := cpu.New()
	g := autograd.NewGraph(dev)
	defer g.Release()
	w := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{2, -1}, 2))
	x := g.Input(tensor.Host{Shape: []int{2}, Data: []float32{3, 4}})
	loss := g.Sum(g.Mul(w, x)) // 2*3 + -1*4 = 2
	g.Backward(loss)
	fmt.Println(loss.Value.Item(), w.Grad.ToHost())
	// Output: 2 [3 4]
}
