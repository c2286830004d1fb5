package amp_test

import (
	"fmt"
	"github.com/mixprec/mixprec/internal/testdev"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestClassTable pins the policy tables to PyTorch's CUDA autocast lists.
func TestClassTable(t *testing.T) {
	want := map[autograd.Op]amp.Class{
		autograd.OpMatMul: amp.Low, autograd.OpLinear: amp.Low, autograd.OpConv: amp.Low, autograd.OpBMM: amp.Low,
		autograd.OpAttention: amp.Low, // scaled_dot_product_attention is on the lower-precision list
		autograd.OpSoftmax:   amp.F32, autograd.OpLogSoftmax: amp.F32, autograd.OpCrossEntropy: amp.F32,
		autograd.OpSum: amp.F32, autograd.OpMean: amp.F32, autograd.OpExp: amp.F32,
		autograd.OpLog: amp.F32, autograd.OpPow: amp.F32, autograd.OpRsqrt: amp.F32, autograd.OpRecip: amp.F32,
		autograd.OpMSE: amp.F32, autograd.OpLayerNorm: amp.F32, autograd.OpBatchNorm: amp.F32,
		autograd.OpBatchNormReLU: amp.F32, // batch_norm's class: F32 arithmetic, output in the input's dtype
	}
	for _, op := range autograd.Ops() {
		w, ok := want[op]
		if !ok {
			w = amp.Promote
		}
		if got := amp.ClassOf(op); got != w {
			t.Errorf("ClassOf(%v) = %v, want %v", op, got, w)
		}
	}
}

// TestOpDTypes runs one op of each family under each autocast dtype and
// checks the dtype its output (and so its computation) has.
func TestOpDTypes(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(1, 1))
		for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(low.String(), func(t *testing.T) {
				g := autograd.NewGraph(dev)
				defer g.Release()
				amp.Autocast(g, low)
				w := autograd.ParamOf("w", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 4, 6))
				b := autograd.ParamOf("b", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 4))
				defer w.Value.Release()
				defer b.Value.Release()
				x := g.Input(tensor.UniformHost(rng, 0.1, 1, 3, 6))
				lin := g.Linear(x, w, b)
				xl := g.Cast(x, low)
				img := g.Input(tensor.UniformHost(rng, -1, 1, 2, 3, 6, 6))
				cw := autograd.ParamOf("cw", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 4, 3, 3, 3))
				gamma := autograd.ParamOf("gamma", tensor.Full(dev, dtype.F32, device.Param, 1, 4))
				beta := autograd.ParamOf("beta", tensor.Zeros(dev, dtype.F32, device.Param, 4))
				defer cw.Value.Release()
				defer gamma.Value.Release()
				defer beta.Value.Release()
				conv := g.Conv2d(img, cw, nil, 1, 1)
				bn := g.BatchNorm(conv, gamma, beta, autograd.BatchNormParams{Training: true, Momentum: 0.1, Eps: 1e-5})
				cases := []struct {
					name string
					v    *autograd.Var
					want dtype.DType
				}{
					{"linear", lin, low},
					{"conv", conv, low},
					{"batch norm keeps its input's storage (statistics in f32)", bn, low},
					{"max pool keeps its input's dtype", g.MaxPool2d(conv, 2, 2, 0), low},
					{"global average pool keeps its input's dtype", g.GlobalAvgPool(conv), low},
					{"residual add of two low", g.Add(conv, conv), low},
					{"matmul", g.MatMul(x, g.Reshape(x, 6, 3)), low},
					{"relu keeps its input's dtype", g.ReLU(lin), low},
					{"gelu keeps its input's dtype", g.GELU(lin), low},
					{"dropout keeps its input's dtype", g.Dropout(lin, 0.5, autograd.NewRNG(1)), low},
					{"add of two low", g.Add(lin, lin), low},
					{"add of low and f32 promotes", g.Add(lin, g.Input(tensor.NewHost(3, 4))), dtype.F32},
					{"mul of low and f32 promotes", g.Mul(xl, x), dtype.F32},
					{"log-softmax", g.LogSoftmax(lin), dtype.F32},
					{"cross-entropy", g.CrossEntropy(lin, []int32{0, 1, 2}), dtype.F32},
					{"sum", g.Sum(lin), dtype.F32},
					{"mean", g.Mean(lin), dtype.F32},
					{"exp", g.Exp(lin), dtype.F32},
					{"log", g.Log(xl), dtype.F32},
					{"pow", g.Pow(xl, 2), dtype.F32},
					{"mse", g.MSE(lin, lin), dtype.F32},
				}
				for _, c := range cases {
					if got := c.v.DType(); got != c.want {
						t.Errorf("%s: dtype %v, want %v", c.name, got, c.want)
					}
				}
			})
		}
	})
}

