//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdDropout selects the AVX-512 dropout loop (64-bit lane multiplies need
// AVX512DQ); tests turn it off to compare it with the Go loop.
var simdDropout = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

//go:noescape
func dropoutAVX512(dst, src *float32, n int, seed, start, thresh uint64, scale float32)

// dropoutSIMD runs the first n - n%16 elements of dropoutRow and returns how
// many it did.
func dropoutSIMD(out, x []float32, seed, start, thresh uint64, scale float32) int {
	n := len(out) &^ 15
	if !simdDropout || n == 0 {
		return 0
	}
	_ = x[n-1]
	dropoutAVX512(&out[0], &x[0], n, seed, start, thresh, scale)
	return n
}
