package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/device/devicetest/oracle"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/tensor"
)

// fn builds the op under test from its inputs.
type fn func(g *autograd.Graph, in []*autograd.Var) *autograd.Var

// ref is the op's float64 forward, from the oracle, on the same inputs.
type ref func(in []oracle.Array) oracle.Array

// gradCase is one op on one set of inputs: the graph's op and the oracle's.
type gradCase struct {
	name string
	f    fn
	ref  ref
	in   []tensor.Host
}

// gradCheck runs c's op on dev in F32 and checks its forward against the
// oracle's, and the gradient of L = Σ r·f(inputs) (r a fixed random
// projection) that its backward pass gives against central differences of
// the oracle's L. The oracle is float64 and written apart from the code
// under test, so the differences are accurate to about 1e-10 of L and a
// wrong backward cannot agree with itself; both comparisons use the F32
// tolerance (dtype.Close).
func gradCheck(t *testing.T, dev device.Device, c gradCase) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 9))
	g := autograd.NewGraph(dev)
	defer g.Release()
	in := make([]*autograd.Var, len(c.in))
	ref := make([]oracle.Array, len(c.in))
	for i, h := range c.in {
		in[i] = g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, h), true)
		defer in[i].Value.Release()
		ref[i] = oracle.FromF32(h.Data, h.Shape...)
	}
	out := c.f(g, in)
	want := c.ref(ref)
	compareF32(t, "forward", out.Value.ToHost(), want.Data, nil)

	r := make([]float32, len(want.Data))
	for i := range r {
		r[i] = float32(rng.Float64()*2 - 1)
	}
	rv := g.Leaf(tensor.FromSlice(dev, dtype.F32, device.Temp, r, out.Shape()...), false)
	defer rv.Value.Release()
	g.Backward(g.Sum(g.Mul(out, rv)))
	proj := oracle.FromF32(r, want.Shape...)
	loss := func() float64 { return oracle.Dot(proj, c.ref(ref)) }
	for i, x := range ref {
		if in[i].Grad == nil {
			t.Fatalf("input %d: no gradient", i)
		}
		got := in[i].Grad.ToHost()
		idx := rng.Perm(len(x.Data))
		if len(idx) > 40 {
			idx = idx[:40]
		}
		num := make([]float64, len(idx))
		for k, j := range idx {
			orig := x.Data[j]
			h := 1e-6 * max(1, math.Abs(orig))
			x.Data[j] = orig + h
			lp := loss()
			x.Data[j] = orig - h
			lm := loss()
			x.Data[j] = orig
			num[k] = (lp - lm) / (2 * h)
		}
		compareF32(t, fmt.Sprintf("gradient of input %d", i), got, num, idx)
	}
}

