//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdConv selects the AVX-512 pooling and im2col loops; tests turn it off
// to check them against the Go loops.
var simdConv = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasBMI2

//go:noescape
func maxPool2x2AVX512(y, pos, x *float32, w, oh, ow int)

// maxPoolSIMD runs maxPool2x2 with AVX-512 and reports whether it did. The
// caller has checked the slices' lengths; pos may be nil.
func maxPoolSIMD(y, pos, x []float32, w, oh, ow int) bool {
	if !simdConv {
		return false
	}
	var p *float32
	if pos != nil {
		p = &pos[0]
	}
	maxPool2x2AVX512(&y[0], p, &x[0], w, oh, ow)
	return true
}

//go:noescape
func copyRows32(dst, src *float32, n, rows, ds, ss int)

//go:noescape
func copyRows16(dst, src *uint16, n, rows, ds, ss int)

//go:noescape
func addRows32(dst, src *float32, n, rows, ds, ss int)

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

func addRowsSIMD(dst, src []float32, n, rows, ds, ss int) bool {
	if !simdConv {
		return false
	}
	addRows32(&dst[0], &src[0], n, rows, ds, ss)
	return true
}
