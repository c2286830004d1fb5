package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withSIMDNorm runs f with the AVX-512 batch-norm loops on or off.
func withSIMDNorm(on bool, f func()) {
	old := simdNorm
	simdNorm = on
	defer func() { simdNorm = old }()
	f()
}

// TestNormSIMD checks every AVX-512 batch-norm loop against its Go loop bit
// for bit, for lengths on both sides of the 16-element step, on values of
// many magnitudes (so that the order of the float64 sums shows) with
// infinities and NaNs among them.
func TestNormSIMD(t *testing.T) {
	if !simdNorm {
		t.Skip("no AVX-512 on this CPU: only the Go loops run")
	}
	same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b) }
	for _, n := range []int{1, 3, 8, 15, 16, 17, 31, 32, 40, 64, 100, 1000} {
		for _, special := range []bool{false, true} {
			t.Run(fmt.Sprintf("n%d/special=%v", n, special), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), 11))
				x, dy := optimValues(rng, n), optimValues(rng, n)
				if !special {
					for i := range x {
						x[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
						dy[i] = float32(rng.NormFloat64())
					}
				}
				mu, is := rng.NormFloat64(), math.Abs(rng.NormFloat64())+0.1
				c := &bnGradConsts{mu: mu, is: is, m: float64(n), sdy: rng.NormFloat64(), sdyx: rng.NormFloat64(), k: rng.Float64()}
				type res struct {
					s, q, sdy, sdyx float64
					ss, out         []float32
				}
				var r [2]res
				for i, on := range []bool{true, false} {
					withSIMDNorm(on, func() {
						r[i].s = sum64(x)
						r[i].q = sumSqDev64(x, mu)
						r[i].sdy, r[i].sdyx = bnGradSums(dy, x, mu, is)
						r[i].ss = make([]float32, n)
						scaleShift(r[i].ss, x, 0.75, -1.5)
						r[i].out = make([]float32, n)
						bnGradOut(r[i].out, dy, x, c)
					})
				}
				for _, p := range []struct {
					name string
					a, b float64
				}{{"sum64", r[0].s, r[1].s}, {"sumSqDev64", r[0].q, r[1].q}, {"bnGradSums sdy", r[0].sdy, r[1].sdy}, {"bnGradSums sdyx", r[0].sdyx, r[1].sdyx}} {
					if !same(p.a, p.b) {
						t.Errorf("%s: AVX-512 %v (%#x), Go %v (%#x)", p.name, p.a, math.Float64bits(p.a), p.b, math.Float64bits(p.b))
					}
				}
				for j := range n {
					if !same(float64(r[0].ss[j]), float64(r[1].ss[j])) {
						t.Errorf("scaleShift[%d]: AVX-512 %v, Go %v", j, r[0].ss[j], r[1].ss[j])
					}
					if !same(float64(r[0].out[j]), float64(r[1].out[j])) {
						t.Errorf("bnGradOut[%d]: AVX-512 %v, Go %v", j, r[0].out[j], r[1].out[j])
					}
				}
			})
		}
	}
}