// TestWeightCastCachedAndGradF32 checks that a weight used twice is cast
// once, that the copy is accounted as Cast and kept across graphs until the
// weight changes or is released, and that the F32 master weight gets an
// F32 gradient.
func TestWeightCastCachedAndGradF32(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(2, 2))
		w := autograd.ParamOf("w", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 5, 5))
		const castBytes = 5 * 5 * 2 // one f16 copy of w
		for step := range 2 {
			allocs := dev.MemStats().Allocs
			g := autograd.NewGraph(dev)
			amp.Autocast(g, dtype.F16)
			x := g.Input(tensor.UniformHost(rng, -1, 1, 2, 5))
			y := g.Linear(g.Linear(x, w, nil), w, nil)
			if got := dev.MemStats().Live.Category(device.Cast); got != castBytes {
				t.Errorf("step %d: cast bytes = %d, want %d (one f16 copy of w)", step, got, castBytes)
			}
			// Input, its f16 cast and two outputs; the first step also the copy of w.
			if got, want := dev.MemStats().Allocs-allocs, int64(4+1-step); got != want {
				t.Errorf("step %d: %d allocations in the forward pass, want %d", step, got, want)
			}
			g.Backward(g.Sum(y))
			if w.Grad.DType() != dtype.F32 {
				t.Errorf("weight gradient dtype %v, want f32", w.Grad.DType())
			}
			g.Release()
			w.FreeGrad()
			if live := dev.MemStats().Live; live.Total != live.Category(device.Param)+castBytes {
				t.Errorf("step %d: after Release, live memory other than params and w's copy: %v", step, dev.MemStats())
			}
		}
		w.Value.Release()
		if live := dev.MemStats().Live.Total; live != 0 {
			t.Errorf("after releasing w, %d bytes live; want 0 (its copy goes with it)", live)
		}
	})
}

// TestWeightCastFollowsUpdates checks that a weight changed between graphs
// (SetValues, an optimiser's step) is cast again, not served stale.
func TestWeightCastFollowsUpdates(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		w := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1, 2, 3, 4}, 2, 2))
		defer w.Value.Release()
		x := tensor.Host{Shape: []int{1, 2}, Data: []float32{1, 1}}
		forward := func() []float32 {
			g := autograd.NewGraph(dev)
			defer g.Release()
			amp.Autocast(g, dtype.BF16)
			return g.Linear(g.Input(x), w, nil).Value.ToHost()
		}
		if got := forward(); got[0] != 3 || got[1] != 7 {
			t.Fatalf("x·wᵀ = %v, want [3 7]", got)
		}
		w.SetValues([]float32{10, 20, 30, 40})
		if got := forward(); got[0] != 30 || got[1] != 70 {
			t.Errorf("after SetValues, x·wᵀ = %v, want [30 70]", got)
		}
	})
}

// TestBackwardRunsInForwardDType checks that the gradient flowing into an
// op's input has the dtype the op computed in.
func TestBackwardRunsInForwardDType(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(3, 3))
		g := autograd.NewGraph(dev)
		defer g.Release()
		amp.Autocast(g, dtype.BF16)
		x := g.Leaf(tensor.Uniform(dev, dtype.F32, device.Temp, rng, -1, 1, 4, 3), true)
		defer x.Value.Release()
		w := autograd.ParamOf("w", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 2, 3))
		defer w.Value.Release()
		h := g.Linear(x, w, nil) // bf16
		h.RetainGrad()
		g.Backward(g.Mean(h)) // mean runs in f32; its gradient is cast back to bf16
		if h.Grad.DType() != dtype.BF16 {
			t.Errorf("gradient of a bf16 linear output has dtype %v", h.Grad.DType())
		}
		if x.Grad.DType() != dtype.F32 {
			t.Errorf("gradient of the f32 input has dtype %v", x.Grad.DType())
		}
	})
}

func ExampleAutocast() {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 2))
	w := autograd.ParamOf("w", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 3, 4))
	g := autograd.NewGraph(dev)
	amp.Autocast(g, dtype.F16)
	x := g.Input(tensor.UniformHost(rng, -1, 1, 2, 4))
	y := g.Linear(x, w, nil)
	fmt.Println(y.DType(), g.Mean(y).DType())
	g.Release()
	// Output: f16 f32
}
