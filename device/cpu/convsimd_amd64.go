//go:build !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// simdConv selects the AVX-512 pooling and im2col loops; tests turn it off
// to check them against the Go loops.
var simdConv = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2

//go:noescape
func maxPool2x2F32(y *float32, pos *uint16, x *float32, w, oh, ow int)

//go:noescape
func maxPool2x2U16(y, pos, x *uint16, w, oh, ow int, bf16 bool)

// maxPoolSIMD pools plane p of x into y and pos with AVX-512 in their own
// storage and reports whether it did: for 2x2 windows at stride 2, y in
// x's dtype and positions in F16 (pos may be nil).
func maxPoolSIMD(y, pos, x *Buffer, p int, s device.PoolShape) bool {
	if !simdConv || !is2x2(s) || y.dt != x.dt || (pos != nil && pos.dt != dtype.F16) || s.OH == 0 || s.OW == 0 {
		return false
	}
	hw, ohw := s.H*s.W, s.OH*s.OW
	var pp *uint16
	if pos != nil {
		pp = &pos.u16[p*ohw : (p+1)*ohw][0]
	}
	if x.dt == dtype.F32 {
		maxPool2x2F32(&y.f32[p*ohw : (p+1)*ohw][0], pp, &x.f32[p*hw : (p+1)*hw][0], s.W, s.OH, s.OW)
	} else {
		maxPool2x2U16(&y.u16[p*ohw : (p+1)*ohw][0], pp, &x.u16[p*hw : (p+1)*hw][0], s.W, s.OH, s.OW, x.dt == dtype.BF16)
	}
	return true
}

//go:noescape
func copyRows32(dst, src *float32, n, rows, ds, ss int)

//go:noescape
func copyRows16(dst, src *uint16, n, rows, ds, ss int)

//go:noescape
func copyStride2x32(dst, src *float32, n, rows, ds, ss int)

//go:noescape
func copyStride2x16(dst, src *uint16, n, rows, ds, ss int)

//go:noescape
func maxPoolGrad2x2F32(dx, dy *float32, pos *uint16, w, oh, ow int) (bad bool)

//go:noescape
func maxPoolGrad2x2U16(dx, dy, pos *uint16, w, oh, ow int) (bad bool)

//go:noescape
func col2imRowsAVX512(dst, col *float32, ent *c2iEntry, end *int32, h, w int, wmask uint64)

//go:noescape
func addRowsAt32(dst, src *float32, off, n, rows, ds, ss int)

// copyRowsF32SIMD and the others below run the row loops of conv.go with
// AVX-512 and report whether they did; the caller has checked the bounds.
func copyRowsF32SIMD(dst, src []float32, n, rows, ds, ss int) bool {
	if !simdConv {
		return false
	}
	copyRows32(&dst[0], &src[0], n, rows, ds, ss)
	return true
}

func copyRowsU16SIMD(dst, src []uint16, n, rows, ds, ss int) bool {
	if !simdConv {
		return false
	}
	copyRows16(&dst[0], &src[0], n, rows, ds, ss)
	return true
}

func addRowsSIMD(dst, src []float32, off, n, rows, ds, ss int) bool {
	if !simdConv {
		return false
	}
	addRowsAt32(&dst[0], &src[0], off, n, rows, ds, ss)
	return true
}

func copyStride2F32SIMD(dst, src []float32, n, rows, ds, ss int) bool {
	if !simdConv {
		return false
	}
	copyStride2x32(&dst[0], &src[0], n, rows, ds, ss)
	return true
}

func copyStride2U16SIMD(dst, src []uint16, n, rows, ds, ss int) bool {
	if !simdConv {
		return false
	}
	copyStride2x16(&dst[0], &src[0], n, rows, ds, ss)
	return true
}

// col2imSIMD runs col2imPlane's rows with AVX-512 and reports whether it
// did; rows must be at most 64 floats wide.
func col2imSIMD(dst, col []float32, p *c2iPlan) bool {
	if !simdConv || len(p.end) == 0 {
		return false
	}
	_ = dst[len(p.end)*p.w-1]
	col2imRowsAVX512(&dst[0], &col[0], unsafe.SliceData(p.ent), &p.end[0], len(p.end), p.w, p.wmask)
	return true
}

// maxPoolGradSIMD runs MaxPoolGrad on plane p with AVX-512 in the buffers'
// own storage and reports whether it did: for 2x2 windows at stride 2, dx
// in dy's dtype and positions in F16. It writes every element of the
// plane once, so dx needs no clearing first.
func maxPoolGradSIMD(dx, dy, pos *Buffer, p int, s device.PoolShape) bool {
	if !simdConv || !is2x2(s) || dx.dt != dy.dt || pos.dt != dtype.F16 || s.OH == 0 || s.OW == 0 {
		return false
	}
	hw, ohw := s.H*s.W, s.OH*s.OW
	pp := &pos.u16[p*ohw : (p+1)*ohw][0]
	var bad bool
	if dx.dt == dtype.F32 {
		out := dx.f32[p*hw : (p+1)*hw]
		bad = maxPoolGrad2x2F32(&out[0], &dy.f32[p*ohw : (p+1)*ohw][0], pp, s.W, s.OH, s.OW)
		clearUncovered(out, s)
	} else {
		out := dx.u16[p*hw : (p+1)*hw]
		bad = maxPoolGrad2x2U16(&out[0], &dy.u16[p*ohw : (p+1)*ohw][0], pp, s.W, s.OH, s.OW)
		clearUncovered(out, s)
	}
	if bad {
		for _, v := range pos.u16[p*ohw : (p+1)*ohw] {
			if f := dtype.F16ToF32(v); f != 0 && f != 1 && f != 2 && f != 3 {
				badPos(f, s)
			}
		}
	}
	return true
}
