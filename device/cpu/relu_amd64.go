//go:build !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// simdReLU selects the AVX-512 ReLU loops (the 16-bit ones need AVX512BW);
// tests turn it off to check them against the Go loops.
var simdReLU = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

//go:noescape
func reluF32AVX512(dst, src *uint32, n int)

//go:noescape
func reluGradF32AVX512(dst, gr, yv *uint32, n int)

//go:noescape
func relu16AVX512(dst, src *uint16, n int, inf, quiet uint32)

//go:noescape
func reluGrad16AVX512(dst, gr, yv *uint16, n int, inf, quiet uint32)

// The wrappers run the first n - n%lanes elements and return how many they
// did; out and the inputs have equal lengths.

func reluF32SIMD(out, x []float32) int {
	n := len(out) &^ 15
	if !simdReLU || n == 0 {
		return 0
	}
	_ = x[n-1]
	reluF32AVX512((*uint32)(unsafe.Pointer(&out[0])), (*uint32)(unsafe.Pointer(&x[0])), n)
	return n
}

func reluGradF32SIMD(out, g, y []float32) int {
	n := len(out) &^ 15
	if !simdReLU || n == 0 {
		return 0
	}
	_, _ = g[n-1], y[n-1]
	reluGradF32AVX512((*uint32)(unsafe.Pointer(&out[0])), (*uint32)(unsafe.Pointer(&g[0])), (*uint32)(unsafe.Pointer(&y[0])), n)
	return n
}

func twice(v uint16) uint32 { return uint32(v)<<16 | uint32(v) }

func relu16SIMD(out, x []uint16, h half16) int {
	n := len(out) &^ 31
	if !simdReLU || n == 0 {
		return 0
	}
	_ = x[n-1]
	relu16AVX512(&out[0], &x[0], n, twice(h.inf), twice(h.quiet))
	return n
}

func reluGrad16SIMD(out, g, y []uint16, h half16) int {
	n := len(out) &^ 31
	if !simdReLU || n == 0 {
		return 0
	}
	_, _ = g[n-1], y[n-1]
	reluGrad16AVX512(&out[0], &g[0], &y[0], n, twice(h.inf), twice(h.quiet))
	return n
}
