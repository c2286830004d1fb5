package cpu

import "github.com/mixprec/mixprec/dtype"

// GELU in float32. The float64 row of device's op table, x·Φ(x) through
// math.Erf, took 12 ns an element on one core; a transformer's MLP applies
// it to four times its width at every position, forward and backward, and
// with it GELU took more than half of a small GPT's training step. Here
// Φ(x) = erfc(-x/√2)/2 with erfc from Numerical Recipes' Chebyshev fit,
// t·exp(-z² + P(t)), t = 1/(1 + z/2), whose relative error is below
// 1.2e-7 for every z ≥ 0, so that the result keeps its relative accuracy
// where Φ is tiny (large negative x), which an absolute-error erf would
// not. In float32 arithmetic the results stay within 1e-6 relative of the
// float64 row (TestGELU32), far inside the conformance suite's F32
// tolerance.

const (
	invSqrt2   = 0.70710678118654752
	invSqrt2Pi = 0.39894228040143268
)

// erfcHalf returns erfc(a) for a ≥ 0 (or NaN), and exp(-a²).
func erfcHalf(a float32) (erfc, gauss float32) {
	t := 1 / (1 + 0.5*a)
	p := float32(0.17087277)
	p = float32(p*t) - 0.82215223
	p = float32(p*t) + 1.48851587
	p = float32(p*t) - 1.13520398
	p = float32(p*t) + 0.27886807
	p = float32(p*t) - 0.18628806
	p = float32(p*t) + 0.09678418
	p = float32(p*t) + 0.37409196
	p = float32(p*t) + 1.00002368
	p = float32(p*t) - 1.26551223
	sq := float32(a * a)
	return t * exp32(p-sq), exp32(-sq)
}

// phi returns Φ(x), the standard normal CDF, and the density φ(x).
func phi(x float32) (cdf, pdf float32) {
	a := x * invSqrt2
	if a < 0 {
		a = -a
	}
	e, g := erfcHalf(a)
	if x >= 0 {
		e = 2 - e
	}
	return 0.5 * e, g * invSqrt2Pi
}

// geluRow sets out = x·Φ(x).
func geluRow(out, x []float32) {
	x = x[:len(out)]
	if len(x) > 0 && simdTranscend == simdAVX512 {
		geluAVX512(&out[0], &x[0], len(x))
		return
	}
	for i, v := range x {
		c, _ := phi(v)
		out[i] = v * c
	}
}

// geluGradRow sets o = dy·(Φ(x) + x·φ(x)).
func geluGradRow(o, dy, x []float32) {
	dy, x = dy[:len(o)], x[:len(o)]
	if len(x) > 0 && simdTranscend == simdAVX512 {
		geluGradAVX512(&o[0], &dy[0], &x[0], len(x))
		return
	}
	for i, v := range x {
		c, p := phi(v)
		o[i] = dy[i] * (c + v*p)
	}
}

// geluBF16 runs GELU (dy nil) or its gradient on [lo, hi) of bfloat16
// buffers with the AVX-512 loops that widen as they load and round as they
// store, reporting false (doing nothing) when they do not apply: the bits
// of the float32 loop between a widening and a rounding pass, without the
// passes.
func geluBF16(db, xb, dyb *Buffer, lo, hi int) bool {
	if simdTranscend != simdAVX512 || hi <= lo || db.dt != dtype.BF16 || xb.dt != dtype.BF16 || (dyb != nil && dyb.dt != dtype.BF16) {
		return false
	}
	if dyb == nil {
		geluBF16AVX512(&db.u16[lo], &xb.u16[lo:hi][0], hi-lo)
	} else {
		geluGradBF16AVX512(&db.u16[lo], &dyb.u16[lo:hi][0], &xb.u16[lo:hi][0], hi-lo)
	}
	return true
}
