package autograd

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Op names a differentiable operation, for cast policies and messages.
type Op uint8

// The operations a CastPolicy is asked about. The unary elementwise ops
// (OpReLU, OpExp, ...) follow, one per row of device's unary op table
// (unary_gen.go).
const (
	OpCast Op = iota
	OpMatMul
	OpLinear
	OpConv
	OpBMM
	OpAdd
	OpSub
	OpMul
	OpDiv
	OpSum
	OpMean
	OpSoftmax
	OpLogSoftmax
	OpCrossEntropy
	OpMSE
	OpBatchNorm
	OpLayerNorm
	OpMaxPool
	OpAvgPool
	OpDropout
	OpReshape
	OpCheckpoint
	OpEmbedding
	OpAttention
	OpPermute
	OpSplit
	OpBatchNormReLU

	// opUnary is the first unary elementwise op.
	opUnary
	numOps = opUnary + Op(device.NumUnaryOps)
)

var opNames = [opUnary]string{"cast", "matmul", "linear", "conv", "bmm", "add", "sub", "mul", "div",
	"sum", "mean", "softmax", "log_softmax", "cross_entropy", "mse", "batch_norm", "layer_norm",
	"max_pool", "avg_pool", "dropout", "reshape", "checkpoint", "embedding", "attention", "permute", "split",
	"batch_norm_relu"}

func (op Op) String() string {
	if k, ok := op.Unary(); ok {
		return k.String()
	}
	if op < opUnary {
		return opNames[op]
	}
	return fmt.Sprintf("Op(%d)", uint8(op))
}

// Unary reports the kernel of a unary elementwise op: device's op table
// declares the op (its forward, what it keeps, its gradient and autocast
// class), and the op's method runs it.
func (op Op) Unary() (device.UnaryOp, bool) {
	if op >= opUnary && op < numOps {
		return device.UnaryOp(op - opUnary), true
	}
	return 0, false
}

// Binary reports the kernel of a binary elementwise op (Add, Sub, Mul,
// Div), whose row of device's op table declares its autocast class.
func (op Op) Binary() (device.BinaryOp, bool) {
	if r := binaryRules[op]; r != nil {
		return r.kernel, true
	}
	return 0, false
}

// Ops lists every operation, for policy tables and their tests.
func Ops() []Op {
	out := make([]Op, numOps)
	for i := range out {
		out[i] = Op(i)
	}
	return out
}

// CastPolicy decides the dtype an operation computes in, given its inputs'
// dtypes. Inputs in another dtype are cast (differentiably) before the op
// runs, and the op's backward pass runs in the same dtype. The slice in is
// the graph's scratch space, valid only during the call.
type CastPolicy interface {
	ComputeType(op Op, in ...dtype.DType) dtype.DType
}

// Promote is the default policy's rule: the widest of the inputs' dtypes
// (F32 when they differ).
func Promote(in ...dtype.DType) dtype.DType {
	if len(in) == 0 {
		return dtype.F32
	}
	d := in[0]
	for _, x := range in[1:] {
		d = dtype.Widest(d, x)
	}
	return d
}

// OpDType is the dtype op computes in on g for inputs of the given dtypes:
// what the graph's cast policy decides (autocast's lists), or the widest.
// A layer asks it to produce its output in the dtype of the op that takes
// it next (LayerNormTo), which then has nothing to convert.
func (g *Graph) OpDType(op Op, in ...dtype.DType) dtype.DType {
	if g.policy != nil {
		return g.policy.ComputeType(op, in...)
	}
	return Promote(in...)
}

// computeType asks the policy (or applies Promote) for op's dtype.
func (g *Graph) computeType(op Op, in ...*Var) dtype.DType {
	// The dtypes go to an interface method, which the compiler cannot
	// see into, so a slice on the stack would escape: the graph keeps
	// room for them instead.
	dts := g.dtsSpace[:0]
	for _, v := range in {
		if v != nil {
			v.mustLive(op.String())
			dts = append(dts, v.DType())
		}
	}
	if g.policy != nil {
		return g.policy.ComputeType(op, dts...)
	}
	return Promote(dts...)
}

// castEntry is a parameter's copy in dtype dt, as the graph's ops use it.
type castEntry struct {
	v   *Var
	dt  dtype.DType
	out *Var
}

