package cudaops

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

func checkConv(s device.ConvShape) {
	if !s.Valid() {
		panic(fmt.Sprintf("cudaops: bad conv shape %+v", s))
	}
}

func convParam(s device.ConvShape) param {
	return pInts(s.N, s.C, s.H, s.W, s.KH, s.KW, s.StrideH, s.StrideW, s.PadH, s.PadW, s.OH, s.OW, s.N0, s.NB)
}

// Im2Col unrolls images [N0, N0+NB) of x into col (NB, C*KH*KW, OH*OW).
func (d *Device) Im2Col(col, x device.Buffer, s device.ConvShape) {
	checkConv(s)
	images, cols := s.N*s.C*s.H*s.W, s.NB*s.C*s.KH*s.KW*s.OH*s.OW
	d.gridKernel("Im2Col", d.ks.im2col, convParam(s), cols, cols, images, col, x)
}

// Col2Im overwrites images [N0, N0+NB) of dx with the adjoint of Im2Col.
func (d *Device) Col2Im(dx, col device.Buffer, s device.ConvShape) {
	checkConv(s)
	images, cols := s.N*s.C*s.H*s.W, s.NB*s.C*s.KH*s.KW*s.OH*s.OW
	d.gridKernel("Col2Im", d.ks.col2im, convParam(s), s.NB*s.C*s.H*s.W, images, cols, dx, col)
}

// gridKernel launches k, a thread for each of total elements, on dst of
// nDst elements and srcs of nSrc each: the kernel's arguments are each
// operand's pointer and dtype, dst first, then shape and total. The
// convolution's and the pools' kernels but MaxPool, whose positions are
// optional.
func (d *Device) gridKernel(op string, k *kernel, shape param, total, nDst, nSrc int, dst device.Buffer, srcs ...device.Buffer) {
	d.enter()
	defer d.leave()
	db := d.buf(dst, op)
	checkLen(op, nDst, db)
	args := []param{ptr(db), dt(db)}
	for _, s := range srcs {
		sb := d.buf(s, op)
		checkLen(op, nSrc, sb)
		args = append(args, ptr(sb), dt(sb))
	}
	if total == 0 {
		return
	}
	d.launch(k, gridFor(total), append(args, shape, pInt(total))...)
}

func checkPool(s device.PoolShape) {
	if !s.Valid() {
		panic(fmt.Sprintf("cudaops: bad pool shape %+v", s))
	}
}

func poolParam(s device.PoolShape) param {
	return pInts(s.N, s.C, s.H, s.W, s.KH, s.KW, s.StrideH, s.StrideW, s.PadH, s.PadW, s.OH, s.OW)
}

// MaxPool writes each window's maximum: its first maximum, or its last NaN
// (PyTorch's choice; see window_argmax in kernels/pool.cu), and, unless arg
// is nil, its position in the window.
func (d *Device) MaxPool(y, arg, x device.Buffer, s device.PoolShape) {
	d.enter()
	defer d.leave()
	yb, xb := d.buf(y, "MaxPool"), d.buf(x, "MaxPool")
	checkPool(s)
	checkLen("MaxPool", s.N*s.C*s.H*s.W, xb)
	total := s.N * s.C * s.OH * s.OW
	checkLen("MaxPool", total, yb)
	var ab *Buffer
	adt := pInt(0)
	if arg != nil {
		ab = d.buf(arg, "MaxPool")
		checkLen("MaxPool", total, ab)
		if !s.ArgFits(ab.DType()) {
			panic(fmt.Sprintf("cudaops: MaxPool: %dx%d window positions do not fit %v exactly", s.KH, s.KW, ab.DType()))
		}
		adt = dt(ab)
	}
	if total == 0 {
		return
	}
	d.launch(d.ks.maxpool, gridFor(total), ptr(yb), dt(yb), ptr(ab), adt, ptr(xb), dt(xb), poolParam(s), pInt(total))
}

// MaxPoolGrad routes dy to the element of each window MaxPool chose, as its
// arg recorded.
func (d *Device) MaxPoolGrad(dx, dy, arg device.Buffer, s device.PoolShape) {
	checkPool(s)
	in, out := s.N*s.C*s.H*s.W, s.N*s.C*s.OH*s.OW
	d.gridKernel("MaxPoolGrad", d.ks.maxpoolGrad, poolParam(s), in, in, out, dx, dy, arg)
}

