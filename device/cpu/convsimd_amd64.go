//go:build !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// simdConvLevel selects the pooling and im2col loops: AVX-512 (with AVX512BW
// and BMI2), else AVX2 (with F16C, for the F16 pooling), else Go. Tests
// lower it to check each against the Go loops.
var simdConvLevel = levelOf(cpu.X86.HasAVX2 && cpu.X86.HasF16C, cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2)

// simdConv reports whether the CPU runs any of those loops: conv.go plans
// Col2Im's register rows only then. A plan made while a test has lowered
// simdConvLevel to the Go loops goes unused (col2imSIMD declines it).
var simdConv = simdConvLevel != simdGo

//go:noescape
func maxPool2x2F32(y *float32, pos *uint16, x *float32, w, oh, ow int)

//go:noescape
func maxPool2x2U16(y, pos, x *uint16, w, oh, ow int, bf16 bool)

//go:noescape
func maxPool2x2F32AVX2(y *float32, pos *uint16, x *float32, w, oh, ow int)

//go:noescape
func maxPool2x2U16AVX2(y, pos, x *uint16, w, oh, ow int, bf16 bool)

// maxPoolSIMD pools plane p of x into y and pos with SIMD in their own
// storage and reports whether it did: for 2x2 windows at stride 2, y in
// x's dtype and positions in F16 (pos may be nil). The AVX2 loops need
// rows of at least 8 windows (their last step overlaps the one before).
func maxPoolSIMD(y, pos, x *Buffer, p int, s device.PoolShape) bool {
	l := simdConvLevel
	if l == simdGo || !is2x2(s) || y.dt != x.dt || (pos != nil && pos.dt != dtype.F16) || s.OH == 0 || s.OW == 0 || (l == simdAVX2 && s.OW < 8) {
		return false
	}
	hw, ohw := s.H*s.W, s.OH*s.OW
	var pp *uint16
	if pos != nil {
		pp = &pos.u16[p*ohw : (p+1)*ohw][0]
	}
	switch {
	case x.dt == dtype.F32 && l == simdAVX512:
		maxPool2x2F32(&y.f32[p*ohw : (p+1)*ohw][0], pp, &x.f32[p*hw : (p+1)*hw][0], s.W, s.OH, s.OW)
	case x.dt == dtype.F32:
		maxPool2x2F32AVX2(&y.f32[p*ohw : (p+1)*ohw][0], pp, &x.f32[p*hw : (p+1)*hw][0], s.W, s.OH, s.OW)
	case l == simdAVX512:
		maxPool2x2U16(&y.u16[p*ohw : (p+1)*ohw][0], pp, &x.u16[p*hw : (p+1)*hw][0], s.W, s.OH, s.OW, x.dt == dtype.BF16)
	default:
		maxPool2x2U16AVX2(&y.u16[p*ohw : (p+1)*ohw][0], pp, &x.u16[p*hw : (p+1)*hw][0], s.W, s.OH, s.OW, x.dt == dtype.BF16)
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

//go:noescape
func copyRowsAVX2(dst, src unsafe.Pointer, n, rows, ds, ss int)

//go:noescape
func copyStride2x32AVX2(dst, src *float32, n, rows, ds, ss int)

//go:noescape
func copyStride2x16AVX2(dst, src *uint16, n, rows, ds, ss int)

//go:noescape
func maxPoolGrad2x2F32AVX2(dx, dy *float32, pos *uint16, w, oh, ow int) (bad bool)

//go:noescape
func maxPoolGrad2x2U16AVX2(dx, dy, pos *uint16, w, oh, ow int) (bad bool)

//go:noescape
func col2imRowsAVX2(dst, col *float32, ent *c2iEntry, end *int32, h, w int)

//go:noescape
func addRowsAt32AVX2(dst, src *float32, off, n, rows, ds, ss int)

// copyRowsF32SIMD and the others below run the row loops of conv.go with
// SIMD and report whether they did; the caller has checked the bounds
// (and n, rows > 0).
func copyRowsF32SIMD(dst, src []float32, n, rows, ds, ss int) bool {
	switch simdConvLevel {
	case simdAVX512:
		copyRows32(&dst[0], &src[0], n, rows, ds, ss)
	case simdAVX2:
		copyRowsAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), 4*n, rows, 4*ds, 4*ss)
	default:
		return false
	}
	return true
}

