//go:build !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// simdReLU selects the ReLU loops: AVX-512 (the 16-bit ones need AVX512BW),
// else AVX2, else Go. Tests lower it to check each against the Go loops.
var simdReLU = levelOf(cpu.X86.HasAVX2, cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW)

//go:noescape
func reluF32AVX512(dst, src *uint32, n int)

//go:noescape
func reluGradF32AVX512(dst, gr, yv *uint32, n int)

//go:noescape
func relu16AVX512(dst, src *uint16, n int, inf, quiet uint32)

//go:noescape
func reluGrad16AVX512(dst, gr, yv *uint16, n int, inf, quiet uint32)

//go:noescape
func reluF32AVX2(dst, src *uint32, n int)

//go:noescape
func reluGradF32AVX2(dst, gr, yv *uint32, n int)

//go:noescape
func relu16AVX2(dst, src *uint16, n int, inf, quiet uint32)

//go:noescape
func reluGrad16AVX2(dst, gr, yv *uint16, n int, inf, quiet uint32)

// The wrappers run the first n - n%lanes elements and return how many they
// did; out and the inputs have equal lengths.

func reluF32SIMD(out, x []float32) int {
	l := simdReLU
	n := l.part(len(out), 4)
	if n == 0 {
		return 0
	}
	_ = x[n-1]
	dst, src := (*uint32)(unsafe.Pointer(&out[0])), (*uint32)(unsafe.Pointer(&x[0]))
	if l == simdAVX512 {
		reluF32AVX512(dst, src, n)
	} else {
		reluF32AVX2(dst, src, n)
	}
	return n
}

func reluGradF32SIMD(out, g, y []float32) int {
	l := simdReLU
	n := l.part(len(out), 4)
	if n == 0 {
		return 0
	}
	_, _ = g[n-1], y[n-1]
	dst, gr, yv := (*uint32)(unsafe.Pointer(&out[0])), (*uint32)(unsafe.Pointer(&g[0])), (*uint32)(unsafe.Pointer(&y[0]))
	if l == simdAVX512 {
		reluGradF32AVX512(dst, gr, yv, n)
	} else {
		reluGradF32AVX2(dst, gr, yv, n)
	}
	return n
}

func twice(v uint16) uint32 { return uint32(v)<<16 | uint32(v) }

func relu16SIMD(out, x []uint16, h half16) int {
	l := simdReLU
	n := l.part(len(out), 2)
	if n == 0 {
		return 0
	}
	_ = x[n-1]
	if l == simdAVX512 {
		relu16AVX512(&out[0], &x[0], n, twice(h.inf), twice(h.quiet))
	} else {
		relu16AVX2(&out[0], &x[0], n, twice(h.inf), twice(h.quiet))
	}
	return n
}

func reluGrad16SIMD(out, g, y []uint16, h half16) int {
	l := simdReLU
	n := l.part(len(out), 2)
	if n == 0 {
		return 0
	}
	_, _ = g[n-1], y[n-1]
	if l == simdAVX512 {
		reluGrad16AVX512(&out[0], &g[0], &y[0], n, twice(h.inf), twice(h.quiet))
	} else {
		reluGrad16AVX2(&out[0], &g[0], &y[0], n, twice(h.inf), twice(h.quiet))
	}
	return n
}
