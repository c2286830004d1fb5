package autograd

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/tensor"
)

// Segment is a piece of a model run as a unit by Checkpoint: it records its
// computation of in on g and returns its outputs, which must be produced
// inside it.
type Segment func(g *Graph, in []*Var) []*Var

// Checkpoint runs fn without keeping its intermediate results (gradient
// checkpointing, Chen et al. 2016): only its inputs and outputs stay. When
// the backward pass reaches the segment it runs fn again, recording this
// time, under the same cast policy and with the same random numbers (every
// Draw is replayed), back-propagates through it and frees the recomputed
// results before moving on. Gradients equal those without checkpointing.
//
// Autocast's copies of the segment's parameters live as long as each pass
// over it, as its other results do, unless a parameter keeps one already
// (tensor.CachedCast, made outside any segment): a checkpointed model then
// holds one segment's copies at a time, not every layer's for as long as
// the parameters live, at the price of converting them in each pass.
//
// fn must be deterministic and must not depend on anything but its inputs
// and parameters. Under NoGrad, Checkpoint simply calls fn.
func (g *Graph) Checkpoint(fn Segment, in ...*Var) []*Var {
	g.check()
	if g.noGrad > 0 {
		return fn(g, in)
	}
	g.ready.uncertain() // the segment's uses of parameters are not on this tape
	rec := &recorder{src: g.rng}
	c := &Graph{dev: g.dev, policy: g.policy, rng: rec, saveCat: device.Temp, noGrad: 1, replay: g.replay, obs: g.obs, segment: true, im2col: g.im2col, colChunk: g.colChunk}
	outs := g.adoptOutputs(c, fn(c, in))
	c.Release()
	if !c.sawGrad {
		return outs // nothing inside needs a gradient: nothing to recompute
	}
	for _, v := range in {
		g.save(v.Value)
	}
	keys := rec.keys
	g.pushMulti(OpCheckpoint, outs, in, func(dys []*tensor.Tensor) {
		rc := &Graph{dev: g.dev, policy: g.policy, rng: &replayer{keys: keys}, saveCat: device.Recompute, replay: true, ready: g.ready.forRecompute(), obs: g.obs, unscale: g.unscale, segment: true, im2col: g.im2col, colChunk: g.colChunk}
		defer rc.Release()
		leaves := make([]*Var, len(in))
		for i, v := range in {
			leaves[i] = &Var{Value: v.Value, requiresGrad: v.requiresGrad, graph: rc, borrowed: true}
		}
		re := fn(rc, leaves)
		if len(re) != len(dys) {
			panic(fmt.Sprintf("autograd.Checkpoint: segment returned %d outputs when recomputed, %d the first time", len(re), len(dys)))
		}
		grads := make([]*tensor.Tensor, len(re))
		for i, dy := range dys {
			if dy == nil {
				grads[i] = rc.alloc(re[i].DType(), re[i].Shape()...)
				g.dev.Fill(grads[i].Buffer(), 0)
			} else {
				grads[i] = rc.own(dy.Move(dy.Shape()...))
			}
		}
		// The outputs' gradients are seeded by shape: their recomputed
		// values are dead unless an op inside saved them.
		rc.Free(re...)
		rc.BackwardFrom(re, grads)
		for i, l := range leaves {
			if l.Grad != nil {
				g.accum(in[i], g.own(l.Grad.Move(l.Grad.Shape()...)))
			}
		}
	})
	return outs
}

// adoptOutputs moves a segment's outputs from child graph c into g, so that
// releasing c frees everything else. An output that is not c's own result
// is rejected.
func (g *Graph) adoptOutputs(c *Graph, outs []*Var) []*Var {
	if len(outs) == 0 {
		c.Release()
		panic("autograd.Checkpoint: segment returned no outputs")
	}
	adopted := make([]*Var, len(outs))
	for i, o := range outs {
		if o == nil || o.graph != c || o.param {
			c.Release()
			panic(fmt.Sprintf("autograd.Checkpoint: output %d of the segment was not produced inside it (an input, a parameter or a value from another graph); return a result computed by the segment", i))
		}
		t := o.Value
		if t.IsView() {
			// A reshape of something else inside the segment: copy it out.
			t = t.Clone(device.Temp)
		} else {
			t = t.Move(t.Shape()...) // c's copy is left released
		}
		adopted[i] = g.result(g.own(t))
	}
	return adopted
}
