package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Batch norm with a residual add and ReLU fused in
// (device.BatchNormActKernels), and the plain kernels' fast path for
// bfloat16: the loops of bnact_amd64.s read float32 or bfloat16 where it
// lies, widening as they load and rounding once as they store, so a BF16
// network's batch norm makes no widening pass into scratch and no
// rounding pass out of it. Their arithmetic is normsimd.go's, operation
// for operation, so the plain kernels give the same bits on either path;
// the fused forward also rounds BatchNorm's output and the add only once,
// where the composite rounds each to the tensor's dtype.

var _ device.BatchNormActKernels = (*Device)(nil)

// Flags of the fused loops.
const (
	bnRes  = 1 << iota // forward: add res; backward: store dz into dres
	bnReLU             // through ReLU (forward), ReLU's gradient at y (backward)
)

// bnActGo sets dst = x*scale + shift, plus res when flags&bnRes, through
// relu when flags&bnReLU, as float32 operations in that order.
func bnActGo(dst, x, res []float32, scale, shift float32, flags int) {
	for j, v := range x {
		t := float32(v*scale) + shift
		if flags&bnRes != 0 {
			t += res[j]
		}
		if flags&bnReLU != 0 {
			t = relu(t)
		}
		dst[j] = t
	}
}

// bnDz is the gradient that reaches batch norm's output: dy, or dy where
// ReLU's output y passes it (reluGradMask) when flags&bnReLU.
func bnDz(dy, y float32, flags int) float32 {
	if flags&bnReLU == 0 {
		return dy
	}
	return math.Float32frombits(math.Float32bits(dy) & reluGradMask(y))
}

// bnActGradSumsGo is bnGradSums over dz, storing dz into dres when
// flags&bnRes.
func bnActGradSumsGo(dres, dy, y, x []float32, mu, is float64, flags int) (sdy, sdyx float64) {
	var a, b [16]float64
	for j, v := range dy {
		var yv float32
		if flags&bnReLU != 0 {
			yv = y[j]
		}
		dz := bnDz(v, yv, flags)
		if flags&bnRes != 0 {
			dres[j] = dz
		}
		a[j%16] += float64(dz)
		b[j%16] += float64(float64(float64(dz)*(float64(x[j])-mu)) * is)
	}
	return lanes16(&a), lanes16(&b)
}

// bnActGradOutGo is bnGradOut over dz.
func bnActGradOutGo(dst, dy, y, x []float32, c *bnGradConsts, flags int) {
	for j, v := range dy {
		var yv float32
		if flags&bnReLU != 0 {
			yv = y[j]
		}
		dz := bnDz(v, yv, flags)
		xhat := float64((float64(x[j]) - c.mu) * c.is)
		dst[j] = float32(c.k * (float64(c.m*float64(dz)) - c.sdy - float64(xhat*c.sdyx)))
	}
}

// bnFast reports whether the assembly loops take the buffers: AVX-512,
// and every one present in one dtype, F32 or BF16.
func bnFast(bufs ...*Buffer) bool {
	if simdNormLevel != simdAVX512 {
		return false
	}
	dt := bufs[0].dt
	if dt != dtype.F32 && dt != dtype.BF16 {
		return false
	}
	for _, b := range bufs[1:] {
		if b != nil && b.dt != dt {
			return false
		}
	}
	return true
}

// at is element i of b's storage for the assembly, nil for a nil buffer.
func at(b *Buffer, i int) unsafe.Pointer {
	switch {
	case b == nil:
		return nil
	case b.dt == dtype.F32:
		return unsafe.Pointer(&b.f32[i])
	}
	return unsafe.Pointer(&b.u16[i])
}

// bnActPlane runs bnActGo on elements [lo, lo+n) of y, x and res (nil
// unless flags&bnRes).
func bnActPlane(yb, xb, rb *Buffer, lo, n int, scale, shift float32, flags int) {
	if n == 0 {
		return
	}
	if bnFast(yb, xb, rb) {
		// Bounds: every buffer holds [lo, lo+n).
		_, _ = elem(yb, lo+n-1), elem(xb, lo+n-1)
		if rb != nil {
			_ = elem(rb, lo+n-1)
		}
		if yb.dt == dtype.F32 {
			bnActF32(at(yb, lo), at(xb, lo), at(rb, lo), n, scale, shift, flags)
		} else {
			bnActBF16(at(yb, lo), at(xb, lo), at(rb, lo), n, scale, shift, flags)
		}
		return
	}
	in, out := read(xb, lo, lo+n), writeView(yb, lo, lo+n)
	var r view
	if rb != nil {
		r = read(rb, lo, lo+n)
	}
	if flags == 0 {
		scaleShift(out.v, in.v, scale, shift) // the AVX2 loop where there is one
	} else {
		bnActGo(out.v, in.v, r.v, scale, shift, flags)
	}
	in.done()
	r.done()
	commit(yb, lo, out)
}

