//go:build !purego

package gemm

import "golang.org/x/sys/cpu"

// UnscaleAVX512 multiplies the n float32 at s by inv (n a multiple of 16)
// and reports whether any product is Inf or NaN. The CPU backend's
// optimiser code calls it too, choosing the level itself.
//
//go:noescape
func UnscaleAVX512(s *float32, n int, inv float32) (nonFinite bool)

// UnscaleAVX2 is UnscaleAVX512 in eight lanes (n a multiple of 8).
//
//go:noescape
func UnscaleAVX2(s *float32, n int, inv float32) (nonFinite bool)

var unscaleLanes = func() int {
	switch {
	case cpu.X86.HasAVX512F:
		return 16
	case cpu.X86.HasAVX2:
		return 8
	}
	return 0
}()

// unscaleSIMD runs Unscale's loop over the first len(s) - len(s)%lanes
// elements and returns how many it did.
func unscaleSIMD(s []float32, inv float32) (done int, nonFinite bool) {
	if unscaleLanes == 0 {
		return 0, false
	}
	n := len(s) - len(s)%unscaleLanes
	if n == 0 {
		return 0, false
	}
	if unscaleLanes == 16 {
		return n, UnscaleAVX512(&s[0], n, inv)
	}
	return n, UnscaleAVX2(&s[0], n, inv)
}
