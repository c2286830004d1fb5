package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestFree: Graph.Free releases at once the value of a result no op kept,
// a value an op kept once the backward pass has run that op, and leaves
// alone everything else something may still read: a view and the tensor
// it views, a parameter, a leaf the graph does not own, another graph's
// result. A freed Var keeps its shape and dtype.
func TestFree(t *testing.T) {
	type setup struct {
		g, other *autograd.Graph
		w, x     *autograd.Var
	}
	const (
		kept  = iota // until Release
		now          // by Free
		later        // by Backward
	)
	for _, c := range []struct {
		name string
		// make returns the Var to free and a loss to run Backward from
		// (nil: none).
		make  func(s setup) (v, loss *autograd.Var)
		freed int
	}{
		{"result no op kept", func(s setup) (*autograd.Var, *autograd.Var) {
			h := s.g.Linear(s.x, s.w, nil)
			return h, s.g.Sum(s.g.Add(h, h)) // an add keeps nothing
		}, now},
		{"unrecorded result", func(s setup) (*autograd.Var, *autograd.Var) {
			var h *autograd.Var
			s.g.NoGrad(func() { h = s.g.Scale(s.g.Linear(s.x, s.w, nil), 2) })
			return h, nil
		}, now},
		{"kept by a product", func(s setup) (*autograd.Var, *autograd.Var) {
			h := s.g.Linear(s.x, s.w, nil)
			return h, s.g.Sum(s.g.Mul(h, h))
		}, later},
		{"kept by two", func(s setup) (*autograd.Var, *autograd.Var) {
			h := s.g.Linear(s.x, s.w, nil)
			return h, s.g.Add(s.g.Sum(s.g.Mul(h, h)), s.g.Sum(s.g.Linear(h, s.g.Reshape(s.w, 5, 3), nil)))
		}, later},
		{"kept as an output", func(s setup) (*autograd.Var, *autograd.Var) {
			y := s.g.Softmax(s.g.Linear(s.x, s.w, nil)) // softmax keeps its output
			return y, s.g.Sum(s.g.Scale(y, 2))
		}, later},
		{"kept, no backward", func(s setup) (*autograd.Var, *autograd.Var) {
			h := s.g.Linear(s.x, s.w, nil)
			s.g.Mul(h, h)
			return h, nil
		}, kept},
		{"a view", func(s setup) (*autograd.Var, *autograd.Var) {
			v := s.g.Reshape(s.g.Linear(s.x, s.w, nil), -1)
			return v, s.g.Sum(v)
		}, kept},
		{"viewed", func(s setup) (*autograd.Var, *autograd.Var) {
			h := s.g.Linear(s.x, s.w, nil)
			return h, s.g.Sum(s.g.Reshape(h, -1))
		}, kept},
		{"parameter", func(s setup) (*autograd.Var, *autograd.Var) { return s.w, nil }, kept},
		{"leaf", func(s setup) (*autograd.Var, *autograd.Var) {
			return s.g.Leaf(tensor.New(s.g.Device(), dtype.F32, device.Temp, 4, 3), false), nil
		}, kept},
		{"another graph's", func(s setup) (*autograd.Var, *autograd.Var) {
			return s.other.Scale(s.other.Input(tensor.NewHost(4, 3)), 2), nil
		}, kept},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(1, 1))
			w := autograd.NewParam("w", tensor.NormalHost(rng, 0, 1, 3, 5))
			w.To(dev)
			defer w.FreeGrad()
			defer w.Value.Release()
			s := setup{g: autograd.NewGraph(dev), other: autograd.NewGraph(dev), w: w}
			defer s.g.Release()
			defer s.other.Release()
			s.x = s.g.Input(tensor.NormalHost(rng, 0, 1, 4, 5))
			v, loss := c.make(s)
			shape, dt := append([]int(nil), v.Shape()...), v.DType()
			size := device.Bytes(dt, tensor.Numel(shape))
			before := dev.MemStats().Live.Total
			s.g.Free(v)
			s.g.Free(v) // twice: nothing more
			want := int64(0)
			if c.freed == now {
				want = size
			}
			if got := before - dev.MemStats().Live.Total; got != want {
				t.Errorf("Free released %d bytes, want %d", got, want)
			}
			if got := v.Value.Released(); got != (c.freed == now) {
				t.Errorf("value released %v after Free, want %v", got, c.freed == now)
			}
			if loss != nil {
				s.g.Backward(loss) // the kept value is read here
				if got := v.Value.Released(); got != (c.freed != kept) {
					t.Errorf("value released %v after Backward, want %v", got, c.freed != kept)
				}
			}
			if fmt.Sprint(v.Shape()) != fmt.Sprint(shape) || v.DType() != dt {
				t.Errorf("after Free: shape %v dtype %v, want %v %v", v.Shape(), v.DType(), shape, dt)
			}
		})
	}
}

