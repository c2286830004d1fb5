//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdOptim selects the AVX-512 optimiser loops; tests turn it off to check
// them against the Go loops.
var simdOptim = cpu.X86.HasAVX512F

//go:noescape
func sgdMomentumAVX512(p, gr, m *float32, n int, mom, damp, lr float32)

//go:noescape
func sgdPlainAVX512(p, gr *float32, n int, lr float32)

//go:noescape
func adamAVX512(p, gr, m, v *float32, n int, k *adamConsts)

//go:noescape
func unscaleAVX512(s *float32, n int, inv float32) (nonFinite bool)

// sgdMomentumSIMD runs the first n - n%16 elements of sgdMomentum's loop
// and returns how many it did.
func sgdMomentumSIMD(ps, gs, ms []float32, mom, damp, lr float32) int {
	n := len(ps) &^ 15
	if !simdOptim || n == 0 {
		return 0
	}
	_, _ = gs[n-1], ms[n-1]
	sgdMomentumAVX512(&ps[0], &gs[0], &ms[0], n, mom, damp, lr)
	return n
}

func sgdPlainSIMD(ps, gs []float32, lr float32) int {
	n := len(ps) &^ 15
	if !simdOptim || n == 0 {
		return 0
	}
	_ = gs[n-1]
	sgdPlainAVX512(&ps[0], &gs[0], n, lr)
	return n
}

func adamSIMD(ps, gs, ms, vs []float32, k *adamConsts) int {
	n := len(ps) &^ 15
	if !simdOptim || n == 0 {
		return 0
	}
	_, _, _ = gs[n-1], ms[n-1], vs[n-1]
	adamAVX512(&ps[0], &gs[0], &ms[0], &vs[0], n, k)
	return n
}

func unscaleSIMD(s []float32, inv float32) (done int, nonFinite bool) {
	n := len(s) &^ 15
	if !simdOptim || n == 0 {
		return 0, false
	}
	return n, unscaleAVX512(&s[0], n, inv)
}
