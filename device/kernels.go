package device

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/dtype"
)

// Kernels are the primitive operations a backend implements, in groups a
// backend can be brought up (and tested, see devicetest) one at a time, as
// gonum's BLAS is split into levels. Every kernel takes its destination
// first, accepts F32, F16 and BF16 storage for every floating-point operand
// (mixed freely unless a comment says otherwise), computes and accumulates
// in at least float32, and rounds once when it stores. Shapes are in the
// comments; lengths are checked by the caller (package tensor and
// autograd), not here, except where a kernel says so.
//
// Index operands (class labels, argmax results) are stored in floating-point
// buffers as exact small integers, which keeps the dtype set to three.
type Kernels interface {
	ElementwiseKernels
	LinAlgKernels
	LossKernels
	ConvPoolKernels
	NormKernels
	OptimKernels
	TransformerKernels
}

// ElementwiseKernels are the kernels that work element by element (or
// through broadcasting strides): fills, copies and conversions, arithmetic
// of device's op tables, the sums and broadcasts between shapes, and
// dropout.
type ElementwiseKernels interface {
	// Fill sets every element of dst to v.
	Fill(dst Buffer, v float32)
	// Copy copies n elements from src[srcOff:] to dst[dstOff:], converting
	// between dtypes. dst and src must not overlap unless they are the same
	// buffer with equal offsets.
	Copy(dst Buffer, dstOff int, src Buffer, srcOff, n int)
	// Axpby computes dst = alpha*x + beta*y elementwise; all have dst's
	// length. dst may be x or y. beta == 0 does not read y.
	Axpby(dst, x, y Buffer, alpha, beta float32)
	// Binary computes dst = op(a, b) over shape s.Shape, with dst contiguous
	// and a and b read through strides (a stride of 0 broadcasts).
	Binary(op BinaryOp, dst, a, b Buffer, s Strides)
	// Unary computes dst = op(src) elementwise, with op's scalar parameter alpha.
	Unary(op UnaryOp, dst, src Buffer, alpha float32)
	// UnaryGrad computes dst = dy * op'(x), op's gradient rule with scalar
	// parameter alpha: in is op's input x or its output y, as the Keep of
	// op's row says, and is not read (it may be nil) when that is
	// KeepNothing. dst may be dy (autograd writes the gradient over the
	// incoming one it owns), with the bits of a separate dst.
	UnaryGrad(op UnaryOp, dst, dy, in Buffer, alpha float32)
	// Reduce sums src (shape s.Shape, contiguous) into dst through s.A: every
	// source element i adds to dst[offset(i, s.A)], so a stride of 0 marks a
	// reduced dimension. dst is overwritten with alpha * the sum.
	Reduce(dst, src Buffer, s Strides, alpha float32)
	// Expand is Reduce's adjoint: dst (shape s.Shape, contiguous) gets
	// alpha * src[offset(i, s.A)], broadcasting src along stride-0 dimensions.
	Expand(dst, src Buffer, s Strides, alpha float32)
	// Dropout computes dst = src * mask / (1-p), where mask[i] = 1 when
	// Uniform(key, i) >= p. The mask is a pure function of (key, i), so the
	// same call on dy gives the backward pass, and a recomputation gives the
	// same mask.
	Dropout(dst, src Buffer, p float32, key RandKey)
}

// LinAlgKernels are the matrix products.
type LinAlgKernels interface {
	// Gemm computes dst = Alpha*op(a)*op(b) + Beta*dst for each of p.Batch
	// matrices. All matrices are contiguous and row-major. Beta == 0 does not
	// read dst.
	Gemm(dst, a, b Buffer, p GemmParams)
}

// LossKernels are the row-wise kernels of a classifier's head: log-softmax,
// cross-entropy, and the argmax that scores its predictions.
type LossKernels interface {
	// LogSoftmax computes dst = src - logsumexp(src) along each row.
	// dst, src (rows, cols)
	LogSoftmax(dst, src Buffer, rows, cols int)
	// LogSoftmaxGrad computes dst = dy - exp(y)*sum(dy) along each row, where
	// y is LogSoftmax's output. dst, dy, y (rows, cols)
	LogSoftmaxGrad(dst, dy, y Buffer, rows, cols int)
	// CrossEntropy computes, for each row r, loss[r] = logsumexp(logits[r]) -
	// logits[r, labels[r]] (fused log-softmax and negative log-likelihood).
	// loss (rows), logits (rows, cols), labels (rows) holding class indices.
	CrossEntropy(loss, logits, labels Buffer, rows, cols int)
	// CrossEntropyGrad computes dlogits[r,c] = dloss[r] * (softmax(logits[r])[c]
	// - [c == labels[r]]). dlogits, logits (rows, cols), labels, dloss (rows)
	CrossEntropyGrad(dlogits, logits, labels, dloss Buffer, rows, cols int)
	// Argmax writes the index of each row's largest element (the first on
	// ties). dst (rows), src (rows, cols)
	Argmax(dst, src Buffer, rows, cols int)
}