// TestFreeAfterBackward: a value kept for backward that is freed once the
// backward pass has run goes at once.
func TestFreeAfterBackward(t *testing.T) {
	dev := cpu.New()
	w := autograd.ParamOf("w", tensor.Full(dev, dtype.F32, device.Param, 0.5, 3, 5))
	defer w.Value.Release()
	defer w.FreeGrad()
	g := autograd.NewGraph(dev)
	defer g.Release()
	h := g.Linear(g.Input(tensor.NewHost(4, 5)), w, nil)
	g.Backward(g.Sum(g.Mul(h, h)))
	g.Free(h)
	if !h.Value.Released() {
		t.Error("a kept value freed after Backward is still live")
	}
}

// TestFreedUsePanics: an op given a freed Var panics naming the op and
// Free; reading the tensor directly panics as after Release.
func TestFreedUsePanics(t *testing.T) {
	dev := cpu.New()
	g := autograd.NewGraph(dev)
	defer g.Release()
	h := g.Scale(g.Input(tensor.NewHost(2, 3)), 2)
	g.Free(h)
	// A value kept for backward is freed only after it, but the Var may
	// not be used meanwhile either.
	lt := tensor.Zeros(dev, dtype.F32, device.Temp, 2, 3)
	defer lt.Release()
	k := g.Scale(g.Leaf(lt, true), 2)
	g.Mul(k, k)
	g.Free(k)
	for _, c := range []struct {
		name string
		use  func()
		want []string
	}{
		{"add", func() { g.Add(h, h) }, []string{"autograd.add", "freed by Graph.Free"}},
		{"relu", func() { g.ReLU(h) }, []string{"autograd.relu", "freed by Graph.Free"}},
		{"reshape", func() { g.Reshape(h, 6) }, []string{"autograd.Reshape", "freed by Graph.Free"}},
		{"backward", func() { g.Backward(g.Sum(h)) }, []string{"autograd.sum", "freed by Graph.Free"}},
		{"tensor", func() { h.Value.ToHost() }, []string{"tensor.ToHost", "used after Release"}},
		{"kept, not yet released", func() { g.Exp(k) }, []string{"autograd.exp", "freed by Graph.Free"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := fmt.Sprint(recover())
				for _, w := range c.want {
					if !strings.Contains(r, w) {
						t.Errorf("panic %q, want one containing %q", r, w)
					}
				}
			}()
			c.use()
		})
	}
}

// freePolicy runs products in BF16 and the rest as the default does, as
// autocast does for the ops of freeNet.
type freePolicy struct{}

func (freePolicy) ComputeType(op autograd.Op, in ...dtype.DType) dtype.DType {
	if op == autograd.OpLinear {
		return dtype.BF16
	}
	return autograd.Promote(in...)
}

// freeNet is two pre-norm residual blocks of a Linear and a GELU, freeing
// (when free) every result once the next residual sum exists, as nn's
// transformer block does.
func freeNet(g *autograd.Graph, x *autograd.Var, ps []*autograd.Var, free bool) *autograd.Var {
	maybe := func(vs ...*autograd.Var) {
		if free {
			g.Free(vs...)
		}
	}
	for i := 0; i < len(ps); i += 3 {
		n := g.LayerNorm(x, ps[i], ps[i+1], 1e-5)
		a := g.GELU(g.Linear(n, ps[i+2], nil))
		y := g.Add(x, a)
		maybe(a, n)
		if i > 0 {
			maybe(x)
		}
		x = y
	}
	return g.Mean(g.Mul(x, x))
}

