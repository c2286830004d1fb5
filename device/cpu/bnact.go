package cpu

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Batch norm with a residual add and ReLU fused in
// (device.BatchNormActKernels), and the plain kernels' fast path for
// 16-bit storage: the loops of bnact_amd64.s read float32, bfloat16 or
// binary16 where it lies, widening as they load and rounding once as they
// store, so a BF16 or F16 network's batch norm makes no widening pass
// into scratch and no rounding pass out of it. Their arithmetic is
// normsimd.go's, operation for operation, so the plain kernels give the
// same bits on either path;
// the fused forward also rounds BatchNorm's output and the add only once,
// where the composite rounds each to the tensor's dtype.

var _ device.BatchNormActKernels = (*Device)(nil)

// Flags of the fused loops.
const (
	bnRes  = 1 << iota // forward: add res; backward: store dz into dres
	bnReLU             // through ReLU (forward), ReLU's gradient at y (backward)
)

// Elsewhere (AVX2, F16 storage, purego) the fused kernels run batch norm's
// loops of normsimd.go and ReLU's of relu.go on float32 views, plane by
// plane while the plane is in cache, with the same operations in the same
// order as the assembly: x*scale + shift, + res, ReLU; dz = dy & ReLU's
// mask, then bnGradSums and bnGradOut of dz.

// reluInPlace applies relu to v.
func reluInPlace(v []float32) {
	n := reluF32SIMD(v, v)
	for i := n; i < len(v); i++ {
		v[i] = relu(v[i])
	}
}

// reluGradInto sets dz = dy where ReLU's output y passes it, else +0.
func reluGradInto(dz, dy, y []float32) {
	n := reluGradF32SIMD(dz, dy, y)
	for i := n; i < len(dz); i++ {
		dz[i] = math.Float32frombits(math.Float32bits(dy[i]) & reluGradMask(y[i]))
	}
}

// dzView is the gradient that reaches batch norm's output on elements
// [lo, lo+n): dy's view, or a scratch with dy through ReLU's gradient at
// y when flags&bnReLU.
func dzView(gb, yb *Buffer, lo, n, flags int) view {
	g := read(gb, lo, lo+n)
	if flags&bnReLU == 0 {
		return g
	}
	y := read(yb, lo, lo+n)
	t := getScratch(n)
	reluGradInto(*t, g.v, y.v)
	g.done()
	y.done()
	return view{v: *t, tmp: t}
}

// bnLoop are bnact_amd64.s's loops for one storage dtype; sum and
// sumSqDev (the statistics) are only there for 16-bit storage, which
// normsimd's float32 loops do not read.
type bnLoop struct {
	act      func(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int)
	gradSums func(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64)
	gradOut  func(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int)
	add      func(dst, x, y unsafe.Pointer, n int)
	sum      func(x *uint16, n int) float64
	sumSqDev func(x *uint16, n int, mu float64) float64
}

// bnLoops are the loops by dtype.
var bnLoops = [...]bnLoop{
	dtype.F32:  {bnActF32, bnActGradSumsF32, bnActGradOutF32, addF32, nil, nil},
	dtype.BF16: {bnActBF16, bnActGradSumsBF16, bnActGradOutBF16, addBF16, bnSum64BF16, bnSumSqDev64BF16},
	dtype.F16:  {bnActF16, bnActGradSumsF16, bnActGradOutF16, addF16, bnSum64F16, bnSumSqDev64F16},
}

// bnFast reports whether the assembly loops take the buffers: AVX-512,
// and every one present in one dtype.
func bnFast(bufs ...*Buffer) bool {
	if simdNormLevel != simdAVX512 {
		return false
	}
	dt := bufs[0].dt
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

// bnActPlane computes y = relu(x*scale + shift + res) on elements [lo,
// lo+n) (res nil unless flags&bnRes, relu only when flags&bnReLU).
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
		bnLoops[yb.dt].act(at(yb, lo), at(xb, lo), at(rb, lo), n, scale, shift, flags)
		return
	}
	in, out := read(xb, lo, lo+n), writeView(yb, lo, lo+n)
	scaleShift(out.v, in.v, scale, shift)
	in.done()
	if flags&bnRes != 0 {
		r := read(rb, lo, lo+n)
		binaryRow(device.Add, out.v, out.v, r.v)
		r.done()
	}
	if flags&bnReLU != 0 {
		reluInPlace(out.v)
	}
	commit(yb, lo, out)
}

