package autograd

import (
	"fmt"
	"slices"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// colBudget bounds the im2col workspace of one convolution chunk, in
// elements: images are unrolled a chunk at a time so that the workspace
// stays small whatever the batch. A device that prefers smaller chunks
// says so (device.ConvChunker).
var colBudget = 1 << 22

// ConvColumnBudget lets the graph keep up to bytes of unrolled input
// (im2col columns) from its convolutions' forward passes for their weight
// gradients; by default it keeps none. It applies to the convolutions
// that take the column path: a device's direct convolutions
// (device.DirectConvKernels) have no columns. A convolution whose whole batch of
// columns fits in what is left of the budget unrolls the batch once, in
// the forward pass, and its backward reads those columns instead of
// unrolling the input again; the others unroll chunk by chunk in both
// passes, in a workspace of a few cache sizes, and recompute nothing else.
// The columns are accounted as activations; gradient checkpointing's
// recomputed segments keep theirs under the same budget.
//
// Keeping trades memory for time only where the columns are few and the
// products large. On 2 Zen 5 cores the MNIST CNN (60 steps, batch 128)
// ran 1.07x faster in F32 and 1.06x under BF16 autocast with a budget that
// holds both its convolutions' columns (88 MB in F32, 44 MB in 16 bits),
// 0.97x under F16, with peak memory 1.7x and 1.6x; ResNet-20 kept its
// first three convolutions' columns under 256 MiB and ran no faster, with
// peak memory 1.7x in F32 and 2.4x in BF16. Hence the default.
func ConvColumnBudget(bytes int64) Option {
	return func(g *Graph) { g.colKeep = max(bytes, 0) }
}

// Im2Col has the graph run every convolution as im2col and GEMMs, as on a
// device without direct convolutions (device.DirectConvKernels): the
// reference path, for tests and for comparisons of speed and memory.
func Im2Col() Option { return func(g *Graph) { g.im2col = true } }

// ConvChunk caps the im2col columns a convolution unrolls at a time at
// bytes (but at least one image's), below what the device prefers
// (device.ConvChunker): the workspace of the forward pass's columns and of
// the backward pass's column gradients shrinks with the chunk, at the cost
// of more, smaller products. A memory planner bounds scratch with it when
// a budget needs that; 0 leaves the device's choice.
func ConvChunk(bytes int) Option {
	return func(g *Graph) { g.colChunk = max(bytes, 0) }
}

// keepColumns reports whether the graph keeps the columns of a
// convolution, bytes of them, and counts them against the budget if so.
func (g *Graph) keepColumns(bytes int64) bool {
	if g.keptCols+bytes > g.colKeep {
		return false
	}
	g.keptCols += bytes
	return true
}

// chunkImages is how many images of s a convolution unrolls at a time: as
// many as keep both their columns (CKK x OHW each) and the outputs their
// GEMMs write (OC x OHW each) within the budget, and at least one.
func (g *Graph) chunkImages(dt dtype.DType, s device.ConvShape, oc int) int {
	budget := colBudget
	if c, ok := g.dev.(device.ConvChunker); ok {
		budget = min(budget, c.ConvChunkBytes()/int(device.Bytes(dt, 1)))
	}
	if g.colChunk > 0 {
		budget = min(budget, g.colChunk/int(device.Bytes(dt, 1)))
	}
	per := max(s.C*s.KH*s.KW, oc) * s.OH * s.OW
	return max(1, min(s.N, budget/max(per, 1)))
}

// Conv2d is a 2-D convolution (cross-correlation, as in PyTorch) of x
// (N, C, H, W) with w (OC, C, KH, KW), plus b (OC) or nil, with equal stride
// and zero padding in both dimensions. Where the device runs it directly
// (device.DirectConvKernels) it does, with no columns in either pass;
// otherwise it runs as im2col followed by a GEMM per chunk of images, and
// the weight gradient reads the forward pass's columns where the graph
// keeps them (ConvColumnBudget), else unrolls them again.
func (g *Graph) Conv2d(x, w, b *Var, stride, pad int) *Var {
	dt := g.computeType(OpConv, x, w, b)
	x, w, b = g.as(x, dt), g.as(w, dt), g.as(b, dt)
	xs, ws := x.Shape(), w.Shape()
	if len(xs) != 4 || len(ws) != 4 || xs[1] != ws[1] || (b != nil && (len(b.Shape()) != 1 || b.Shape()[0] != ws[0])) || stride < 1 || pad < 0 {
		var bs []int
		if b != nil {
			bs = b.Shape()
		}
		panic(fmt.Sprintf("autograd.Conv2d: input %v, weight %v, bias %v, stride %d, padding %d; want (N,C,H,W), (OC,C,KH,KW), (OC)", xs, ws, bs, stride, pad))
	}
	s := device.NewConvShape(xs[0], xs[1], xs[2], xs[3], ws[2], ws[3], stride, pad)
	if s.OH < 1 || s.OW < 1 {
		panic(fmt.Sprintf("autograd.Conv2d: kernel %dx%d with padding %d does not fit input %v", ws[2], ws[3], pad, xs))
	}
	c := &conv{g: g, x: x, w: w, b: b, dt: dt, s: s, oc: ws[0], chunk: g.chunkImages(dt, s, ws[0])}
	c.biasSt = device.Strides{Shape: []int{s.N, c.oc, s.OH * s.OW}, A: []int{0, 1, 0}}
	if dc, ok := g.dev.(device.DirectConvKernels); ok && !g.im2col && dc.DirectConv(s, c.oc, dt) {
		c.direct = dc
	}
	rec := g.recording(x, w, b)
	// kept holds the whole batch's columns, for the weight gradient, when
	// the graph's budget allows (ConvColumnBudget).
	if c.direct == nil && rec && w.requiresGrad && g.keepColumns(device.Bytes(dt, s.N*s.C*s.KH*s.KW*s.OH*s.OW)) {
		c.kept = g.alloc(dt, s.N, s.C*s.KH*s.KW, s.OH*s.OW)
		g.dev.Im2Col(c.kept.Buffer(), buf(x), s)
	}
	out := g.result(c.forward())
	if rec {
		g.save(x.Value, w.Value, c.kept)
		g.push(OpConv, out, []*Var{x, w, b}, c.backward)
	}
	return out
}

// conv is one Conv2d: its operands (in its dtype), its geometry, the
// images it unrolls at a time, and the columns it keeps for backward.
type conv struct {
	g         *Graph
	x, w, b   *Var
	dt        dtype.DType
	s         device.ConvShape
	oc, chunk int
	biasSt    device.Strides // the bias broadcast over y (N, OC, OH*OW)
	kept      *tensor.Tensor
	// direct is the device's direct convolution where it runs this one:
	// no columns, in either pass.
	direct device.DirectConvKernels
}

// forward returns y (N, OC, OH, OW). A 16-bit y is written by the GEMMs
// themselves, which accumulate in F32 and round once: b is already in dt,
// so the bias GEMM stores it exactly, and the product's GEMM widens it
// back exactly as its first addend (beta 1). The bits are those of an F32
// accumulator rounded by a Copy, without the accumulator and the Copy's
// pass over it.
func (c *conv) forward() *tensor.Tensor {
	g, s, oc := c.g, c.s, c.oc
	ckk, ohw := s.C*s.KH*s.KW, s.OH*s.OW
	y := g.alloc(c.dt, s.N, oc, s.OH, s.OW)
	if c.direct != nil {
		var bb device.Buffer
		if c.b != nil {
			bb = buf(c.b)
		}
		c.direct.ConvForward(y.Buffer(), buf(c.x), buf(c.w), bb, s, oc)
		return y
	}
	var ones *tensor.Tensor
	if c.b != nil {
		ones = tensor.New(g.dev, c.dt, device.Workspace, ohw)
		defer ones.Release()
		g.dev.Fill(ones.Buffer(), 1)
	}
	g.eachChunk(c.dt, s, c.chunk, buf(c.x), true, c.kept, func(col *tensor.Tensor, offB int, cs device.ConvShape) {
		dst, off := y.Buffer(), cs.N0*oc*ohw
		beta := float32(0)
		if c.b != nil {
			// dst[i] (OC, OHW) = b (OC, 1) @ ones (1, OHW): the bias
			// broadcast as a GEMM with k = 1, which writes each element as
			// b exactly at the GEMM's vector speed (Expand's general
			// strides cost about five times as much here); the product
			// below adds onto it.
			g.dev.Gemm(dst, buf(c.b), ones.Buffer(), device.GemmParams{M: oc, N: ohw, K: 1, Alpha: 1,
				Batch: cs.NB, StrideC: oc * ohw, OffC: off})
			beta = 1
		}
		// dst[i] (OC, OHW) += w (OC, CKK) @ col[i] (CKK, OHW), for each image i
		g.dev.Gemm(dst, buf(c.w), col.Buffer(), device.GemmParams{M: oc, N: ohw, K: ckk, Alpha: 1, Beta: beta,
			Batch: cs.NB, StrideB: ckk * ohw, StrideC: oc * ohw, OffB: offB, OffC: off})
	})
	return y
}

// backward gives b, w and x the gradients of dy (N, OC, OH, OW) that they
// require.
func (c *conv) backward(dy *tensor.Tensor) {
	g, s, oc := c.g, c.s, c.oc
	if c.b != nil && c.b.requiresGrad {
		db := g.alloc(c.dt, oc)
		g.dev.Reduce(db.Buffer(), dy.Buffer(), c.biasSt, 1)
		g.accum(c.b, db)
	}
	var dw, dx *tensor.Tensor
	if c.w.requiresGrad {
		// Accumulate over images in F32 and round once at the end.
		dw = g.alloc(dtype.F32, c.w.Shape()...)
	}
	if c.x.requiresGrad {
		dx = g.alloc(c.dt, c.x.Shape()...)
	}
	if dw == nil && dx == nil {
		return
	}
	if c.direct != nil {
		if dw != nil {
			c.direct.ConvWeightGrad(dw.Buffer(), dy.Buffer(), buf(c.x), s, oc)
			g.accum(c.w, dw)
		}
		if dx != nil {
			c.direct.ConvInputGrad(dx.Buffer(), dy.Buffer(), buf(c.w), s, oc)
			g.accum(c.x, dx)
		}
		return
	}
	ckk, ohw := s.C*s.KH*s.KW, s.OH*s.OW
	var dcol *tensor.Tensor
	if dx != nil {
		// F32, so that Col2Im sums the overlapping windows before the one
		// rounding to dt.
		dcol = g.alloc(dtype.F32, c.chunk, ckk, ohw)
		dcol.SetCategory(device.Workspace)
		defer dcol.Release()
	}
	g.eachChunk(c.dt, s, c.chunk, buf(c.x), dw != nil, c.kept, func(col *tensor.Tensor, offB int, cs device.ConvShape) {
		if dw != nil {
			c.weightGrad(dw, dy, col, offB, cs)
		}
		if dx != nil {
			// dcol[i] (CKK, OHW) = wᵀ (CKK, OC) @ dy[n] (OC, OHW)
			g.dev.Gemm(dcol.Buffer(), buf(c.w), dy.Buffer(), device.GemmParams{TransA: true, M: ckk, N: ohw, K: oc, Alpha: 1,
				Batch: cs.NB, StrideB: oc * ohw, StrideC: ckk * ohw, OffB: cs.N0 * oc * ohw})
			g.dev.Col2Im(dx.Buffer(), dcol.Buffer(), cs)
		}
	})
	if dw != nil {
		g.accum(c.w, dw)
	}
	if dx != nil {
		g.accum(c.x, dx)
	}
}

// weightGrad adds chunk cs's part of the weight gradient to dw (OC, CKK):
// dy[n] (OC, OHW) @ col[i]ᵀ (OHW, CKK) for each image in order, the
// batch's first overwriting dw. The others are one batched call into a
// shared C (StrideC 0, Beta 1), which a backend runs in order; the CPU
// shares it out as column strips of dw, each adding every image, with the
// bits of one call per image.
func (c *conv) weightGrad(dw, dy, col *tensor.Tensor, offB int, cs device.ConvShape) {
	oc, ckk, ohw := c.oc, c.s.C*c.s.KH*c.s.KW, c.s.OH*c.s.OW
	i0 := 0
	if cs.N0 == 0 {
		c.g.dev.Gemm(dw.Buffer(), dy.Buffer(), col.Buffer(), device.GemmParams{TransB: true, M: oc, N: ckk, K: ohw, Alpha: 1, OffB: offB})
		i0 = 1
	}
	if i0 < cs.NB {
		c.g.dev.Gemm(dw.Buffer(), dy.Buffer(), col.Buffer(), device.GemmParams{TransB: true, M: oc, N: ckk, K: ohw,
			Alpha: 1, Beta: 1, Batch: cs.NB - i0, StrideA: oc * ohw, StrideB: ckk * ohw,
			OffA: (cs.N0 + i0) * oc * ohw, OffB: offB + i0*ckk*ohw})
	}
}

// eachChunk calls fn for each chunk of images of x with the chunk's columns
// when cols is set: those of kept (the whole batch's, unrolled already) if
// it is not nil, else the chunk unrolled into a workspace; offB is where
// the chunk's first image starts in col. Without cols fn gets nil and uses
// only the chunk's geometry.
func (g *Graph) eachChunk(dt dtype.DType, s device.ConvShape, chunk int, x device.Buffer, cols bool, kept *tensor.Tensor,
	fn func(col *tensor.Tensor, offB int, cs device.ConvShape)) {
	ckk, ohw := s.C*s.KH*s.KW, s.OH*s.OW
	unroll := cols && kept == nil
	col := kept
	if unroll {
		col = tensor.New(g.dev, dt, device.Workspace, chunk, ckk, ohw)
		defer col.Release()
	}
	for n0 := 0; n0 < s.N; n0 += chunk {
		cs := s
		cs.N0, cs.NB = n0, min(chunk, s.N-n0)
		offB := 0
		if unroll {
			g.dev.Im2Col(col.Buffer(), x, cs)
		} else if kept != nil {
			offB = n0 * ckk * ohw
		}
		fn(col, offB, cs)
	}
}

// MaxPool2d takes the maximum over k x k windows with the given stride and
// padding of x (N, C, H, W).
func (g *Graph) MaxPool2d(x *Var, k, stride, pad int) *Var {
	return g.pool(OpMaxPool, x, k, stride, pad)
}

// AvgPool2d averages k x k windows (padding counted as zeros, PyTorch's
// default).
func (g *Graph) AvgPool2d(x *Var, k, stride, pad int) *Var {
	return g.pool(OpAvgPool, x, k, stride, pad)
}

func (g *Graph) pool(op Op, x *Var, k, stride, pad int) *Var {
	dt := g.computeType(op, x)
	x = g.as(x, dt)
	xs := x.Shape()
	if len(xs) != 4 || k < 1 || stride < 1 || pad < 0 || 2*pad > k {
		panic(fmt.Sprintf("autograd.%v: input %v, kernel %d, stride %d, padding %d; want (N,C,H,W) and padding at most half the kernel", op, xs, k, stride, pad))
	}
	s := device.NewPoolShape(xs[0], xs[1], xs[2], xs[3], k, stride, pad)
	if s.OH < 1 || s.OW < 1 {
		panic(fmt.Sprintf("autograd.%v: window %d does not fit input %v", op, k, xs))
	}
	y := g.alloc(dt, s.N, s.C, s.OH, s.OW)
	rec := g.recording(x)
	var arg *tensor.Tensor
	if op == OpMaxPool {
		var ab device.Buffer
		if rec {
			// Backward needs only where each maximum was: its position in
			// the window, a small integer F16 holds exactly (for 2x2
			// windows an eighth of x's F32 bytes), and nothing is
			// recomputed.
			adt := dtype.F16
			if !s.ArgFits(adt) {
				adt = dtype.F32
			}
			arg = g.alloc(adt, s.N, s.C, s.OH, s.OW)
			ab = arg.Buffer()
		}
		g.dev.MaxPool(y.Buffer(), ab, buf(x), s)
	} else {
		g.dev.AvgPool(y.Buffer(), buf(x), s)
	}
	out := g.result(y)
	if rec {
		g.save(arg)
		g.push(op, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, xs...)
			if op == OpMaxPool {
				g.dev.MaxPoolGrad(dx.Buffer(), dy.Buffer(), arg.Buffer(), s)
			} else {
				g.dev.AvgPoolGrad(dx.Buffer(), dy.Buffer(), s)
			}
			g.accum(x, dx)
		})
	}
	return out
}