// AvgPool writes each window's mean, padding counted as zeros.
func (d *Device) AvgPool(y, x device.Buffer, s device.PoolShape) {
	checkPool(s)
	in, out := s.N*s.C*s.H*s.W, s.N*s.C*s.OH*s.OW
	d.gridKernel("AvgPool", d.ks.avgpool, poolParam(s), out, out, in, y, x)
}

// AvgPoolGrad spreads dy evenly over each window.
func (d *Device) AvgPoolGrad(dx, dy device.Buffer, s device.PoolShape) {
	checkPool(s)
	in, out := s.N*s.C*s.H*s.W, s.N*s.C*s.OH*s.OW
	d.gridKernel("AvgPoolGrad", d.ks.avgpoolGrad, poolParam(s), in, in, out, dx, dy)
}

func checkNorm(op string, n, c, hw int) {
	if n < 0 || c < 0 || hw < 0 || (n*c*hw > maxElems) {
		panic(fmt.Sprintf("cudaops: %s: shape (%d, %d, %d)", op, n, c, hw))
	}
}

// Moments computes per-channel mean and biased variance over n and hw.
func (d *Device) Moments(mean, variance, x device.Buffer, n, c, hw int) {
	d.enter()
	defer d.leave()
	bs := d.f32("Moments", mean, variance)
	xb := d.buf(x, "Moments")
	checkNorm("Moments", n, c, hw)
	checkLen("Moments", n*c*hw, xb)
	checkLen("Moments", c, bs[0])
	if c == 0 {
		return
	}
	parts := bnParts(n * hw)
	part := d.scratch(c * parts)
	defer d.unscratch(part)
	for what, out := range []*Buffer{bs[0], bs[1]} { // the mean, then the variance about it
		var mean *Buffer
		if what == 1 {
			mean = bs[0]
		}
		d.launch(d.ks.bnSums, min(c*parts, maxGrid), ptr(part), pInt(what), ptr(nil), pInt(0), ptr(nil), pInt(0),
			ptr(xb), dt(xb), ptr(mean), ptr(nil), ptr(nil), pInt(0), pInt(n), pInt(c), pInt(hw), pInt(parts), pBool(false))
		d.launch(d.ks.bnCombine, gridFor(c), ptr(out), ptr(nil), ptr(nil), ptr(part), pInt(c), pInt(parts), pInt(0), pF32(float32(n*hw)))
	}
}

// bnPartElems is about how many of a channel's elements one block of
// mp_bn_sums sums (16 a thread), and bnMaxParts the most blocks a channel
// is cut into.
const bnPartElems, bnMaxParts = 16 * blockSize, 256

// bnParts is how many parts mp_bn_sums cuts a channel of m elements into:
// a function of m alone, so that the sums' order is too.
func bnParts(m int) int { return max(1, min(m/bnPartElems, bnMaxParts)) }

// BatchNorm computes y = (x - mean) * invstd * gamma + beta per channel;
// gamma and beta may be nil.
func (d *Device) BatchNorm(y, x, mean, invstd, gamma, beta device.Buffer, n, c, hw int) {
	d.batchNorm("BatchNorm", y, x, nil, mean, invstd, gamma, beta, n, c, hw, false)
}

// BatchNormGrad computes dx, and dgamma and dbeta when not nil, of
// training-mode BatchNorm; gamma may be nil.
func (d *Device) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma device.Buffer, n, c, hw int) {
	d.batchNormGrad("BatchNormGrad", dx, nil, dgamma, dbeta, dy, nil, x, mean, invstd, gamma, n, c, hw, false)
}

var _ device.BatchNormActKernels = (*Device)(nil)

// BatchNormAct computes y = relu(x*scale + shift + res) with BatchNorm's
// affine map, res (n, c, hw) or nil for none, and ReLU only when relu,
// in one pass (device.BatchNormActKernels).
func (d *Device) BatchNormAct(y, x, res, mean, invstd, gamma, beta device.Buffer, n, c, hw int, relu bool) {
	d.batchNorm("BatchNormAct", y, x, res, mean, invstd, gamma, beta, n, c, hw, relu)
}