// bnActGradSumsPlane returns bnGradSums of dz on elements [lo, lo+n),
// storing dz into dres unless it is nil: dz is dy through ReLU's gradient
// at y when flags&bnReLU (y is nil otherwise).
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
		return bnLoops[gb.dt].gradSums(at(drb, lo), at(gb, lo), at(yb, lo), at(xb, lo), n, mu, is, flags)
	}
	dz, in := dzView(gb, yb, lo, n, flags), read(xb, lo, lo+n)
	sdy, sdyx = bnGradSums(dz.v, in.v, mu, is)
	in.done()
	if drb != nil {
		w := writeView(drb, lo, lo+n)
		copy(w.v, dz.v)
		commit(drb, lo, w)
	}
	dz.done()
	return sdy, sdyx
}

// bnActGradOutPlane writes bnGradOut of dz into dx on elements [lo,
// lo+n).
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
		bnLoops[db.dt].gradOut(at(db, lo), at(gb, lo), at(yb, lo), at(xb, lo), n, k, flags)
		return
	}
	dz, in, out := dzView(gb, yb, lo, n, flags), read(xb, lo, lo+n), writeView(db, lo, lo+n)
	bnGradOut(out.v, dz.v, in.v, k)
	dz.done()
	in.done()
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

// batchNormGrad is BatchNormGrad and BatchNormActGrad. Its passes go
// plane by plane in memory order, each plane's sums into a partial that
// the channel's total then adds in image order: the sums of a
// channel-by-channel loop, without its jumps from one image's plane to
// the next.
func (d *Device) batchNormGrad(op string, dx device.Buffer, drb *Buffer, dgamma, dbeta, dy device.Buffer, yb *Buffer, x, mean, invstd, gamma device.Buffer, n, c, hw, flags int) {
	db, gb, xb := d.buf(dx, op), d.buf(dy, op), d.buf(x, op)
	ps := d.f32(op, mean, invstd, gamma, dgamma, dbeta)
	d.checkLen(op, n*c*hw, db, gb, xb)
	d.checkLen(op, c, ps[0])
	m := float64(n * hw)
	part := getF64(2 * n * c)
	pa, pb := (*part)[:n*c], (*part)[n*c:]
	d.forPlanes(n*c, hw, func(i int) {
		ch := i % c
		pa[i], pb[i] = bnActGradSumsPlane(drb, gb, yb, xb, i*hw, hw, float64(ps[0].f32[ch]), float64(ps[1].f32[ch]), flags)
	})
	ks := make([]bnGradConsts, c)
	for ch := range c {
		mu, is := float64(ps[0].f32[ch]), float64(ps[1].f32[ch])
		var sdy, sdyx float64
		for i := range n {
			sdy += pa[i*c+ch]
			sdyx += pb[i*c+ch]
		}
		gam, _ := affine(ps[2], nil, ch)
		if ps[3] != nil {
			ps[3].f32[ch] = float32(sdyx)
		}
		if ps[4] != nil {
			ps[4].f32[ch] = float32(sdy)
		}
		ks[ch] = bnGradConsts{mu: mu, is: is, m: m, sdy: sdy, sdyx: sdyx, k: float64(gam) * is / m}
	}
	putF64(part)
	d.forPlanes(n*c, hw, func(i int) {
		bnActGradOutPlane(db, gb, yb, xb, i*hw, hw, &ks[i%c], flags&bnReLU)
	})
}

// f64s holds float64 scratch for the planes' partial sums.
var f64s = sync.Pool{New: func() any { return new([]float64) }}

func getF64(n int) *[]float64 {
	p := f64s.Get().(*[]float64)
	if cap(*p) < n {
		*p = make([]float64, n)
	}
	*p = (*p)[:n]
	return p
}

func putF64(p *[]float64) { f64s.Put(p) }

// sumPlane is the float64 sum of elements [lo, lo+n) of x, 16-bit values
// read where they lie.
func sumPlane(xb *Buffer, lo, n int) float64 {
	if n > 0 && xb.dt != dtype.F32 && simdNormLevel == simdAVX512 {
		_ = xb.u16[lo+n-1]
		return bnLoops[xb.dt].sum(&xb.u16[lo], n)
	}
	v := read(xb, lo, lo+n)
	s := sum64(v.v)
	v.done()
	return s
}

// sumSqDevPlane is the sum of (x - mu)^2 over elements [lo, lo+n) of x.
func sumSqDevPlane(xb *Buffer, lo, n int, mu float64) float64 {
	if n > 0 && xb.dt != dtype.F32 && simdNormLevel == simdAVX512 {
		_ = xb.u16[lo+n-1]
		return bnLoops[xb.dt].sumSqDev(&xb.u16[lo], n, mu)
	}
	v := read(xb, lo, lo+n)
	s := sumSqDev64(v.v, mu)
	v.done()
	return s
}
