//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdDropout selects the dropout loop: AVX-512 (its 64-bit lane
// multiplies need AVX512DQ), else AVX2 (which builds them from 32-bit
// ones), else Go. Tests lower it to compare each with the Go loop.
var simdDropout = levelOf(cpu.X86.HasAVX2, cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ)

//go:noescape
func dropoutAVX512(dst, src *float32, n int, seed, start, thresh uint64, scale float32)

//go:noescape
func dropoutAVX2(dst, src *float32, n int, seed, start, thresh uint64, scale float32)

// dropoutSIMD runs the first n - n%lanes elements of dropoutRow and returns
// how many it did.
func dropoutSIMD(out, x []float32, seed, start, thresh uint64, scale float32) int {
	l := simdDropout
	n := l.part(len(out), 4)
	if n == 0 {
		return 0
	}
	_ = x[n-1]
	if l == simdAVX512 {
		dropoutAVX512(&out[0], &x[0], n, seed, start, thresh, scale)
	} else {
		dropoutAVX2(&out[0], &x[0], n, seed, start, thresh, scale)
	}
	return n
}