// ConvPoolKernels are the image kernels: im2col and its adjoint, which
// turn a convolution into GEMMs, and max and average pooling.
type ConvPoolKernels interface {
	// Im2Col unrolls images [s.N0, s.N0+s.NB) of x (N, C, H, W) into col
	// (NB, C*KH*KW, OH*OW), zero where the window covers padding.
	Im2Col(col, x Buffer, s ConvShape)
	// Col2Im is Im2Col's adjoint: it overwrites images [s.N0, s.N0+s.NB) of
	// dx (N, C, H, W) with the sum of the col entries that read each pixel.
	Col2Im(dx, col Buffer, s ConvShape)
	// MaxPool writes each window's maximum to y: its first largest element
	// in row-major order, or its last NaN when it holds any (PyTorch's
	// choice). Unless arg is nil it also writes where that element sits in
	// its window, kh*KW + kw, as an exact integer (s.ArgFits(arg's dtype)
	// must hold), for MaxPoolGrad. y, arg (N, C, OH, OW); x (N, C, H, W)
	MaxPool(y, arg, x Buffer, s PoolShape)
	// MaxPoolGrad routes each dy to the element MaxPool chose, as recorded
	// in arg, summing in (oh, ow) order where windows overlap.
	// dx (N, C, H, W); dy, arg (N, C, OH, OW)
	MaxPoolGrad(dx, dy, arg Buffer, s PoolShape)
	// AvgPool writes each window's mean, counting padding as zeros (PyTorch's
	// count_include_pad=True).
	AvgPool(y, x Buffer, s PoolShape)
	// AvgPoolGrad spreads dy evenly over each window.
	AvgPoolGrad(dx, dy Buffer, s PoolShape)
}

// NormKernels are batch normalisation's: per-channel statistics, the
// normalisation, and its gradient in training mode.
type NormKernels interface {
	// Moments computes the per-channel mean and biased variance of x
	// (n, c, hw) over the n and hw dimensions. mean, variance (c) must be F32.
	Moments(mean, variance, x Buffer, n, c, hw int)
	// BatchNorm computes y = (x - mean[c]) * invstd[c] * gamma[c] + beta[c].
	// y, x (n, c, hw); mean, invstd, gamma, beta (c), F32.
	BatchNorm(y, x, mean, invstd, gamma, beta Buffer, n, c, hw int)
	// BatchNormGrad computes the gradients of BatchNorm in training mode
	// (mean and invstd are the batch's own statistics): dx, and dgamma and
	// dbeta (c, F32, overwritten).
	BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma Buffer, n, c, hw int)
}

// BatchNormActKernels is an optional fast path a backend may offer, found
// by type assertion: batch norm's affine transform with a residual added
// and ReLU applied in the same pass (a ResNet block's end), and their
// gradients within BatchNormGrad's passes, where the composite (BatchNorm,
// Binary Add, Unary ReLU and their gradients) makes three passes each way
// and keeps two more tensors.
type BatchNormActKernels interface {
	// BatchNormAct computes y = relu(x*scale + shift + res) with
	// BatchNorm's per-channel scale and shift, res (n, c, hw) or nil for
	// none, and ReLU only when relu; y, x and res in one dtype, computed in
	// F32 and rounded once.
	BatchNormAct(y, x, res, mean, invstd, gamma, beta Buffer, n, c, hw int, relu bool)
	// BatchNormActGrad computes, in training mode, dz = dy times ReLU's
	// gradient at its output y when relu (dy itself otherwise; y is then
	// not read), stores dz into dres unless it is nil (the residual's
	// gradient), and BatchNormGrad of dz: dx, and dgamma and dbeta (c, F32,
	// overwritten).
	BatchNormActGrad(dx, dres, dgamma, dbeta, dy, y, x, mean, invstd, gamma Buffer, n, c, hw int, relu bool)
}

// OptimKernels are the optimisers' fused update steps and GradScaler's
// fused unscale-and-check, all on F32 buffers.
type OptimKernels interface {
	// SGD updates parameter p in place from gradient g with PyTorch's SGD
	// algorithm; mom (p's length) is the momentum buffer, unused (may be nil)
	// when h.Momentum is 0. p, g and mom must be F32.
	SGD(p, g, mom Buffer, h SGDParams)
	// Adam updates p in place with PyTorch's Adam (or AdamW when h.Decoupled);
	// m and v are the first and second moments. All F32.
	Adam(p, g, m, v Buffer, h AdamParams)
	// UnscaleCheck multiplies every element of every buffer in grads by inv
	// and reports whether any element was Inf or NaN (before or after). It is
	// GradScaler's fused unscale; grads must be F32.
	UnscaleCheck(grads []Buffer, inv float32) (nonFinite bool)
}

