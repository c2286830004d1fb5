package nn

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/tensor"
)

// Conv2d is a 2-D convolution layer over (N, C, H, W) inputs with square
// kernels, equal stride and zero padding in both dimensions.
type Conv2d struct {
	W, B                        *autograd.Var // W (Out, In, K, K), B (Out) or nil
	In, Out, K, Stride, Padding int
}

// NewConv2d makes a Conv2d from in to out channels with k x k kernels and
// PyTorch's default initialisation (Kaiming-uniform with a = √5 over
// fan-in In·K·K; bias uniform in ±1/√fan-in). It takes the options Stride
// (default 1), Padding (default 0) and Bias (default on), as PyTorch's
// nn.Conv2d takes them by keyword.
func NewConv2d(in, out, k int, rng *rand.Rand, opts ...Option) *Conv2d {
	o := configure("nn.NewConv2d", layerConfig{stride: 1, bias: true}, []string{"Stride", "Padding", "Bias"}, opts)
	if in <= 0 || out <= 0 || k <= 0 {
		panic(fmt.Sprintf("nn.NewConv2d: in %d, out %d, kernel %d", in, out, k))
	}
	fanIn := in * k * k
	c := &Conv2d{In: in, Out: out, K: k, Stride: o.stride, Padding: o.padding}
	c.W = autograd.NewParam("weight", KaimingUniform(rng, fanIn, out, in, k, k))
	if o.bias {
		bound := float32(1 / math.Sqrt(float64(fanIn)))
		c.B = autograd.NewParam("bias", tensor.UniformHost(rng, -bound, bound, out))
	}
	return c
}

// Forward convolves x (N, In, H, W).
func (c *Conv2d) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return g.Conv2d(x, c.W, c.B, c.Stride, c.Padding)
}

// InputOp is autograd.OpConv: a Conv2d's input goes to its convolution
// alone.
func (c *Conv2d) InputOp() autograd.Op { return autograd.OpConv }

// Params are W and, if present, B.
func (c *Conv2d) Params() []*autograd.Var {
	if c.B == nil {
		return []*autograd.Var{c.W}
	}
	return []*autograd.Var{c.W, c.B}
}

func (c *Conv2d) String() string {
	return fmt.Sprintf("Conv2d(%d, %d, kernel=%d, stride=%d, padding=%d, bias=%v)", c.In, c.Out, c.K, c.Stride, c.Padding, c.B != nil)
}

// BatchNorm2d normalises each channel of (N, C, H, W) (or (N, C)) inputs
// with the batch's statistics while training and running estimates in
// evaluation, PyTorch's nn.BatchNorm2d. Statistics are F32 whatever the
// input's dtype.
type BatchNorm2d struct {
	Weight, Bias            *autograd.Var // γ and β, (C)
	RunningMean, RunningVar *autograd.Var // buffers, (C)
	C                       int
	Momentum, Eps           float32
	training                bool
}

// NewBatchNorm2d makes a BatchNorm2d for c channels: γ = 1, β = 0, running
// mean 0 and variance 1, momentum 0.1, eps 1e-5, training mode.
func NewBatchNorm2d(c int) *BatchNorm2d {
	ones := tensor.NewHost(c)
	for i := range ones.Data {
		ones.Data[i] = 1
	}
	return &BatchNorm2d{
		Weight: autograd.NewParam("weight", ones), Bias: autograd.NewParam("bias", tensor.NewHost(c)),
		RunningMean: autograd.NewBuffer("running_mean", tensor.NewHost(c)),
		RunningVar:  autograd.NewBuffer("running_var", tensor.Host{Shape: []int{c}, Data: append([]float32(nil), ones.Data...)}),
		C:           c, Momentum: 0.1, Eps: 1e-5, training: true,
	}
}

// Forward normalises x.
func (b *BatchNorm2d) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return g.BatchNorm(x, b.Weight, b.Bias, autograd.BatchNormParams{Training: b.training,
		RunningMean: b.RunningMean.Value, RunningVar: b.RunningVar.Value, Momentum: b.Momentum, Eps: b.Eps})
}

// ForwardReLU is ReLU(Forward(x) + res), res nil for none: one op where
// the device fuses them (autograd.BatchNormReLU).
func (b *BatchNorm2d) ForwardReLU(g *autograd.Graph, x, res *autograd.Var) *autograd.Var {
	return g.BatchNormReLU(x, b.Weight, b.Bias, res, autograd.BatchNormParams{Training: b.training,
		RunningMean: b.RunningMean.Value, RunningVar: b.RunningVar.Value, Momentum: b.Momentum, Eps: b.Eps})
}

// Params are γ and β.
func (b *BatchNorm2d) Params() []*autograd.Var { return []*autograd.Var{b.Weight, b.Bias} }

