package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest/oracle"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/tensor"
)

// TestTransformerGradients checks the transformer ops' forwards and
// gradients against the oracle, as TestGradients does for the others.
func TestTransformerGradients(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(3, 4))
		u := func(shape ...int) tensor.Host { return randHost(rng, -1, 1, shape...) }
		pos := func(shape ...int) tensor.Host { return randHost(rng, 0.5, 1.5, shape...) }
		ids := []int32{2, 0, 2, 3, 2, 1}
		dropRNG := autograd.NewRNG(11)
		att := func(a autograd.Attention, composed bool) fn {
			return func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				if a.RNG != nil {
					r := *dropRNG // every evaluation draws the same mask
					a.RNG = &r
				}
				if composed {
					return g.AttentionComposed(v[0], a)
				}
				return g.Attention(v[0], a)
			}
		}
		attRef := func(a autograd.Attention) ref {
			p := oracle.AttentionParams{Heads: a.Heads, Scale: float64(a.Scale), Causal: a.Causal, Dropout: float64(a.Dropout)}
			if a.RNG != nil {
				p.Key = oracle.DropKey{Seed: dropRNG.Seed, Offset: dropRNG.Counter}
			}
			return func(in []oracle.Array) oracle.Array { return oracle.Attention(in[0], p) }
		}
		bmm := func(ta, tb bool) ref {
			return func(in []oracle.Array) oracle.Array { return oracle.BatchMatMul(in[0], in[1], ta, tb) }
		}
		causalDrop := autograd.Attention{Heads: 2, Causal: true, Dropout: 0.3, RNG: dropRNG}
		cases := []gradCase{
			{"embedding", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.Embedding(v[0], g.InputIDs(ids, 2, 3))
			}, func(in []oracle.Array) oracle.Array { return oracle.Embedding(in[0], labelsOf(ids), 2, 3) }, []tensor.Host{u(4, 5)}},
			{"layernorm", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.LayerNorm(v[0], v[1], v[2], 1e-5) },
				func(in []oracle.Array) oracle.Array {
					return oracle.LayerNorm(in[0], in[1], &in[2], float64(float32(1e-5)))
				},
				[]tensor.Host{randHost(rng, -2, 3, 2, 3, 6), pos(6), u(6)}},
			{"layernorm/no-bias", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.LayerNorm(v[0], v[1], nil, 1e-5) },
				func(in []oracle.Array) oracle.Array {
					return oracle.LayerNorm(in[0], in[1], nil, float64(float32(1e-5)))
				},
				[]tensor.Host{u(5, 4), pos(4)}},
			{"softmax", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Softmax(v[0]) },
				func(in []oracle.Array) oracle.Array { return oracle.Softmax(in[0]) }, []tensor.Host{randHost(rng, -3, 3, 3, 7)}},
			{"bmm/NN", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchMatMul(v[0], v[1], autograd.NN)
			},
				bmm(false, false), []tensor.Host{u(2, 3, 4), u(2, 4, 5)}},
			{"bmm/NT", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchMatMul(v[0], v[1], autograd.NT)
			},
				bmm(false, true), []tensor.Host{u(2, 3, 4), u(2, 5, 4)}},
			{"bmm/TN", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchMatMul(v[0], v[1], autograd.TN)
			},
				bmm(true, false), []tensor.Host{u(2, 4, 3), u(2, 4, 5)}},
			{"bmm/TT-4d", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				return g.BatchMatMul(v[0], v[1], autograd.TT)
			},
				bmm(true, true), []tensor.Host{u(2, 2, 4, 3), u(2, 2, 5, 4)}},
			{"permute", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var { return g.Mul(g.Permute(v[0], 2, 0, 1), v[1]) },
				func(in []oracle.Array) oracle.Array {
					return binary("mul")([]oracle.Array{oracle.Permute(in[0], 2, 0, 1), in[1]})
				},
				[]tensor.Host{u(2, 3, 4), u(4, 2, 3)}},
			{"chunk/two-of-three", func(g *autograd.Graph, v []*autograd.Var) *autograd.Var {
				p := g.Chunk(v[0], 3)
				return g.Mul(p[0], p[2]) // the middle part gets no gradient
			}, func(in []oracle.Array) oracle.Array {
				p := oracle.Chunk(in[0], 3)
				return binary("mul")([]oracle.Array{p[0], p[2]})
			}, []tensor.Host{u(6, 2)}},
			{"attention/causal", att(autograd.Attention{Heads: 2, Causal: true}, false), attRef(autograd.Attention{Heads: 2, Causal: true}), []tensor.Host{u(2, 5, 12)}},
			{"attention/full", att(autograd.Attention{Heads: 1, Scale: 0.7}, false), attRef(autograd.Attention{Heads: 1, Scale: 0.7}), []tensor.Host{u(1, 4, 9)}},
			{"attention/causal-dropout", att(causalDrop, false), attRef(causalDrop), []tensor.Host{u(2, 6, 12)}},
			{"attention-composed/causal-dropout", att(causalDrop, true), attRef(causalDrop), []tensor.Host{u(2, 6, 12)}},
		}
		runGradCases(t, dev, cases)
	})
}

