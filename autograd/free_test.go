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
// and leaves alone everything something may still read: a value an op
// saved for backward, a view and the tensor it views, a parameter, a
// leaf the graph does not own, another graph's result. A freed Var keeps
// its shape and dtype.
func TestFree(t *testing.T) {
	type setup struct {
		g, other *autograd.Graph
		w, x     *autograd.Var
	}
	for _, c := range []struct {
		name string
		// make returns the Var to free and any the test must keep
		// reachable until the end.
		make  func(s setup) *autograd.Var
		freed bool
	}{
		{"result no op kept", func(s setup) *autograd.Var {
			h := s.g.Linear(s.x, s.w, nil)
			s.g.Add(h, h) // an add keeps nothing
			return h
		}, true},
		{"unrecorded result", func(s setup) *autograd.Var {
			var h *autograd.Var
			s.g.NoGrad(func() { h = s.g.Scale(s.g.Linear(s.x, s.w, nil), 2) })
			return h
		}, true},
		{"kept by a product", func(s setup) *autograd.Var {
			h := s.g.Linear(s.x, s.w, nil)
			s.g.Mul(h, h)
			return h
		}, false},
		{"kept as an output", func(s setup) *autograd.Var {
			return s.g.Softmax(s.g.Linear(s.x, s.w, nil)) // softmax keeps its output
		}, false},
		{"a view", func(s setup) *autograd.Var {
			return s.g.Reshape(s.g.Linear(s.x, s.w, nil), -1)
		}, false},
		{"viewed", func(s setup) *autograd.Var {
			h := s.g.Linear(s.x, s.w, nil)
			s.g.Reshape(h, -1)
			return h
		}, false},
		{"parameter", func(s setup) *autograd.Var { return s.w }, false},
		{"leaf", func(s setup) *autograd.Var {
			return s.g.Leaf(tensor.New(s.g.Device(), dtype.F32, device.Temp, 4, 3), false)
		}, false},
		{"another graph's", func(s setup) *autograd.Var {
			return s.other.Scale(s.other.Input(tensor.NewHost(4, 3)), 2)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(1, 1))
			w := autograd.NewParam("w", tensor.NormalHost(rng, 0, 1, 3, 5))
			w.To(dev)
			defer w.Value.Release()
			s := setup{g: autograd.NewGraph(dev), other: autograd.NewGraph(dev), w: w}
			defer s.g.Release()
			defer s.other.Release()
			s.x = s.g.Input(tensor.NormalHost(rng, 0, 1, 4, 5))
			v := c.make(s)
			shape, dt := append([]int(nil), v.Shape()...), v.DType()
			before := dev.MemStats().Live.Total
			s.g.Free(v)
			s.g.Free(v) // twice: nothing more
			freedBytes := before - dev.MemStats().Live.Total
			want := int64(0)
			if c.freed {
				want = device.Bytes(dt, tensor.Numel(shape))
			}
			if freedBytes != want {
				t.Errorf("Free released %d bytes, want %d", freedBytes, want)
			}
			if v.Value.Released() != c.freed {
				t.Errorf("value released %v, want %v", v.Value.Released(), c.freed)
			}
			if fmt.Sprint(v.Shape()) != fmt.Sprint(shape) || v.DType() != dt {
				t.Errorf("after Free: shape %v dtype %v, want %v %v", v.Shape(), v.DType(), shape, dt)
			}
		})
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