// GlobalAvgPool averages each channel of x (N, C, H, W) over its H x W
// positions, giving (N, C).
func (g *Graph) GlobalAvgPool(x *Var) *Var {
	dt := g.computeType(OpAvgPool, x)
	x = g.as(x, dt)
	xs := x.Shape()
	if len(xs) != 4 {
		panic(fmt.Sprintf("autograd.GlobalAvgPool: input %v; want (N,C,H,W)", xs))
	}
	hw := xs[2] * xs[3]
	st := device.Strides{Shape: []int{xs[0] * xs[1], hw}, A: []int{1, 0}}
	y := g.alloc(dt, xs[0], xs[1])
	g.dev.Reduce(y.Buffer(), buf(x), st, 1/float32(hw))
	out := g.result(y)
	if g.recording(x) {
		g.push(OpAvgPool, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, xs...)
			g.dev.Expand(dx.Buffer(), dy.Buffer(), st, 1/float32(hw))
			g.accum(x, dx)
		})
	}
	return out
}

// BatchNormParams are BatchNorm's mode, running statistics and constants.
type BatchNormParams struct {
	// Training normalises with the batch's own statistics and updates the
	// running ones; otherwise BatchNorm normalises with the running ones.
	Training bool
	// RunningMean and RunningVar are the running statistics (F32, (C)):
	// updated in training mode where not nil (PyTorch's rule: the variance
	// stored is the unbiased one), and required in evaluation mode.
	RunningMean, RunningVar *tensor.Tensor
	// Momentum is the weight of a batch's statistics in the running ones.
	Momentum float32
	// Eps is added to the variance before its inverse square root.
	Eps float32
}

