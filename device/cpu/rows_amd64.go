//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdRows selects the row loops: AVX-512, else AVX2, else Go. Tests lower
// it to compare.
var simdRows = levelOf(cpu.X86.HasAVX2, cpu.X86.HasAVX512F)

//go:noescape
func addWidenAVX512(dst *float64, src *float32, n int)

//go:noescape
func addWidenAVX2(dst *float64, src *float32, n int)

// addWiden does dst[i] += float64(src[i]) over len(src) elements.
func addWiden(dst []float64, src []float32) {
	dst = dst[:len(src)]
	l := simdRows
	n := l.part(len(src), 8) // lanes of float64
	switch {
	case n == 0:
	case l == simdAVX512:
		addWidenAVX512(&dst[0], &src[0], n)
	default:
		addWidenAVX2(&dst[0], &src[0], n)
	}
	for j := n; j < len(src); j++ {
		dst[j] += float64(src[j])
	}
}