// TestAttentionMatchesComposed runs the fused attention and its composite
// reference on the same inputs and dropout stream, in F32 and under
// autocast, and compares outputs and the gradient of qkv.
func TestAttentionMatchesComposed(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		cases := []struct {
			b, t, h, d int
			causal     bool
			dropout    float32
		}{
			{2, 7, 2, 4, true, 0},
			{1, 70, 3, 8, true, 0.2},
			{2, 65, 2, 16, false, 0},
			{1, 1, 1, 2, true, 0},
		}
		for _, low := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
			for _, c := range cases {
				name := fmt.Sprintf("%v/%dx%dx%dx%d/causal=%v/dropout=%v", low, c.b, c.t, c.h, c.d, c.causal, c.dropout)
				t.Run(name, func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(c.t), 1))
					in := randHost(rng, -2, 2, c.b, c.t, 3*c.h*c.d)
					dy := randHost(rng, -1, 1, c.b, c.t, c.h*c.d)
					run := func(composed bool) (y, dq []float32) {
						g := autograd.NewGraph(dev)
						defer g.Release()
						if low != dtype.F32 {
							amp.Autocast(g, low)
						}
						x := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, in), true)
						defer x.Value.Release()
						a := autograd.Attention{Heads: c.h, Causal: c.causal, Dropout: c.dropout, RNG: autograd.NewRNG(5)}
						var out *autograd.Var
						if composed {
							out = g.AttentionComposed(x, a)
						} else {
							out = g.Attention(x, a)
						}
						r := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, dy), false)
						defer r.Value.Release()
						g.Backward(g.Sum(g.Mul(out, r)))
						return out.Value.ToHost(), x.Grad.ToHost()
					}
					yf, gf := run(false)
					yc, gc := run(true)
					if low == dtype.F32 {
						atol, rtol := dtype.Tolerance(low)
						compare(t, "y", yf, yc, atol, rtol)
						compare(t, "dqkv", gf, gc, atol, rtol)
						return
					}
					// Under autocast both round to the low dtype, at different
					// places: the composite rounds its logits before the
					// softmax and keeps the exact softmax gradient, the fused
					// op rounds only the weights that multiply v and takes
					// rowsum(dy·y) from its rounded y. Elementwise, a value near
					// zero differs by those roundings of its larger terms, so
					// the two are compared in norm: within a few units of the
					// dtype's rounding of the whole.
					_, rtol := dtype.Tolerance(low)
					normClose(t, "y", yf, yc, rtol/2)
					normClose(t, "dqkv", gf, gc, rtol/2)
				})
			}
		}
	})
}

func compare(t *testing.T, what string, got, want []float32, atol, rtol float64) {
	t.Helper()
	bad := 0
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= atol+rtol*math.Abs(float64(want[i]))) {
			if bad < 5 {
				t.Errorf("%s[%d]: fused %v, composed %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d differ", what, bad, len(want))
	}
}

// normClose checks ||got-want|| <= tol·||want|| in the 2-norm.
func normClose(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	var d, w float64
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		d += e * e
		w += float64(want[i]) * float64(want[i])
	}
	if math.Sqrt(d) > tol*math.Sqrt(w) {
		t.Errorf("%s: ||fused - composed|| = %.3g > %.3g = %v x ||composed||", what, math.Sqrt(d), tol*math.Sqrt(w), tol)
	}
}