// BatchNorm normalises x (N, C, ...) per channel and applies the affine
// gamma and beta (C, F32 parameters, or nil), with the batch's statistics
// or the running ones as p says.
//
// Statistics and arithmetic are F32 whatever x's storage, and the output
// keeps x's dtype: what cuDNN does under PyTorch's autocast, and what keeps
// a low-precision network's activations low-precision.
func (g *Graph) BatchNorm(x, gamma, beta *Var, p BatchNormParams) *Var {
	return g.batchNorm(x, gamma, beta, nil, nil, p)
}

// BatchNormReLU is ReLU(BatchNorm(x, gamma, beta, p) + res), res nil for
// none: the end of a ResNet block. In training mode, on a device with
// device.BatchNormActKernels and with res in x's dtype, it is one op: one
// pass forward after the statistics, computing in F32 and rounding once
// to x's dtype (the three ops round BatchNorm's output and the sum), and
// the gradient within BatchNormGrad's two passes, keeping x and the
// output alone. Otherwise it is the three ops.
func (g *Graph) BatchNormReLU(x, gamma, beta, res *Var, p BatchNormParams) *Var {
	x.mustLive("BatchNormReLU")
	if res != nil {
		res.mustLive("BatchNormReLU")
		if !slices.Equal(res.Shape(), x.Shape()) {
			panic(fmt.Sprintf("autograd.BatchNormReLU: input %v, residual %v; want one shape", x.Shape(), res.Shape()))
		}
	}
	ba, ok := g.dev.(device.BatchNormActKernels)
	if !ok || !p.Training || (res != nil && res.DType() != x.DType()) {
		y := g.BatchNorm(x, gamma, beta, p)
		if res != nil {
			y = g.Add(y, res)
		}
		return g.ReLU(y)
	}
	return g.batchNorm(x, gamma, beta, res, ba, p)
}