func copyRowsU16SIMD(dst, src []uint16, n, rows, ds, ss int) bool {
	switch simdConvLevel {
	case simdAVX512:
		copyRows16(&dst[0], &src[0], n, rows, ds, ss)
	case simdAVX2:
		copyRowsAVX2(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), 2*n, rows, 2*ds, 2*ss)
	default:
		return false
	}
	return true
}

func addRowsSIMD(dst, src []float32, off, n, rows, ds, ss int) bool {
	switch simdConvLevel {
	case simdAVX512:
		addRowsAt32(&dst[0], &src[0], off, n, rows, ds, ss)
	case simdAVX2:
		addRowsAt32AVX2(&dst[0], &src[0], off, n, rows, ds, ss)
	default:
		return false
	}
	return true
}

func copyStride2F32SIMD(dst, src []float32, n, rows, ds, ss int) bool {
	switch simdConvLevel {
	case simdAVX512:
		copyStride2x32(&dst[0], &src[0], n, rows, ds, ss)
	case simdAVX2:
		copyStride2x32AVX2(&dst[0], &src[0], n, rows, ds, ss)
	default:
		return false
	}
	return true
}

func copyStride2U16SIMD(dst, src []uint16, n, rows, ds, ss int) bool {
	switch simdConvLevel {
	case simdAVX512:
		copyStride2x16(&dst[0], &src[0], n, rows, ds, ss)
	case simdAVX2:
		copyStride2x16AVX2(&dst[0], &src[0], n, rows, ds, ss)
	default:
		return false
	}
	return true
}

// col2imSIMD runs col2imPlane's rows with SIMD and reports whether it did;
// rows must be at most 64 floats wide.
func col2imSIMD(dst, col []float32, p *c2iPlan) bool {
	l := simdConvLevel
	if l == simdGo || len(p.end) == 0 {
		return false
	}
	_ = dst[len(p.end)*p.w-1]
	if l == simdAVX512 {
		col2imRowsAVX512(&dst[0], &col[0], unsafe.SliceData(p.ent), &p.end[0], len(p.end), p.w, p.wmask)
	} else {
		col2imRowsAVX2(&dst[0], &col[0], unsafe.SliceData(p.ent), &p.end[0], len(p.end), p.w)
	}
	return true
}

// maxPoolGradSIMD runs MaxPoolGrad on plane p with SIMD in the buffers' own
// storage and reports whether it did: for 2x2 windows at stride 2, dx in
// dy's dtype and positions in F16 (and for AVX2 rows of at least 8
// windows). It writes every element of the plane once, so dx needs no
// clearing first.
func maxPoolGradSIMD(dx, dy, pos *Buffer, p int, s device.PoolShape) bool {
	l := simdConvLevel
	if l == simdGo || !is2x2(s) || dx.dt != dy.dt || pos.dt != dtype.F16 || s.OH == 0 || s.OW == 0 || (l == simdAVX2 && s.OW < 8) {
		return false
	}
	hw, ohw := s.H*s.W, s.OH*s.OW
	pp := &pos.u16[p*ohw : (p+1)*ohw][0]
	var bad bool
	if dx.dt == dtype.F32 {
		out := dx.f32[p*hw : (p+1)*hw]
		g := &dy.f32[p*ohw : (p+1)*ohw][0]
		if l == simdAVX512 {
			bad = maxPoolGrad2x2F32(&out[0], g, pp, s.W, s.OH, s.OW)
		} else {
			bad = maxPoolGrad2x2F32AVX2(&out[0], g, pp, s.W, s.OH, s.OW)
		}
		clearUncovered(out, s)
	} else {
		out := dx.u16[p*hw : (p+1)*hw]
		g := &dy.u16[p*ohw : (p+1)*ohw][0]
		if l == simdAVX512 {
			bad = maxPoolGrad2x2U16(&out[0], g, pp, s.W, s.OH, s.OW)
		} else {
			bad = maxPoolGrad2x2U16AVX2(&out[0], g, pp, s.W, s.OH, s.OW)
		}
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