// BatchNormActGrad computes, in training mode, dz = dy through ReLU's
// gradient at its output y when relu (dy itself otherwise; y is then not
// read), dz into dres unless it is nil, and BatchNormGrad of dz: dx, and
// dgamma and dbeta when not nil.
func (d *Device) BatchNormActGrad(dx, dres, dgamma, dbeta, dy, y, x, mean, invstd, gamma device.Buffer, n, c, hw int, relu bool) {
	d.batchNormGrad("BatchNormActGrad", dx, dres, dgamma, dbeta, dy, y, x, mean, invstd, gamma, n, c, hw, relu)
}

// optBuf is b's buffer and dtype code, or none (a null pointer) for nil.
func (d *Device) optBuf(b device.Buffer, op string, n int) (*Buffer, int) {
	if b == nil {
		return nil, 0
	}
	bb := d.buf(b, op)
	checkLen(op, n, bb)
	return bb, int(bb.DType())
}

// batchNorm is BatchNorm and BatchNormAct: mp_batchnorm_act, with neither
// residual nor ReLU for BatchNorm.
func (d *Device) batchNorm(op string, y, x, res, mean, invstd, gamma, beta device.Buffer, n, c, hw int, relu bool) {
	d.enter()
	defer d.leave()
	yb, xb := d.buf(y, op), d.buf(x, op)
	ps := d.f32(op, mean, invstd, gamma, beta)
	if ps[0] == nil || ps[1] == nil {
		panic("cudaops: " + op + ": nil mean or invstd")
	}
	checkNorm(op, n, c, hw)
	checkLen(op, n*c*hw, yb, xb)
	checkLen(op, c, ps[0])
	rb, rdt := d.optBuf(res, op, n*c*hw)
	total := n * c * hw
	if total == 0 {
		return
	}
	d.launch(d.ks.batchnormAct, gridFor(total), ptr(yb), dt(yb), ptr(xb), dt(xb), ptr(rb), pInt(rdt),
		ptr(ps[0]), ptr(ps[1]), ptr(ps[2]), ptr(ps[3]), pInt(c), pInt(hw), pInt(total), pBool(relu))
}

// batchNormGrad is BatchNormGrad and BatchNormActGrad:
// mp_bn_sums (dz, into dres when asked, and the channels' two sums in
// parts), mp_bn_combine (the parts added in order, into dgamma and dbeta
// when asked) and mp_bn_grad_apply (dx), with neither dres nor ReLU for
// BatchNormGrad.
func (d *Device) batchNormGrad(op string, dx, dres, dgamma, dbeta, dy, y, x, mean, invstd, gamma device.Buffer, n, c, hw int, relu bool) {
	d.enter()
	defer d.leave()
	db, gb, xb := d.buf(dx, op), d.buf(dy, op), d.buf(x, op)
	ps := d.f32(op, mean, invstd, gamma, dgamma, dbeta)
	if ps[0] == nil || ps[1] == nil {
		panic("cudaops: " + op + ": nil mean or invstd")
	}
	checkNorm(op, n, c, hw)
	checkLen(op, n*c*hw, db, gb, xb)
	checkLen(op, c, ps[0])
	rb, rdt := d.optBuf(dres, op, n*c*hw)
	var yb *Buffer
	ydt := 0
	if relu {
		if y == nil {
			panic("cudaops: " + op + ": ReLU's gradient without its output y")
		}
		yb, ydt = d.optBuf(y, op, n*c*hw)
	}
	if c == 0 {
		return
	}
	parts := bnParts(n * hw)
	part, tot := d.scratch(2*c*parts), d.scratch(2*c)
	defer d.unscratch(part)
	defer d.unscratch(tot)
	d.launch(d.ks.bnSums, min(c*parts, maxGrid), ptr(part), pInt(2), ptr(gb), dt(gb), ptr(yb), pInt(ydt),
		ptr(xb), dt(xb), ptr(ps[0]), ptr(ps[1]), ptr(rb), pInt(rdt), pInt(n), pInt(c), pInt(hw), pInt(parts), pBool(relu))
	d.launch(d.ks.bnCombine, gridFor(c), ptr(tot), ptr(ps[4]), ptr(ps[3]), ptr(part), pInt(c), pInt(parts), pInt(1), pF32(1))
	if total := n * c * hw; total > 0 {
		d.launch(d.ks.bnGradApply, gridFor(total), ptr(db), dt(db), ptr(gb), dt(gb), ptr(yb), pInt(ydt), ptr(xb), dt(xb),
			ptr(ps[0]), ptr(ps[1]), ptr(ps[2]), ptr(tot), pInt(n), pInt(c), pInt(hw), pBool(relu))
	}
}