// GemmParams describes a (batched) GEMM: for b in [0, Batch),
// C_b = Alpha*op(A_b)*op(B_b) + Beta*C_b with op(A) (M,K), op(B) (K,N), C (M,N).
// A_b starts at OffA + b*StrideA elements, and so on; a stride of 0 shares
// one matrix across the batch.
type GemmParams struct {
	TransA, TransB            bool
	M, N, K                   int
	Alpha, Beta               float32
	Batch                     int // 0 means 1
	StrideA, StrideB, StrideC int
	OffA, OffB, OffC          int
}

// Batches is Batch with 0 read as 1.
func (p GemmParams) Batches() int { return max(p.Batch, 1) }

// Strides describes an N-dimensional iteration for Binary, Reduce and Expand:
// Shape is the iteration space, A and B the strides (in elements) of the
// operands read through it. A stride of 0 repeats (broadcasts) an operand
// along that dimension.
type Strides struct {
	Shape []int
	A, B  []int
}

// ContiguousStrides returns the row-major strides of shape.
func ContiguousStrides(shape []int) []int {
	st := make([]int, len(shape))
	n := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = n
		n *= shape[i]
	}
	return st
}

// BroadcastStrides returns the strides through which a contiguous array of
// shape small is read when broadcast to shape big (NumPy rules: shapes align
// at the right, and a dimension of 1, or a missing one, is repeated). It
// panics when the shapes do not broadcast.
func BroadcastStrides(small, big []int) []int {
	if len(small) > len(big) {
		panic(fmt.Sprintf("broadcast: shape %v has more dimensions than %v", small, big))
	}
	st := make([]int, len(big))
	cs := ContiguousStrides(small)
	off := len(big) - len(small)
	for i := range small {
		switch small[i] {
		case big[off+i]:
			st[off+i] = cs[i]
		case 1:
			st[off+i] = 0
		default:
			panic(fmt.Sprintf("broadcast: shape %v does not broadcast to %v", small, big))
		}
		if small[i] == 1 {
			st[off+i] = 0
		}
	}
	return st
}

// SGDParams are the hyper-parameters of one SGD step (PyTorch's torch.optim.SGD).
type SGDParams struct {
	LR, Momentum, Dampening, WeightDecay float32
	Nesterov                             bool
	// First marks the first step, when the momentum buffer is set to the
	// gradient instead of being blended with it.
	First bool
}

// AdamParams are the hyper-parameters of one Adam or AdamW step.
type AdamParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	// Decoupled selects AdamW: weight decay shrinks p directly instead of
	// being added to the gradient.
	Decoupled bool
	// Step is the 1-based step count, for bias correction.
	Step int
}

// Scalars are the constants every element of step h shares, computed once
// in float64 as PyTorch computes them, so that every backend's step gives
// the same bits: the bias-corrected step size lr/(1-β1^t), the √(1-β2^t)
// that divides √v, and AdamW's decay factor 1 - lr·wd.
func (h AdamParams) Scalars() (stepSize, bc2sqrt, decay float32) {
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	return float32(float64(h.LR) / bc1), float32(math.Sqrt(bc2)), float32(1) - h.LR*h.WeightDecay
}

// ConvShape describes a 2-D convolution's geometry for Im2Col and Col2Im:
// input (N, C, H, W), kernel KH x KW, output spatial size OH x OW. The
// kernels work on the NB images starting at N0.
type ConvShape struct {
	N, C, H, W       int
	KH, KW           int
	StrideH, StrideW int
	PadH, PadW       int
	OH, OW           int
	N0, NB           int
}

// Valid reports whether s is a convolution the kernels can run: sizes and
// padding not negative, strides and the output size positive, and the
// chunk [N0, N0+NB) within the N images. A kernel given another panics.
func (s ConvShape) Valid() bool {
	return s.N0 >= 0 && s.NB >= 0 && s.N0+s.NB <= s.N && s.OH > 0 && s.OW > 0 && s.StrideH > 0 && s.StrideW > 0 &&
		s.C >= 0 && s.H >= 0 && s.W >= 0 && s.KH >= 0 && s.KW >= 0 && s.PadH >= 0 && s.PadW >= 0
}

// NewConvShape fills the output size from the input size, kernel, stride and
// padding, covering all n images.
func NewConvShape(n, c, h, w, kh, kw, stride, pad int) ConvShape {
	s := ConvShape{N: n, C: c, H: h, W: w, KH: kh, KW: kw, StrideH: stride, StrideW: stride, PadH: pad, PadW: pad, NB: n}
	s.OH = (h+2*pad-kh)/stride + 1
	s.OW = (w+2*pad-kw)/stride + 1
	return s
}