// TestMixedAdd checks that Add and Sub of an F32 and a 16-bit operand
// (a residual stream and a low-precision branch) give the bits of adding
// the branch's F32 copy, forward and backward, without making the copy.
func TestMixedAdd(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(8, 8))
		a, b := randHost(rng, -2, 2, 3, 5), randHost(rng, -2, 2, 5)
		dy := randHost(rng, -1, 1, 3, 5)
		for _, low := range []dtype.DType{dtype.BF16, dtype.F16} {
			for _, sub := range []bool{false, true} {
				run := func(castFirst bool) (y, da, db []float32, casts int) {
					g := autograd.NewGraph(dev)
					defer g.Release()
					av := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, a), true)
					defer av.Value.Release()
					bv0 := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, b), true)
					defer bv0.Value.Release()
					bv := g.Cast(bv0, low) // a 16-bit intermediate result
					if castFirst {
						bv = g.Cast(bv, dtype.F32)
					}
					var out *autograd.Var
					if sub {
						out = g.Sub(av, bv)
					} else {
						out = g.Add(av, bv)
					}
					r := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, dy), false)
					defer r.Value.Release()
					n := g.Len()
					g.Backward(g.Sum(g.Mul(out, r)))
					return out.Value.ToHost(), av.Grad.ToHost(), bv0.Grad.ToHost(), n
				}
				y1, da1, db1, n1 := run(true)
				y2, da2, db2, n2 := run(false)
				if n2 != n1-1 {
					t.Errorf("%v sub=%v: %d ops recorded, want one cast fewer than %d", low, sub, n2, n1)
				}
				for _, c := range []struct {
					what string
					x, y []float32
				}{{"y", y1, y2}, {"da", da1, da2}, {"db", db1, db2}} {
					for i := range c.x {
						if math.Float32bits(c.x[i]) != math.Float32bits(c.y[i]) {
							t.Fatalf("%v sub=%v: %s[%d] = %v, %v through a cast", low, sub, c.what, i, c.y[i], c.x[i])
						}
					}
				}
			}
		}
	})
}

// TestNarrowCrossEntropy checks that cross-entropy of 16-bit logits under
// autocast (which runs it in F32) gives the bits of cross-entropy of their
// F32 copy, loss and gradient, without the copy.
func TestNarrowCrossEntropy(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(6, 6))
		x := randHost(rng, -4, 4, 7, 90)
		labels := []int32{0, 89, 3, 3, 45, 12, 7}
		for _, low := range []dtype.DType{dtype.BF16, dtype.F16} {
			run := func(castFirst bool) (loss float32, dx []float32, ops int) {
				g := autograd.NewGraph(dev)
				defer g.Release()
				amp.Autocast(g, low)
				xv := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, x), true)
				defer xv.Value.Release()
				l := g.Cast(xv, low)
				if castFirst {
					l = g.Cast(l, dtype.F32)
				}
				out := g.CrossEntropy(l, labels)
				n := g.Len()
				g.Backward(g.Scale(out, 3))
				return out.Value.Item(), xv.Grad.ToHost(), n
			}
			l1, d1, n1 := run(true)
			l2, d2, n2 := run(false)
			if n2 != n1-1 || math.Float32bits(l1) != math.Float32bits(l2) {
				t.Errorf("%v: loss %v in %d ops, %v in %d through a cast", low, l2, n2, l1, n1)
			}
			for i := range d1 {
				if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
					t.Fatalf("%v: gradient[%d] = %v, %v through a cast", low, i, d2[i], d1[i])
				}
			}
		}
	})
}

// TestRNGShard checks that ranks whose streams are Shard's draw, for their
// parts of a batch, the masks one process draws for the whole batch, for
// dropout and for attention's dropout, and that their counters stay level
// with that process's.
func TestRNGShard(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		const ranks, b = 2, 2
		x := randHost(rand.New(rand.NewPCG(5, 6)), -1, 1, ranks*b, 3, 12)
		ops := map[string]func(g *autograd.Graph, v *autograd.Var, r *autograd.RNG) *autograd.Var{
			"dropout": func(g *autograd.Graph, v *autograd.Var, r *autograd.RNG) *autograd.Var { return g.Dropout(v, 0.5, r) },
			"attention": func(g *autograd.Graph, v *autograd.Var, r *autograd.RNG) *autograd.Var {
				return g.Attention(v, autograd.Attention{Heads: 2, Causal: true, Dropout: 0.5, RNG: r})
			},
		}
		for name, op := range ops {
			// A draw before, as a model's earlier layers make: of 7
			// numbers a sample.
			run := func(x tensor.Host, r *autograd.RNG) []float32 {
				g := autograd.NewGraph(dev)
				defer g.Release()
				g.Draw(r, 7*x.Shape[0])
				return op(g, g.Input(x), r).Value.ToHost()
			}
			whole := autograd.NewRNG(9)
			want := run(x, whole)
			per := len(want) / ranks
			for rank := range ranks {
				r := autograd.NewRNG(9)
				r.Shard(rank, ranks)
				part := tensor.Host{Shape: []int{b, 3, 12}, Data: x.Data[rank*len(x.Data)/ranks : (rank+1)*len(x.Data)/ranks]}
				got := run(part, r)
				for i, v := range got {
					if v != want[rank*per+i] {
						t.Fatalf("%s: rank %d of %d, element %d: %v, one process %v", name, rank, ranks, i, v, want[rank*per+i])
					}
				}
				if r.Counter != whole.Counter {
					t.Errorf("%s: rank %d's counter %d, one process's %d", name, rank, r.Counter, whole.Counter)
				}
			}
		}
	})
}
