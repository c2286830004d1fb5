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
	d.enter()
	defer d.leave()
	cb, xb := d.buf(col, "Im2Col"), d.buf(x, "Im2Col")
	checkConv(s)
	total := s.NB * s.C * s.KH * s.KW * s.OH * s.OW
	checkLen("Im2Col", s.N*s.C*s.H*s.W, xb)
	checkLen("Im2Col", total, cb)
	if total == 0 {
		return
	}
	d.launch(d.ks.im2col, gridFor(total), ptr(cb), dt(cb), ptr(xb), dt(xb), convParam(s), pInt(total))
}

// Col2Im overwrites images [N0, N0+NB) of dx with the adjoint of Im2Col.
func (d *Device) Col2Im(dx, col device.Buffer, s device.ConvShape) {
	d.enter()
	defer d.leave()
	db, cb := d.buf(dx, "Col2Im"), d.buf(col, "Col2Im")
	checkConv(s)
	checkLen("Col2Im", s.N*s.C*s.H*s.W, db)
	checkLen("Col2Im", s.NB*s.C*s.KH*s.KW*s.OH*s.OW, cb)
	total := s.NB * s.C * s.H * s.W
	if total == 0 {
		return
	}
	d.launch(d.ks.col2im, gridFor(total), ptr(db), dt(db), ptr(cb), dt(cb), convParam(s), pInt(total))
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
	d.enter()
	defer d.leave()
	db, gb, ab := d.buf(dx, "MaxPoolGrad"), d.buf(dy, "MaxPoolGrad"), d.buf(arg, "MaxPoolGrad")
	checkPool(s)
	total := s.N * s.C * s.H * s.W
	checkLen("MaxPoolGrad", total, db)
	checkLen("MaxPoolGrad", s.N*s.C*s.OH*s.OW, gb, ab)
	if total == 0 {
		return
	}
	d.launch(d.ks.maxpoolGrad, gridFor(total), ptr(db), dt(db), ptr(gb), dt(gb), ptr(ab), dt(ab), poolParam(s), pInt(total))
}

// AvgPool writes each window's mean, padding counted as zeros.
func (d *Device) AvgPool(y, x device.Buffer, s device.PoolShape) {
	d.enter()
	defer d.leave()
	yb, xb := d.buf(y, "AvgPool"), d.buf(x, "AvgPool")
	checkPool(s)
	checkLen("AvgPool", s.N*s.C*s.H*s.W, xb)
	total := s.N * s.C * s.OH * s.OW
	checkLen("AvgPool", total, yb)
	if total == 0 {
		return
	}
	d.launch(d.ks.avgpool, gridFor(total), ptr(yb), dt(yb), ptr(xb), dt(xb), poolParam(s), pInt(total))
}

// AvgPoolGrad spreads dy evenly over each window.
func (d *Device) AvgPoolGrad(dx, dy device.Buffer, s device.PoolShape) {
	d.enter()
	defer d.leave()
	db, gb := d.buf(dx, "AvgPoolGrad"), d.buf(dy, "AvgPoolGrad")
	checkPool(s)
	total := s.N * s.C * s.H * s.W
	checkLen("AvgPoolGrad", total, db)
	checkLen("AvgPoolGrad", s.N*s.C*s.OH*s.OW, gb)
	if total == 0 {
		return
	}
	d.launch(d.ks.avgpoolGrad, gridFor(total), ptr(db), dt(db), ptr(gb), dt(gb), poolParam(s), pInt(total))
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
	d.launch(d.ks.moments, min(c, maxGrid), ptr(bs[0]), ptr(bs[1]), ptr(xb), dt(xb), pInt(n), pInt(c), pInt(hw))
}

// BatchNorm computes y = (x - mean) * invstd * gamma + beta per channel;
// gamma and beta may be nil.
func (d *Device) BatchNorm(y, x, mean, invstd, gamma, beta device.Buffer, n, c, hw int) {
	d.enter()
	defer d.leave()
	yb, xb := d.buf(y, "BatchNorm"), d.buf(x, "BatchNorm")
	ps := d.f32("BatchNorm", mean, invstd, gamma, beta)
	if ps[0] == nil || ps[1] == nil {
		panic("cudaops: BatchNorm: nil mean or invstd")
	}
	checkNorm("BatchNorm", n, c, hw)
	checkLen("BatchNorm", n*c*hw, yb, xb)
	checkLen("BatchNorm", c, ps[0])
	total := n * c * hw
	if total == 0 {
		return
	}
	d.launch(d.ks.batchnorm, gridFor(total), ptr(yb), dt(yb), ptr(xb), dt(xb),
		ptr(ps[0]), ptr(ps[1]), ptr(ps[2]), ptr(ps[3]), pInt(c), pInt(hw), pInt(total))
}

// BatchNormGrad computes dx, and dgamma and dbeta when not nil, of
// training-mode BatchNorm; gamma may be nil.
func (d *Device) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma device.Buffer, n, c, hw int) {
	d.enter()
	defer d.leave()
	db, gb, xb := d.buf(dx, "BatchNormGrad"), d.buf(dy, "BatchNormGrad"), d.buf(x, "BatchNormGrad")
	ps := d.f32("BatchNormGrad", mean, invstd, gamma, dgamma, dbeta)
	if ps[0] == nil || ps[1] == nil {
		panic("cudaops: BatchNormGrad: nil mean or invstd")
	}
	checkNorm("BatchNormGrad", n, c, hw)
	checkLen("BatchNormGrad", n*c*hw, db, gb, xb)
	checkLen("BatchNormGrad", c, ps[0])
	if c == 0 {
		return
	}
	d.launch(d.ks.batchnormGrad, min(c, maxGrid), ptr(db), dt(db), ptr(ps[3]), ptr(ps[4]), ptr(gb), dt(gb),
		ptr(xb), dt(xb), ptr(ps[0]), ptr(ps[1]), ptr(ps[2]), pInt(n), pInt(c), pInt(hw))
}
