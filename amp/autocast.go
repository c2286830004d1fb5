// Package amp is automatic mixed precision: the autocast policy that runs
// matrix products in F16 or BF16 and precision-sensitive ops in F32, and
// GradScaler, the dynamic loss scaler that keeps F16 gradients from
// underflowing, with PyTorch's semantics.
//
// A training step under AMP is the FP32 step plus two lines:
//
//	g := autograd.NewGraph(dev)
//	amp.Autocast(g, dtype.F16)
//	loss := nn.CrossEntropy(g, model.Forward(g, x), y)
//	g.Backward(scaler.Scale(g, loss))
//	scaler.Step(opt)
//	scaler.Update()
//
// Parameters stay F32 (master weights). Each is cast to the low dtype at
// most once per graph, and the cast is differentiable, so its gradient
// arrives in F32. The low-precision copy outlives the graph: the
// parameter's tensor keeps it, accounted as cast memory, until the
// parameter is released, and converts it again only after the parameter
// has changed. On backends with fused step-and-cast kernels (the CPU's)
// the optimiser writes the copy as it updates the weight, so a training
// step converts no weight at all.
//
// BF16 has F32's exponent range, so its gradients do not underflow and
// loss scaling is unnecessary: NewGradScaler(For(dtype.BF16)) makes a
// disabled scaler whose Note says so.
//
// GradScaler follows PyTorch's arithmetic bit for bit, but its scale has a
// floor (MinScale), so a run of overflows cannot drive it to 0 and stop
// training for good, and it reports long runs of skipped steps and a scale
// below 1 through Warnings, which a training loop prints after Update.
package amp

import (
	"fmt"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Class is how autocast treats an operation: device's CastClass, which
// each row of device's elementwise op tables names for its op.
type Class = device.CastClass

// The classes.
const (
	// Promote ops run in the widest dtype of their inputs (F32 if mixed),
	// which for a single input is that input's dtype.
	Promote = device.CastPromote
	// Low ops run in the autocast dtype: the matrix products, where the
	// tensor cores are and where the memory goes.
	Low = device.CastLow
	// F32 ops run in F32 because they are sensitive to range or precision:
	// exponentials, logarithms, reductions, normalisation, losses.
	F32 = device.CastF32
)

// classes mirrors PyTorch's CUDA autocast lists for the ops mixprec has
// that are not elementwise (an elementwise op's class is in its row of
// device's op table). It names every such op, Promote ones included, so
// that a new op gets a decision instead of a default: TestClassesTotal
// fails until it has one.
var classes = map[autograd.Op]Class{
	autograd.OpMatMul: Low,
	autograd.OpLinear: Low,
	autograd.OpConv:   Low,
	autograd.OpBMM:    Low,
	// Fused causal attention: its products run in the low dtype, its
	// softmax keeps F32 running statistics inside the kernel.
	autograd.OpAttention: Low,

	autograd.OpSoftmax:      F32,
	autograd.OpLogSoftmax:   F32,
	autograd.OpCrossEntropy: F32,
	autograd.OpSum:          F32,
	autograd.OpMean:         F32,
	autograd.OpMSE:          F32,
	autograd.OpLayerNorm:    F32,
	autograd.OpBatchNorm:    F32,
	// BatchNorm with its residual add and ReLU fused in: F32 arithmetic,
	// the output in the input's dtype, as BatchNorm.
	autograd.OpBatchNormReLU: F32,

	// Pooling, dropout and reshapes run in their inputs' dtype, as on
	// PyTorch's promote list or on none.
	autograd.OpCast:       Promote,
	autograd.OpMaxPool:    Promote,
	autograd.OpAvgPool:    Promote,
	autograd.OpDropout:    Promote,
	autograd.OpReshape:    Promote,
	autograd.OpCheckpoint: Promote,
	autograd.OpPermute:    Promote,
	autograd.OpSplit:      Promote,
	// An embedding runs in its weight's dtype (an F32 parameter: F32),
	// as PyTorch's autocast leaves it.
	autograd.OpEmbedding: Promote,
}

// ClassOf reports how autocast treats op: an elementwise op as its row of
// device's op table says, any other as classes does.
func ClassOf(op autograd.Op) Class {
	if k, ok := op.Unary(); ok {
		return k.Def().Class
	}
	if k, ok := op.Binary(); ok {
		return k.Def().Class
	}
	return classes[op]
}

// Policy is the autocast CastPolicy for one low dtype.
type Policy struct {
	Low dtype.DType
}

// ComputeType implements autograd.CastPolicy.
func (p Policy) ComputeType(op autograd.Op, in ...dtype.DType) dtype.DType {
	switch ClassOf(op) {
	case Low:
		return p.Low
	case F32:
		return dtype.F32
	}
	return autograd.Promote(in...)
}

// Autocast installs the autocast policy for dt (F16 or BF16) on g: from now
// on g's operations run in the dtypes PyTorch's autocast would choose.
func Autocast(g *autograd.Graph, dt dtype.DType) {
	if !dt.Half() {
		panic(fmt.Sprintf("amp.Autocast: dtype %v; want f16 or bf16 (leave autocast off for f32)", dt))
	}
	g.SetPolicy(Policy{Low: dt})
}
