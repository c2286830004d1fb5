//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdConv selects the AVX-512 pooling and im2col loops; tests turn it off
// to check them against the Go loops.
var simdConv = cpu.X86.HasAVX512F && cpu.X86.HasBMI2

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