// batchNorm is BatchNorm, and with ba BatchNormReLU's fused op (training
// mode only).
func (g *Graph) batchNorm(x, gamma, beta, res *Var, ba device.BatchNormActKernels, p BatchNormParams) *Var {
	op := OpBatchNorm
	if ba != nil {
		op = OpBatchNormReLU
	}
	x.mustLive(op.name())
	g.computeType(op, x, gamma, beta) // F32 under autocast: the kernels compute in F32
	gamma, beta = g.as(gamma, dtype.F32), g.as(beta, dtype.F32)
	xs := x.Shape()
	if len(xs) < 2 {
		panic(fmt.Sprintf("autograd.%s: input %v; want (N, C, ...)", op.name(), xs))
	}
	n, c := xs[0], xs[1]
	hw := tensor.Numel(xs[2:])
	for _, v := range []*Var{gamma, beta} {
		if v != nil && (len(v.Shape()) != 1 || v.Shape()[0] != c) {
			panic(fmt.Sprintf("autograd.%s: input %v with affine parameter %v; want (%d)", op.name(), xs, v.Shape(), c))
		}
	}
	mean, invstd := g.bnStats(op, x, n, c, hw, p)
	var gb, bb device.Buffer
	if gamma != nil {
		gb = buf(gamma)
	}
	if beta != nil {
		bb = buf(beta)
	}
	y := g.alloc(x.DType(), xs...)
	if ba != nil {
		var rb device.Buffer
		if res != nil {
			rb = buf(res)
		}
		ba.BatchNormAct(y.Buffer(), buf(x), rb, mean.Buffer(), invstd.Buffer(), gb, bb, n, c, hw, true)
	} else {
		g.dev.BatchNorm(y.Buffer(), buf(x), mean.Buffer(), invstd.Buffer(), gb, bb, n, c, hw)
	}
	out := g.result(y)
	if !g.recording(x, gamma, beta, res) {
		return out
	}
	if !p.Training {
		// Evaluation mode is an affine map per channel.
		g.push(OpBatchNorm, out, []*Var{x, gamma, beta}, func(dy *tensor.Tensor) {
			g.bnEvalGrad(dy, x, gamma, beta, mean, invstd, n, c, hw)
		})
		return out
	}
	if ba != nil {
		// ReLU's gradient reads the output, as ReLU's own does.
		g.save(x.Value, mean, invstd, y)
		g.push(op, out, []*Var{x, gamma, beta, res}, func(dy *tensor.Tensor) {
			dx := g.alloc(x.DType(), xs...)
			dgamma, dbeta := g.alloc(dtype.F32, c), g.alloc(dtype.F32, c)
			var dres *tensor.Tensor
			var drb device.Buffer
			if res != nil && res.requiresGrad {
				dres = g.alloc(res.DType(), xs...)
				drb = dres.Buffer()
			}
			ba.BatchNormActGrad(dx.Buffer(), drb, dgamma.Buffer(), dbeta.Buffer(), dy.Buffer(), y.Buffer(), buf(x), mean.Buffer(), invstd.Buffer(), gb, n, c, hw, true)
			g.accum(x, dx)
			if dres != nil {
				g.accum(res, dres)
			}
			g.accum(gamma, dgamma)
			g.accum(beta, dbeta)
		})
		return out
	}
	g.save(x.Value, mean, invstd)
	g.push(OpBatchNorm, out, []*Var{x, gamma, beta}, func(dy *tensor.Tensor) {
		dx := g.alloc(x.DType(), xs...)
		dgamma, dbeta := g.alloc(dtype.F32, c), g.alloc(dtype.F32, c)
		g.dev.BatchNormGrad(dx.Buffer(), dgamma.Buffer(), dbeta.Buffer(), dy.Buffer(), buf(x), mean.Buffer(), invstd.Buffer(), gb, n, c, hw)
		g.accum(x, dx)
		g.accum(gamma, dgamma)
		g.accum(beta, dbeta)
	})
	return out
}