// ConvChunker is an optional hint a backend may give, found by type
// assertion: convolutions unroll images into im2col columns a chunk at a
// time, and this backend runs them fastest with chunks of about
// ConvChunkBytes bytes of columns (a CPU: what a core's L2 cache holds, so
// the GEMM reads the columns im2col has just written from there). Without
// it a chunk is the caller's default, large enough for few launches.
type ConvChunker interface {
	ConvChunkBytes() int
}

// DirectConvKernels is an optional fast path a backend may offer, found by
// type assertion: whole convolutions computed from the images themselves,
// without the im2col columns that Im2Col, Gemm and Col2Im go through. A
// caller asks DirectConv first and takes the column path where it says
// no; both give the same values within the dtype's tolerance (their sums
// run in different orders). s covers all N images (N0 0, NB N).
type DirectConvKernels interface {
	// DirectConv reports whether the three kernels below run convolutions
	// of shape s with oc output channels, every operand in dt (the weight
	// gradient in F32).
	DirectConv(s ConvShape, oc int, dt dtype.DType) bool
	// ConvForward computes y = x ⋆ w + b: y (N, oc, OH, OW), x (N, C, H,
	// W), w (oc, C, KH, KW), b (oc) or nil, accumulated in F32 and
	// rounded once.
	ConvForward(y, x, w, b Buffer, s ConvShape, oc int)
	// ConvInputGrad overwrites dx (N, C, H, W) with the gradient of x ⋆ w
	// for dy (N, oc, OH, OW): Col2Im of wᵀ·dy, accumulated in F32 and
	// rounded once.
	ConvInputGrad(dx, dy, w Buffer, s ConvShape, oc int)
	// ConvWeightGrad overwrites dw (oc, C, KH, KW), F32, with the gradient
	// of x ⋆ w for dy summed over the N images.
	ConvWeightGrad(dw, dy, x Buffer, s ConvShape, oc int)
}

// PoolShape describes a 2-D pooling's geometry: input (N, C, H, W), window
// KH x KW, output OH x OW.
type PoolShape struct {
	N, C, H, W       int
	KH, KW           int
	StrideH, StrideW int
	PadH, PadW       int
	OH, OW           int
}

// Valid reports whether s is a pooling the kernels can run: a window and
// input of positive size, positive strides and output size, and padding
// from 0 to half the window. A kernel given another panics.
func (s PoolShape) Valid() bool {
	return s.OH > 0 && s.OW > 0 && s.StrideH > 0 && s.StrideW > 0 && s.PadH >= 0 && s.PadW >= 0 &&
		2*s.PadH <= s.KH && 2*s.PadW <= s.KW && s.KH > 0 && s.KW > 0 && s.N >= 0 && s.C >= 0 && s.H > 0 && s.W > 0
}

// ArgFits reports whether dt holds every window position of s (0 to
// KH*KW-1) as an exact integer, as MaxPool's arg must: BF16 does up to 256,
// F16 up to 2048, F32 up to 2^24.
func (s PoolShape) ArgFits(dt dtype.DType) bool {
	limit := 1 << 24
	switch dt {
	case dtype.F16:
		limit = 1 << 11
	case dtype.BF16:
		limit = 1 << 8
	}
	return s.KH*s.KW-1 <= limit
}

// NewPoolShape fills the output size (floor mode, as PyTorch's default).
func NewPoolShape(n, c, h, w, k, stride, pad int) PoolShape {
	s := PoolShape{N: n, C: c, H: h, W: w, KH: k, KW: k, StrideH: stride, StrideW: stride, PadH: pad, PadW: pad}
	s.OH = (h+2*pad-k)/stride + 1
	s.OW = (w+2*pad-k)/stride + 1
	return s
}

// RandKey names a stream of counter-based random numbers: element i of the
// stream is a pure function of (Seed, Offset+i), identical on every backend.
type RandKey struct {
	Seed, Offset uint64
}

// Uniform returns the i-th number of key's stream, uniform in [0, 1) with 24
// random bits. Every backend's Dropout must agree with it bit for bit.
func Uniform(key RandKey, i uint64) float32 {
	return float32(Mix64(key.Seed, key.Offset+i)>>40) * (1.0 / (1 << 24))
}

// Mix64 is the counter-based generator behind Uniform: SplitMix64's finaliser
// applied to the seed combined with the counter. It is cheap, stateless, and
// simple to reproduce in a GPU kernel.
func Mix64(seed, counter uint64) uint64 {
	z := seed ^ (counter * 0x9e3779b97f4a7c15)
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