// Buffers are the running mean and variance.
func (b *BatchNorm2d) Buffers() []*autograd.Var {
	return []*autograd.Var{b.RunningMean, b.RunningVar}
}

// SetTraining switches between batch and running statistics.
func (b *BatchNorm2d) SetTraining(t bool) { b.training = t }

func (b *BatchNorm2d) String() string { return fmt.Sprintf("BatchNorm2d(%d)", b.C) }

// MaxPool2d takes the maximum over k x k windows. It takes the options
// Stride (default k, PyTorch's) and Padding (default 0).
func MaxPool2d(k int, opts ...Option) Module {
	stride, padding := pooling("nn.MaxPool2d", k, opts)
	return Func{fmt.Sprintf("MaxPool2d(%d, stride=%d, padding=%d)", k, stride, padding),
		func(g *autograd.Graph, x *autograd.Var) *autograd.Var { return g.MaxPool2d(x, k, stride, padding) }}
}

// AvgPool2d averages k x k windows. It takes the options Stride (default
// k) and Padding (default 0).
func AvgPool2d(k int, opts ...Option) Module {
	stride, padding := pooling("nn.AvgPool2d", k, opts)
	return Func{fmt.Sprintf("AvgPool2d(%d, stride=%d, padding=%d)", k, stride, padding),
		func(g *autograd.Graph, x *autograd.Var) *autograd.Var { return g.AvgPool2d(x, k, stride, padding) }}
}

// pooling is the stride and padding of a pooling op over k x k windows.
func pooling(op string, k int, opts []Option) (stride, padding int) {
	if k < 1 {
		panic(fmt.Sprintf("%s(%d): want a window >= 1", op, k))
	}
	o := configure(op, layerConfig{stride: k}, []string{"Stride", "Padding"}, opts)
	return o.stride, o.padding
}

// GlobalAvgPool averages each channel over its spatial positions: (N, C, H, W)
// to (N, C).
func GlobalAvgPool() Module { return Func{"GlobalAvgPool", (*autograd.Graph).GlobalAvgPool} }

// BasicBlock is ResNet's two-convolution residual block:
// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), where the shortcut is
// the identity, or a strided 1x1 convolution and batch norm when the shape
// changes.
type BasicBlock struct {
	Conv1, Conv2 *Conv2d
	BN1, BN2     *BatchNorm2d
	Shortcut     *Sequential // nil for the identity
}

// NewBasicBlock makes a block from in to out channels; stride 2 halves the
// spatial size.
func NewBasicBlock(in, out, stride int, rng *rand.Rand) *BasicBlock {
	b := &BasicBlock{
		Conv1: NewConv2d(in, out, 3, rng, Stride(stride), Padding(1), Bias(false)), BN1: NewBatchNorm2d(out),
		Conv2: NewConv2d(out, out, 3, rng, Padding(1), Bias(false)), BN2: NewBatchNorm2d(out),
	}
	if stride != 1 || in != out {
		b.Shortcut = NewSequential(NewConv2d(in, out, 1, rng, Stride(stride), Bias(false)), NewBatchNorm2d(out))
	}
	return b
}

// Forward applies the block, each batch norm with what follows it (the
// ReLU, and the residual add) as one op (BatchNorm2d.ForwardReLU).
//
// Each intermediate result is freed once the next op has taken it
// (autograd.Graph.Free): at once where that op keeps nothing of it, else
// once the backward pass is done with it, so that nothing of the block
// outlives its backward pass.
func (b *BasicBlock) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	c1 := b.Conv1.Forward(g, x)
	h := b.BN1.ForwardReLU(g, c1, nil)
	g.Free(c1)
	c2 := b.Conv2.Forward(g, h)
	g.Free(h)
	sc := x
	if b.Shortcut != nil {
		sc = b.Shortcut.Forward(g, x)
	}
	out := b.BN2.ForwardReLU(g, c2, sc)
	g.Free(c2)
	if sc != x {
		g.Free(sc)
	}
	return out
}

// Children are the layers, for To, State and SetTraining.
func (b *BasicBlock) Children() []Module {
	ch := []Module{b.Conv1, b.BN1, b.Conv2, b.BN2}
	if b.Shortcut != nil {
		ch = append(ch, b.Shortcut)
	}
	return ch
}

// Params are the layers' parameters.
func (b *BasicBlock) Params() []*autograd.Var {
	var out []*autograd.Var
	for _, c := range b.Children() {
		out = append(out, c.Params()...)
	}
	return out
}

func (b *BasicBlock) String() string {
	return fmt.Sprintf("BasicBlock(%d, %d, stride=%d)", b.Conv1.In, b.Conv1.Out, b.Conv1.Stride)
}
