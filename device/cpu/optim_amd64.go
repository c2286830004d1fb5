//go:build !purego

package cpu

import (
	"golang.org/x/sys/cpu"

	"github.com/mixprec/mixprec/device/cpu/internal/gemm"
)

// simdOptim selects the optimiser loops: AVX-512, else AVX2, else Go. Tests
// lower it to check each against the Go loops.
var simdOptim = levelOf(cpu.X86.HasAVX2, cpu.X86.HasAVX512F)

//go:noescape
func sgdMomentumAVX512(p, gr, m *float32, n int, mom, damp, lr float32)

//go:noescape
func sgdPlainAVX512(p, gr *float32, n int, lr float32)

//go:noescape
func adamAVX512(p, gr, m, v *float32, n int, k *adamConsts)

//go:noescape
func sgdMomentumAVX2(p, gr, m *float32, n int, mom, damp, lr float32)

//go:noescape
func sgdPlainAVX2(p, gr *float32, n int, lr float32)

//go:noescape
func adamAVX2(p, gr, m, v *float32, n int, k *adamConsts)

// sgdMomentumSIMD runs the first n - n%lanes elements of sgdMomentum's
// loop and returns how many it did.
func sgdMomentumSIMD(ps, gs, ms []float32, mom, damp, lr float32) int {
	l := simdOptim
	n := l.part(len(ps), 4)
	if n == 0 {
		return 0
	}
	_, _ = gs[n-1], ms[n-1]
	if l == simdAVX512 {
		sgdMomentumAVX512(&ps[0], &gs[0], &ms[0], n, mom, damp, lr)
	} else {
		sgdMomentumAVX2(&ps[0], &gs[0], &ms[0], n, mom, damp, lr)
	}
	return n
}

func sgdPlainSIMD(ps, gs []float32, lr float32) int {
	l := simdOptim
	n := l.part(len(ps), 4)
	if n == 0 {
		return 0
	}
	_ = gs[n-1]
	if l == simdAVX512 {
		sgdPlainAVX512(&ps[0], &gs[0], n, lr)
	} else {
		sgdPlainAVX2(&ps[0], &gs[0], n, lr)
	}
	return n
}

func adamSIMD(ps, gs, ms, vs []float32, k *adamConsts) int {
	l := simdOptim
	n := l.part(len(ps), 4)
	if n == 0 {
		return 0
	}
	_, _, _ = gs[n-1], ms[n-1], vs[n-1]
	if l == simdAVX512 {
		adamAVX512(&ps[0], &gs[0], &ms[0], &vs[0], n, k)
	} else {
		adamAVX2(&ps[0], &gs[0], &ms[0], &vs[0], n, k)
	}
	return n
}

func unscaleSIMD(s []float32, inv float32) (done int, nonFinite bool) {
	l := simdOptim
	n := l.part(len(s), 4)
	if n == 0 {
		return 0, false
	}
	// The loops live with the GEMM, whose weight-gradient products unscale
	// as they store (gemm.Out16.Unscale).
	if l == simdAVX512 {
		return n, gemm.UnscaleAVX512(&s[0], n, inv)
	}
	return n, gemm.UnscaleAVX2(&s[0], n, inv)
}