// bnStats returns the mean and 1/sqrt(variance + eps) of each of x's c
// channels (n, c, hw): the batch's in training mode, updating the running
// ones, else the running ones.
func (g *Graph) bnStats(op Op, x *Var, n, c, hw int, p BatchNormParams) (mean, invstd *tensor.Tensor) {
	mean, invstd = g.alloc(dtype.F32, c), g.alloc(dtype.F32, c)
	if !p.Training {
		if p.RunningMean == nil || p.RunningVar == nil {
			panic(fmt.Sprintf("autograd.%s: evaluation mode needs running statistics", op.name()))
		}
		g.dev.Copy(mean.Buffer(), 0, p.RunningMean.Buffer(), 0, c)
		g.dev.Unary(device.Rsqrt, invstd.Buffer(), p.RunningVar.Buffer(), p.Eps)
		return mean, invstd
	}
	m := n * hw
	if m < 2 {
		panic(fmt.Sprintf("autograd.%s: training needs more than one value per channel, input %v", op.name(), x.Shape()))
	}
	variance := g.alloc(dtype.F32, c)
	g.dev.Moments(mean.Buffer(), variance.Buffer(), buf(x), n, c, hw)
	if p.RunningMean != nil && !g.replay {
		g.dev.Axpby(p.RunningMean.Buffer(), p.RunningMean.Buffer(), mean.Buffer(), 1-p.Momentum, p.Momentum)
	}
	if p.RunningVar != nil && !g.replay {
		g.dev.Axpby(p.RunningVar.Buffer(), p.RunningVar.Buffer(), variance.Buffer(), 1-p.Momentum, p.Momentum*float32(m)/float32(m-1))
	}
	g.dev.Unary(device.Rsqrt, invstd.Buffer(), variance.Buffer(), p.Eps)
	variance.Release()
	return mean, invstd
}