// TestFreeKeepsGradients: freeing dead results changes no bit of the loss
// or the gradients, in F32 and with BF16 products, whether the blocks run
// plainly or as checkpointed segments (whose recomputation also frees the
// segment's outputs).
func TestFreeKeepsGradients(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(3, 4))
	xh := tensor.NormalHost(rng, 0, 1, 6, 8)
	var ps []*autograd.Var
	for range 2 {
		ps = append(ps, autograd.NewParam("ln.w", tensor.NormalHost(rng, 1, 0.1, 8)),
			autograd.NewParam("ln.b", tensor.NormalHost(rng, 0, 0.1, 8)),
			autograd.NewParam("fc.w", tensor.NormalHost(rng, 0, 0.3, 8, 8)))
	}
	for _, p := range ps {
		p.To(dev)
	}
	run := func(policy autograd.CastPolicy, free, ckpt bool) (float32, [][]float32) {
		g := autograd.NewGraph(dev, autograd.WithPolicy(policy))
		defer g.Release()
		x := g.Input(xh)
		var loss *autograd.Var
		if ckpt {
			y := g.Checkpoint(func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var {
				return []*autograd.Var{g.Scale(in[0], 1), g.Softmax(in[0])} // one output kept inside, one not
			}, g.Linear(x, ps[2], nil))
			loss = g.Add(freeNet(g, y[0], ps, free), g.Mean(y[1]))
		} else {
			loss = freeNet(g, g.Scale(g.Linear(x, ps[2], nil), 1), ps, free)
		}
		g.Backward(loss)
		var grads [][]float32
		for _, p := range ps {
			grads = append(grads, p.Grad.ToHost())
			p.FreeGrad()
		}
		return loss.Value.Item(), grads
	}
	for _, c := range []struct {
		name   string
		policy autograd.CastPolicy
		ckpt   bool
	}{{"f32", nil, false}, {"bf16", freePolicy{}, false}, {"f32/checkpoint", nil, true}, {"bf16/checkpoint", freePolicy{}, true}} {
		t.Run(c.name, func(t *testing.T) {
			l0, g0 := run(c.policy, false, c.ckpt)
			l1, g1 := run(c.policy, true, c.ckpt)
			if math.Float32bits(l0) != math.Float32bits(l1) {
				t.Errorf("loss %v with Free, %v without", l1, l0)
			}
			for i := range g0 {
				for j := range g0[i] {
					if math.Float32bits(g0[i][j]) != math.Float32bits(g1[i][j]) {
						t.Fatalf("gradient of %s[%d] = %v with Free, %v without", ps[i].Name, j, g1[i][j], g0[i][j])
					}
				}
			}
		})
	}
	for _, p := range ps {
		p.Value.Release() // and its autocast copy
	}
	if s := dev.MemStats(); s.Live.Total != 0 {
		t.Errorf("memory left: %v", s)
	}
}

// TestLayerNormKeeps: a LayerNorm keeps x̂, in its output's dtype when that
// is 16-bit and else in F32, and the F32 rstd, but not its input; both go
// as soon as the backward pass has run the LayerNorm.
func TestLayerNormKeeps(t *testing.T) {
	const rows, cols = 6, 8
	for _, out := range dtype.All {
		t.Run(out.String(), func(t *testing.T) {
			dev := cpu.New()
			w := autograd.ParamOf("w", tensor.Full(dev, dtype.F32, device.Param, 1, cols))
			defer w.Value.Release()
			defer w.FreeGrad()
			g := autograd.NewGraph(dev)
			defer g.Release()
			x := g.Input(tensor.NormalHost(rand.New(rand.NewPCG(1, 2)), 0, 1, rows, cols))
			y := g.LayerNormTo(x, w, nil, 1e-5, out)
			hat := dtype.F32
			if out != dtype.F32 {
				hat = out
			}
			want := device.Bytes(hat, rows*cols) + device.Bytes(dtype.F32, rows)
			if got := dev.MemStats().Live.Category(device.Activation); got != want || x.Value.Category() != device.Temp {
				t.Errorf("kept %d bytes (input kept: %v), want %d: x̂ in %v and rstd", got, x.Value.Category() != device.Temp, want, hat)
			}
			g.Backward(g.Sum(y))
			if got := dev.MemStats().Live.Category(device.Activation); got != 0 {
				t.Errorf("%d bytes kept after Backward, want 0", got)
			}
		})
	}
}
