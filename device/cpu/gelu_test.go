package cpu

import (
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestGELU32 bounds the float32 GELU and its gradient, at every SIMD level
// the CPU has, against float64 over a dense grid of inputs (including
// where Φ(x) is tiny), and checks NaN and the infinities against device's
// op table. The reference is written with math.Erfc: the table's row,
// 1 + erf(x/√2), loses every digit to cancellation below x = -8 (where the
// float32 GELU does not).
func TestGELU32(t *testing.T) {
	var xs []float32
	for v := -14.0; v <= 14; v += 1.0 / 512 {
		xs = append(xs, float32(v))
	}
	ones := make([]float32, len(xs))
	for i := range ones {
		ones[i] = 1
	}
	for _, level := range []simdLevel{simdGo, simdTranscend} {
		t.Run(level.String(), func(t *testing.T) {
			defer func(l simdLevel) { simdTranscend = l }(simdTranscend)
			simdTranscend = level
			got, grad := make([]float32, len(xs)), make([]float32, len(xs))
			geluRow(got, xs)
			geluGradRow(grad, ones, xs)
			var worst, worstGrad, at, atGrad float64
			for i, x := range xs {
				xf := float64(x)
				cdf, pdf := 0.5*math.Erfc(-xf/math.Sqrt2), math.Exp(-xf*xf/2)/math.Sqrt(2*math.Pi)
				// Errors in units of the bound: relative to the result (to
				// its terms' size for the gradient, which crosses zero near
				// -0.75), or absolute below 1e-30, as results near float32's
				// smallest normal may be flushed to zero (as by a GPU's fast
				// exp). The bound: NR's erfc is within 1.2e-7, float32
				// arithmetic adds a few ulps, and exp(-x²/2) carries x²'s
				// relative rounding times x².
				bound := 2e-7 * (3 + xf*xf)
				if e := math.Abs(float64(got[i])-xf*cdf) / math.Max(math.Abs(xf*cdf), 1e-30) / bound; e > worst {
					worst, at = e, xf
				}
				if e := math.Abs(float64(grad[i])-(cdf+xf*pdf)) / math.Max(cdf+math.Abs(xf*pdf), 1e-30) / bound; e > worstGrad {
					worstGrad, atGrad = e, xf
				}
			}
			if worst > 1 || worstGrad > 1 {
				t.Errorf("over %d inputs: GELU error %.3g of its bound at %v, gradient %.3g at %v", len(xs), worst, at, worstGrad, atGrad)
			}
			def := device.GELU.Def()
			special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1))}
			out, g := make([]float32, len(special)), make([]float32, len(special))
			geluRow(out, special)
			geluGradRow(g, ones[:len(special)], special)
			for i, x := range special {
				want, wantGrad := def.Eval(x, 0), def.Grad(1, x, 0)
				same := func(a, b float32) bool { return a == b || (a != a && b != b) }
				if !same(out[i], want) || !same(g[i], wantGrad) || math.Signbit(float64(out[i])) != math.Signbit(float64(want)) {
					t.Errorf("GELU(%v) = %v, gradient %v; want %v and %v", x, out[i], g[i], want, wantGrad)
				}
			}
		})
	}
}

// TestExpShift compares the vector exp loop with exp32 and math.Exp.
func TestExpShift(t *testing.T) {
	var xs []float32
	for v := -110.0; v <= 95; v += 1.0 / 64 {
		xs = append(xs, float32(v))
	}
	xs = append(xs, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)))
	for _, level := range []simdLevel{simdGo, simdTranscend} {
		t.Run(level.String(), func(t *testing.T) {
			defer func(l simdLevel) { simdTranscend = l }(simdTranscend)
			simdTranscend = level
			for _, m := range []float32{0, 3.5} {
				got := make([]float32, len(xs))
				sum := expShift(got, xs, m)
				var want float64
				for i, x := range xs {
					w := math.Exp(float64(x - m))
					want += float64(got[i])
					if w > math.MaxFloat32 {
						w = math.Inf(1)
					}
					switch {
					case w != w || math.IsInf(w, 0):
						if !(got[i] != got[i] && w != w) && float64(got[i]) != w {
							t.Errorf("exp(%v - %v) = %v, want %v", x, m, got[i], w)
						}
					case w < 0x1p-126:
						if float64(got[i]) > 0x1p-126 {
							t.Errorf("exp(%v - %v) = %v, want %v or a flush to 0", x, m, got[i], w)
						}
					case math.Abs(float64(got[i])-w) > 2.5e-7*w:
						t.Errorf("exp(%v - %v) = %v, want %v", x, m, got[i], w)
					}
				}
				if !(sum != sum && want != want) && math.Abs(sum-want) > 1e-6*math.Abs(want) {
					t.Errorf("sum %v, want %v", sum, want)
				}
			}
		})
	}
}

// TestGELUBF16 holds the bfloat16 GELU loops to the float32 ones between a
// widening and a rounding, bit for bit.
func TestGELUBF16(t *testing.T) {
	if simdTranscend != simdAVX512 {
		t.Skip("no AVX-512 loops on this CPU")
	}
	var x16, dy16 []uint16
	for v := -16.0; v <= 16; v += 1.0 / 256 {
		x16 = append(x16, dtype.F32ToBF16(float32(v)))
		dy16 = append(dy16, dtype.F32ToBF16(float32(math.Sin(v*7))))
	}
	x16 = append(x16, 0x7fc0, 0xffc0, 0x7f80, 0xff80, 0, 0x8000, 0x0001) // NaNs, infinities, zeros, a subnormal
	dy16 = append(dy16, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80)
	n := len(x16)
	x, dy := make([]float32, n), make([]float32, n)
	dtype.Decode(dtype.BF16, x, x16)
	dtype.Decode(dtype.BF16, dy, dy16)
	y, g := make([]float32, n), make([]float32, n)
	geluRow(y, x)
	geluGradRow(g, dy, x)
	got, gotGrad := make([]uint16, n), make([]uint16, n)
	geluBF16AVX512(&got[0], &x16[0], n)
	geluGradBF16AVX512(&gotGrad[0], &dy16[0], &x16[0], n)
	for i := range n {
		if want := dtype.F32ToBF16(y[i]); got[i] != want {
			t.Errorf("GELU(%v) = %#04x, want %#04x", x[i], got[i], want)
		}
		if want := dtype.F32ToBF16(g[i]); gotGrad[i] != want {
			t.Errorf("GELU'(%v)·%v = %#04x, want %#04x", x[i], dy[i], gotGrad[i], want)
		}
	}
}
