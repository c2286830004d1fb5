//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdRows selects the AVX-512 row loops; tests turn it off to compare.
var simdRows = cpu.X86.HasAVX512F

//go:noescape
func addWidenAVX512(dst *float64, src *float32, n int)

// addWiden does dst[i] += float64(src[i]) over len(src) elements.
func addWiden(dst []float64, src []float32) {
	dst = dst[:len(src)]
	n := 0
	if simdRows {
		if n = len(src) &^ 7; n > 0 {
			addWidenAVX512(&dst[0], &src[0], n)
		}
	}
	for j := n; j < len(src); j++ {
		dst[j] += float64(src[j])
	}
}