// compareF32 checks got[at[k]] against want[k] with the F32 tolerance (at
// nil: every element in order).
func compareF32(t *testing.T, what string, got []float32, want []float64, at []int) {
	t.Helper()
	if at == nil && len(got) != len(want) {
		t.Fatalf("%s: %d values, the oracle %d", what, len(got), len(want))
	}
	bad := 0
	for k := range want {
		i := k
		if at != nil {
			i = at[k]
		}
		if !dtype.Close(dtype.F32, float64(got[i]), want[k], 0) {
			if bad < 5 {
				t.Errorf("%s [%d]: got %.8g, oracle %.8g", what, i, got[i], want[k])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values outside the F32 tolerance", what, bad, len(want))
	}
}

// runGradCases runs gradCheck on each case as a subtest, then checks that
// no memory is left on the device.
func runGradCases(t *testing.T, dev device.Device, cases []gradCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { gradCheck(t, dev, c) })
	}
	if s := dev.MemStats(); s.Live.Total != 0 {
		t.Errorf("memory leaked after all checks: %v", s)
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

// domainHost draws shape's values from an op's input domain.
func domainHost(rng *rand.Rand, d device.Domain, shape ...int) tensor.Host {
	h := randHost(rng, float32(d.Lo), float32(d.Hi), shape...)
	for i := range h.Data {
		if d.Signed && rng.IntN(2) == 0 {
			h.Data[i] = -h.Data[i]
		}
	}
	return h
}

// unaryCases are the cases of every op of device's unary table, on each of
// its input domains: the oracle's forward, and its derivative through the
// differences, check what the op's row makes of it.
func unaryCases(rng *rand.Rand) []gradCase {
	var cases []gradCase
	for op := range device.UnaryOp(device.NumUnaryOps) {
		u, ok := oracle.UnaryOp(op.String())
		if !ok {
			continue // oracle's TestCoversTable
		}
		for _, d := range op.Def().Domains {
			alpha := d.Alpha
			name := "unary/" + op.String()
			if d.Name != "" {
				name += "/" + d.Name
			}
			cases = append(cases, gradCase{
				name: name,
				f:    func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Unary(op, v[0], alpha) },
				ref: func(a []oracle.Array) oracle.Array {
					return a[0].Map(func(x float64) float64 { return u.F(x, float64(alpha)) })
				},
				in: []tensor.Host{domainHost(rng, d, 4, 5)},
			})
		}
	}
	return cases
}

// binary is a binary op's reference through broadcasting.
func binary(name string) ref {
	f, _ := oracle.BinaryOp(name)
	return func(a []oracle.Array) oracle.Array { return oracle.Broadcast(f, a[0], a[1]) }
}

// labelsOf is labels as ints, for the oracle.
func labelsOf(l []int32) []int {
	out := make([]int, len(l))
	for i, v := range l {
		out[i] = int(v)
	}
	return out
}

func TestGradients(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(1, 2))
		u := func(shape ...int) tensor.Host { return randHost(rng, -1, 1, shape...) }
		pos := func(shape ...int) tensor.Host { return randHost(rng, 0.5, 2, shape...) }
		labels := []int32{3, 0, 4, 1, 1}
		dropRNG := autograd.NewRNG(42)
		bnTrain := autograd.BatchNormParams{Training: true, Momentum: 0.1, Eps: 1e-5}
		rmean, rvar := []float32{0.1, -0.2, 0.3}, []float32{1.5, 0.5, 2}
		cases := []gradCase{
			{"add", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Add(v[0], v[1]) }, binary("add"), []tensor.Host{u(3, 4), u(3, 4)}},
			{"add/broadcast-row", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Add(v[0], v[1]) }, binary("add"), []tensor.Host{u(3, 4), u(4)}},
			{"add/broadcast-left", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Add(v[0], v[1]) }, binary("add"), []tensor.Host{u(3, 1), u(2, 3, 4)}},
			{"sub/broadcast-channel", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Sub(v[0], v[1]) }, binary("sub"), []tensor.Host{u(2, 3, 2, 2), u(1, 3, 1, 1)}},
			{"mul", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(v[0], v[1]) }, binary("mul"), []tensor.Host{u(3, 4), u(3, 4)}},
			{"mul/broadcast", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(v[0], v[1]) }, binary("mul"), []tensor.Host{u(3, 4), u(3, 1)}},
			{"mul/self", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(v[0], v[0]) },
				func(a []oracle.Array) oracle.Array { return binary("mul")([]oracle.Array{a[0], a[0]}) }, []tensor.Host{u(5)}},
			{"div", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Div(v[0], v[1]) }, binary("div"), []tensor.Host{u(3, 4), pos(4)}},
			{"reshape", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(g.Reshape(v[0], 4, -1), v[1]) },
				func(a []oracle.Array) oracle.Array { return binary("mul")([]oracle.Array{a[0].Reshape(4, 3), a[1]}) }, []tensor.Host{u(2, 6), u(4, 3)}},
			{"sum", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Sum(v[0]) },
				func(a []oracle.Array) oracle.Array { return oracle.Sum(a[0]) }, []tensor.Host{u(3, 4)}},
			{"mean", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mean(v[0]) },
				func(a []oracle.Array) oracle.Array { return oracle.MeanAll(a[0]) }, []tensor.Host{u(3, 4)}},
			{"sum-axis", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.SumAxis(v[0], 1) },
				func(a []oracle.Array) oracle.Array { return oracle.SumAxis(a[0], 1) }, []tensor.Host{u(2, 3, 4)}},
			{"log-softmax", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.LogSoftmax(v[0]) },
				func(a []oracle.Array) oracle.Array { return oracle.LogSoftmax(a[0]) }, []tensor.Host{randHost(rng, -3, 3, 4, 6)}},
			{"cross-entropy", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.CrossEntropy(v[0], labels) },
				func(a []oracle.Array) oracle.Array { return oracle.CrossEntropy(a[0], labelsOf(labels)) }, []tensor.Host{randHost(rng, -3, 3, 5, 6)}},
			{"mse", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MSE(v[0], v[1]) },
				func(a []oracle.Array) oracle.Array { return oracle.MSE(a[0], a[1]) }, []tensor.Host{u(3, 4), u(3, 4)}},
			{"matmul", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MatMul(v[0], v[1]) },
				func(a []oracle.Array) oracle.Array { return oracle.MatMul(a[0], a[1]) }, []tensor.Host{u(3, 5), u(5, 4)}},
			{"bmm", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MatMul(v[0], v[1]) },
				func(a []oracle.Array) oracle.Array { return oracle.MatMul(a[0], a[1]) }, []tensor.Host{u(2, 3, 5), u(2, 5, 4)}},
			{"linear", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Linear(v[0], v[1], v[2]) },
				func(a []oracle.Array) oracle.Array { return oracle.Linear(a[0], a[1], &a[2]) }, []tensor.Host{u(4, 5), u(3, 5), u(3)}},
			{"linear/no-bias-3d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Linear(v[0], v[1], nil) },
				func(a []oracle.Array) oracle.Array { return oracle.Linear(a[0], a[1], nil) }, []tensor.Host{u(2, 4, 5), u(3, 5)}},
			{"conv2d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Conv2d(v[0], v[1], v[2], 1, 1) },
				func(a []oracle.Array) oracle.Array { return oracle.Conv2d(a[0], a[1], &a[2], 1, 1) },
				[]tensor.Host{u(2, 3, 5, 4), u(4, 3, 3, 3), u(4)}},
			{"conv2d/stride2-nobias", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Conv2d(v[0], v[1], nil, 2, 0) },
				func(a []oracle.Array) oracle.Array { return oracle.Conv2d(a[0], a[1], nil, 2, 0) },
				[]tensor.Host{u(2, 2, 7, 6), u(3, 2, 3, 2)}},
			{"conv2d/1x1", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Conv2d(v[0], v[1], v[2], 2, 0) },
				func(a []oracle.Array) oracle.Array { return oracle.Conv2d(a[0], a[1], &a[2], 2, 0) },
				[]tensor.Host{u(3, 4, 4, 4), u(2, 4, 1, 1), u(2)}},
			{"maxpool", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MaxPool2d(v[0], 2, 2, 0) },
				func(a []oracle.Array) oracle.Array { return oracle.MaxPool2d(a[0], 2, 2, 0) }, []tensor.Host{distinct(rng, 2, 3, 4, 6)}},
			{"maxpool/3x3s2p1", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.MaxPool2d(v[0], 3, 2, 1) },
				func(a []oracle.Array) oracle.Array { return oracle.MaxPool2d(a[0], 3, 2, 1) }, []tensor.Host{distinct(rng, 1, 2, 5, 5)}},
			{"avgpool", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.AvgPool2d(v[0], 3, 2, 1) },
				func(a []oracle.Array) oracle.Array { return oracle.AvgPool2d(a[0], 3, 2, 1) }, []tensor.Host{u(2, 2, 5, 6)}},
			{"global-avgpool", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.GlobalAvgPool(v[0]) },
				func(a []oracle.Array) oracle.Array { return oracle.GlobalAvgPool(a[0]) }, []tensor.Host{u(2, 3, 4, 5)}},
			{"batchnorm/train", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchNorm(v[0], v[1], v[2], bnTrain)
			},
				func(a []oracle.Array) oracle.Array { return oracle.BatchNorm(a[0], &a[1], &a[2], nil, nil, 1e-5) },
				[]tensor.Host{randHost(rng, -2, 3, 4, 3, 2, 2), pos(3), u(3)}},
			{"batchnorm/train-1d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchNorm(v[0], v[1], v[2], bnTrain)
			},
				func(a []oracle.Array) oracle.Array { return oracle.BatchNorm(a[0], &a[1], &a[2], nil, nil, 1e-5) },
				[]tensor.Host{u(6, 4), pos(4), u(4)}},
			{"batchnorm/eval", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				rm := tensor.FromSlice(g.Device(), dtype.F32, device.Temp, rmean, 3)
				rv := tensor.FromSlice(g.Device(), dtype.F32, device.Temp, rvar, 3)
				defer rm.Release()
				defer rv.Release()
				return g.BatchNorm(v[0], v[1], v[2], autograd.BatchNormParams{RunningMean: rm, RunningVar: rv, Momentum: 0.1, Eps: 1e-5})
			}, func(a []oracle.Array) oracle.Array {
				m, v := oracle.FromF32(rmean, 3), oracle.FromF32(rvar, 3)
				return oracle.BatchNorm(a[0], &a[1], &a[2], &m, &v, float64(float32(1e-5)))
			}, []tensor.Host{u(2, 3, 2, 2), pos(3), u(3)}},
			{"dropout", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				r := *dropRNG // the mask of dropRNG's first draw
				return g.Dropout(v[0], 0.4, &r)
			}, func(a []oracle.Array) oracle.Array {
				return oracle.Dropout(a[0], float64(float32(0.4)), oracle.DropKey{Seed: dropRNG.Seed, Offset: dropRNG.Counter})
			}, []tensor.Host{u(8, 8)}},
		}
		runGradCases(t, dev, append(cases, unaryCases(rng)...))
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