// name is op's name as the API spells it, for messages.
func (op Op) name() string {
	if op == OpBatchNormReLU {
		return "BatchNormReLU"
	}
	return "BatchNorm"
}

// bnEvalGrad is the backward pass of BatchNorm with fixed statistics:
// dx = dy·γ·invstd, dγ = Σ dy·x̂, dβ = Σ dy.
func (g *Graph) bnEvalGrad(dy *tensor.Tensor, x, gamma, beta *Var, mean, invstd *tensor.Tensor, n, c, hw int) {
	shape := []int{n, c, hw}
	perC := device.Strides{Shape: shape, A: []int{0, 1, 0}, B: []int{0, 1, 0}}
	full := device.ContiguousStrides(shape)
	scale := g.alloc(dtype.F32, c) // γ·invstd
	if gamma != nil {
		g.dev.Binary(device.Mul, scale.Buffer(), buf(gamma), invstd.Buffer(), device.Strides{Shape: []int{c}, A: []int{1}, B: []int{1}})
	} else {
		g.dev.Copy(scale.Buffer(), 0, invstd.Buffer(), 0, c)
	}
	if x.requiresGrad {
		dx := g.alloc(x.DType(), x.Shape()...)
		g.dev.Binary(device.Mul, dx.Buffer(), dy.Buffer(), scale.Buffer(), device.Strides{Shape: shape, A: full, B: perC.B})
		g.accum(x, dx)
	}
	if beta != nil && beta.requiresGrad {
		db := g.alloc(dtype.F32, c)
		g.dev.Reduce(db.Buffer(), dy.Buffer(), device.Strides{Shape: shape, A: perC.A}, 1)
		g.accum(beta, db)
	}
	if gamma != nil && gamma.requiresGrad {
		xhat := g.alloc(dtype.F32, shape...)
		g.dev.BatchNorm(xhat.Buffer(), buf(x), mean.Buffer(), invstd.Buffer(), nil, nil, n, c, hw)
		g.dev.Binary(device.Mul, xhat.Buffer(), xhat.Buffer(), dy.Buffer(), device.Strides{Shape: shape, A: full, B: full})
		dg := g.alloc(dtype.F32, c)
		g.dev.Reduce(dg.Buffer(), xhat.Buffer(), device.Strides{Shape: shape, A: perC.A}, 1)
		xhat.Release()
		g.accum(gamma, dg)
	}
	scale.Release()
}