// bnActGradSumsPlane runs bnActGradSumsGo on elements [lo, lo+n) (y nil
// unless flags&bnReLU, dres nil unless flags&bnRes).
func bnActGradSumsPlane(drb, gb, yb, xb *Buffer, lo, n int, mu, is float64, flags int) (sdy, sdyx float64) {
	if n == 0 {
		return 0, 0
	}
	if bnFast(gb, xb, yb, drb) {
		for _, b := range []*Buffer{gb, xb, yb, drb} {
			if b != nil {
				_ = elem(b, lo+n-1)
			}
		}
		if gb.dt == dtype.F32 {
			return bnActGradSumsF32(at(drb, lo), at(gb, lo), at(yb, lo), at(xb, lo), n, mu, is, flags)
		}
		return bnActGradSumsBF16(at(drb, lo), at(gb, lo), at(yb, lo), at(xb, lo), n, mu, is, flags)
	}
	g, in := read(gb, lo, lo+n), read(xb, lo, lo+n)
	var y, dres view
	if yb != nil {
		y = read(yb, lo, lo+n)
	}
	if drb != nil {
		dres = writeView(drb, lo, lo+n)
	}
	if flags == 0 {
		sdy, sdyx = bnGradSums(g.v, in.v, mu, is)
	} else {
		sdy, sdyx = bnActGradSumsGo(dres.v, g.v, y.v, in.v, mu, is, flags)
	}
	g.done()
	in.done()
	y.done()
	if drb != nil {
		commit(drb, lo, dres)
	}
	return sdy, sdyx
}

// bnActGradOutPlane runs bnActGradOutGo on elements [lo, lo+n).
func bnActGradOutPlane(db, gb, yb, xb *Buffer, lo, n int, k *bnGradConsts, flags int) {
	if n == 0 {
		return
	}
	if bnFast(db, gb, xb, yb) {
		for _, b := range []*Buffer{db, gb, xb, yb} {
			if b != nil {
				_ = elem(b, lo+n-1)
			}
		}
		if db.dt == dtype.F32 {
			bnActGradOutF32(at(db, lo), at(gb, lo), at(yb, lo), at(xb, lo), n, k, flags)
		} else {
			bnActGradOutBF16(at(db, lo), at(gb, lo), at(yb, lo), at(xb, lo), n, k, flags)
		}
		return
	}
	g, in, out := read(gb, lo, lo+n), read(xb, lo, lo+n), writeView(db, lo, lo+n)
	var y view
	if yb != nil {
		y = read(yb, lo, lo+n)
	}
	if flags == 0 {
		bnGradOut(out.v, g.v, in.v, k)
	} else {
		bnActGradOutGo(out.v, g.v, y.v, in.v, k, flags)
	}
	g.done()
	in.done()
	y.done()
	commit(db, lo, out)
}

// elem checks that b holds element i (for the bounds the assembly does
// not check) and returns nothing useful.
func elem(b *Buffer, i int) struct{} {
	if i < 0 || i >= b.n {
		panic(fmt.Sprintf("cpu: batch norm: element %d of a %d-element buffer", i, b.n))
	}
	return struct{}{}
}

// BatchNormAct computes y = relu(BatchNorm(x) + res) (res nil for none,
// relu false for none) in one pass: x*scale + shift per channel, plus
// res, through ReLU, each in float32 and rounded once to y's dtype.
func (d *Device) BatchNormAct(y, x, res, mean, invstd, gamma, beta device.Buffer, n, c, hw int, relu bool) {
	yb, xb := d.buf(y, "BatchNormAct"), d.buf(x, "BatchNormAct")
	var rb *Buffer
	flags := 0
	if res != nil {
		rb = d.buf(res, "BatchNormAct")
		d.checkLen("BatchNormAct", n*c*hw, rb)
		flags |= bnRes
	}
	if relu {
		flags |= bnReLU
	}
	d.batchNorm("BatchNormAct", yb, xb, rb, mean, invstd, gamma, beta, n, c, hw, flags)
}