// as returns v in dtype dt, casting when needed. A parameter is converted
// once per graph, like PyTorch's autocast weight cache: a weight used by
// several ops is one cast node, whose gradient sums theirs. A trainable
// parameter's copy is moreover kept by its tensor across graphs
// (tensor.CachedCast) and only converted again after the parameter has
// changed, or written by the optimiser along with the update; it is
// accounted as Cast for as long as the parameter lives. In a checkpointed
// segment's graphs, and where gradients are off (an evaluation's graph), a
// parameter that keeps no copy yet gets one of the graph's own instead,
// which goes with the graph or the pass (see Checkpoint): the same
// rounding, so the same bits, and an evaluation between training steps
// leaves no copies that training would not have kept (PyTorch's autocast
// drops its cache on leaving the autocast region), unless the graph was
// made with KeepCasts. Buffers (running statistics) are updated in
// place by their layers without a record of it, so their copies last one
// graph.
func (g *Graph) as(v *Var, dt dtype.DType) *Var {
	if v == nil || v.DType() == dt {
		return v
	}
	if !v.param {
		return g.Cast(v, dt)
	}
	// A linear search: a graph uses a few dozen parameters at most. A copy
	// made under NoGrad records no cast, so a use that records takes a new
	// one, which later uses then share: otherwise no gradient would reach
	// the parameter through it.
	at := -1
	for i, c := range g.casts {
		if c.v == v && c.dt == dt {
			if c.out.node == nil && v.requiresGrad && g.noGrad == 0 {
				at = i
				break
			}
			c.out.uses++
			return c.out
		}
	}
	var out *Var
	if v.requiresGrad {
		var y *tensor.Tensor
		if (g.segment || g.noGrad > 0 && !g.keepCast) && v.Value.CachedCopy(dt) == nil {
			y = g.alloc(dt, v.Shape()...)
			g.dev.Copy(y.Buffer(), 0, v.Value.Buffer(), 0, v.Value.Numel())
			y.SetCategory(device.Cast)
		} else {
			y = v.Value.CachedCast(dt)
		}
		out = g.castFrom(v, y)
		if out.node != nil {
			out.castOf, out.uses = v, 1
		}
	} else {
		out = g.Cast(v, dt)
		out.Value.SetCategory(device.Cast)
	}
	g.enter()
	if at >= 0 {
		g.casts[at].out = out
	} else {
		g.casts = append(g.casts, castEntry{v, dt, out})
	}
	g.leave()
	return out
}

// Cast converts v to dtype dt. Its gradient is converted back to v's dtype,
// so an F32 parameter used in F16 still receives an F32 gradient.
func (g *Graph) Cast(v *Var, dt dtype.DType) *Var {
	v.mustLive("Cast")
	y := g.alloc(dt, v.Shape()...)
	g.dev.Copy(y.Buffer(), 0, v.Value.Buffer(), 0, v.Value.Numel())
	return g.castFrom(v, y)
}

// narrowGrad returns the parameter whose autocast copy w is when the
// gradient of w that one op computes can go straight into the parameter's
// float32 gradient: w is such a copy, that op is its only consumer, and
// the device rounds a product to w's dtype into a float32 buffer
// (device.NarrowGemmer). The cast's backward would widen exactly those
// values; the op then skips the 16-bit gradient and that pass. Otherwise
// narrowGrad returns nil.
func (g *Graph) narrowGrad(w *Var) (*Var, device.NarrowGemmer) {
	if w.castOf == nil || w.uses != 1 || w.retain || w.castOf.DType() != dtype.F32 {
		return nil, nil
	}
	ng, ok := g.dev.(device.NarrowGemmer)
	if !ok {
		return nil, nil
	}
	return w.castOf, ng
}

// castFrom records y, which holds v's values in another dtype, as v's cast.
func (g *Graph) castFrom(v *Var, y *tensor.Tensor) *Var {
	out := g.result(y)
	if g.recording(v) {
		g.push(OpCast, out, []*Var{v}, func(dy *tensor.Tensor) {
			g.accum(v, g.pass(dy)) // accum converts to v's dtype
		})
	}
	return out
}