// batchNorm is BatchNorm and BatchNormAct.
func (d *Device) batchNorm(op string, yb, xb, rb *Buffer, mean, invstd, gamma, beta device.Buffer, n, c, hw, flags int) {
	ps := d.f32(op, mean, invstd, gamma, beta)
	d.checkLen(op, n*c*hw, yb, xb)
	d.checkLen(op, c, ps[0])
	d.forPlanes(n*c, hw, func(i int) {
		ch := i % c
		g, b := affine(ps[2], ps[3], ch)
		scale := ps[1].f32[ch] * g
		shift := b - ps[0].f32[ch]*scale
		bnActPlane(yb, xb, rb, i*hw, hw, scale, shift, flags)
	})
}

// BatchNormActGrad computes the gradients of BatchNormAct in training
// mode: dz = dy through ReLU's gradient at y (its output) when relu, into
// dres unless nil (the residual's gradient), and BatchNormGrad of dz, its
// sums in float64 as Moments makes them.
func (d *Device) BatchNormActGrad(dx, dres, dgamma, dbeta, dy, y, x, mean, invstd, gamma device.Buffer, n, c, hw int, relu bool) {
	var drb, yb *Buffer
	flags := 0
	if dres != nil {
		drb = d.buf(dres, "BatchNormActGrad")
		d.checkLen("BatchNormActGrad", n*c*hw, drb)
		flags |= bnRes
	}
	if relu {
		yb = d.buf(y, "BatchNormActGrad")
		d.checkLen("BatchNormActGrad", n*c*hw, yb)
		flags |= bnReLU
	}
	d.batchNormGrad("BatchNormActGrad", dx, drb, dgamma, dbeta, dy, yb, x, mean, invstd, gamma, n, c, hw, flags)
}

// batchNormGrad is BatchNormGrad and BatchNormActGrad.
func (d *Device) batchNormGrad(op string, dx device.Buffer, drb *Buffer, dgamma, dbeta, dy device.Buffer, yb *Buffer, x, mean, invstd, gamma device.Buffer, n, c, hw, flags int) {
	db, gb, xb := d.buf(dx, op), d.buf(dy, op), d.buf(x, op)
	ps := d.f32(op, mean, invstd, gamma, dgamma, dbeta)
	d.checkLen(op, n*c*hw, db, gb, xb)
	d.checkLen(op, c, ps[0])
	m := float64(n * hw)
	d.forPlanes(c, n*hw, func(ch int) {
		mu, is := float64(ps[0].f32[ch]), float64(ps[1].f32[ch])
		var sdy, sdyx float64
		for i := range n {
			a, b := bnActGradSumsPlane(drb, gb, yb, xb, (i*c+ch)*hw, hw, mu, is, flags)
			sdy += a
			sdyx += b
		}
		gam, _ := affine(ps[2], nil, ch)
		if ps[3] != nil {
			ps[3].f32[ch] = float32(sdyx)
		}
		if ps[4] != nil {
			ps[4].f32[ch] = float32(sdy)
		}
		k := &bnGradConsts{mu: mu, is: is, m: m, sdy: sdy, sdyx: sdyx, k: float64(gam) * is / m}
		for i := range n {
			bnActGradOutPlane(db, gb, yb, xb, (i*c+ch)*hw, hw, k, flags&bnReLU)
		}
	})
}

// sumPlane is the float64 sum of elements [lo, lo+n) of x, bfloat16 read
// where it lies.
func sumPlane(xb *Buffer, lo, n int) float64 {
	if n > 0 && xb.dt == dtype.BF16 && simdNormLevel == simdAVX512 {
		_ = xb.u16[lo+n-1]
		return bnSum64BF16(&xb.u16[lo], n)
	}
	v := read(xb, lo, lo+n)
	s := sum64(v.v)
	v.done()
	return s
}

// sumSqDevPlane is the sum of (x - mu)^2 over elements [lo, lo+n) of x.
func sumSqDevPlane(xb *Buffer, lo, n int, mu float64) float64 {
	if n > 0 && xb.dt == dtype.BF16 && simdNormLevel == simdAVX512 {
		_ = xb.u16[lo+n-1]
		return bnSumSqDev64BF16(&xb.u16[lo], n, mu)
	}
	v := read(xb, lo, lo+n)
	s := sumSqDev64(v.v, mu)
	v.done()
	return s
}
