package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withNormLevel runs f with the batch-norm loops at level l.
func withNormLevel(l simdLevel, f func()) {
	old := simdNormLevel
	simdNormLevel = l
	defer func() { simdNormLevel = old }()
	f()
}

// TestNormSIMD checks every batch-norm loop at every SIMD level this CPU
// runs against its Go loop bit for bit, for lengths on both sides of the
// 8- and 16-element steps, on values of many magnitudes (so that the order
// of the float64 sums shows) with infinities, NaNs, zeros of both signs
// and subnormals among them, and in place for scaleShift. The AVX-512
// loops, checked so since before the AVX2 ones, may give a NaN another
// payload where both operands are NaNs.
func TestNormSIMD(t *testing.T) {
	levels := levelsUpTo(simdNormLevel)
	if len(levels) == 1 {
		t.Log("no AVX2 on this CPU: only the Go loops run")
	}
	for _, n := range []int{1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 24, 31, 32, 40, 64, 100, 1000, 1024} {
		for _, special := range []bool{false, true} {
			t.Run(fmt.Sprintf("n%d/special=%v", n, special), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), 11))
				x, dy := optimValues(rng, n), optimValues(rng, n)
				if special {
					// NaNs often enough that some meet in a sum.
					for i := range x {
						if rng.IntN(8) == 0 {
							x[i] = math.Float32frombits(0x7fc00000 | rng.Uint32()&0x803fffff)
						}
						if rng.IntN(8) == 0 {
							dy[i] = math.Float32frombits(0x7fc00000 | rng.Uint32()&0x803fffff)
						}
					}
				} else {
					for i := range x {
						x[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20)))
						dy[i] = float32(rng.NormFloat64())
					}
				}
				mu, is := rng.NormFloat64(), math.Abs(rng.NormFloat64())+0.1
				cs := []*bnGradConsts{{mu: mu, is: is, m: float64(n), sdy: rng.NormFloat64(), sdyx: rng.NormFloat64(), k: rng.Float64()}}
				if special {
					nan := math.Float64frombits(0x7ff8000000000123)
					cs = append(cs, &bnGradConsts{mu: nan, is: is, m: float64(n), sdy: nan, sdyx: math.Inf(1), k: rng.Float64()})
				}
				type res struct {
					s, q, sdy, sdyx [2]float64
					ss, ip          []float32
					out             [2][]float32
				}
				r := make([]res, len(levels))
				for i, l := range levels {
					withNormLevel(l, func() {
						for k, m := range []float64{mu, math.Inf(-1)} {
							r[i].q[k] = sumSqDev64(x, m)
						}
						r[i].s[0] = sum64(x)
						r[i].s[1] = sum64(dy)
						r[i].sdy[0], r[i].sdyx[0] = bnGradSums(dy, x, mu, is)
						r[i].sdy[1], r[i].sdyx[1] = bnGradSums(dy, x, math.NaN(), math.Inf(1))
						r[i].ss = make([]float32, n)
						scaleShift(r[i].ss, x, 0.75, -1.5)
						r[i].ip = append([]float32(nil), x...)
						scaleShift(r[i].ip, r[i].ip, float32(math.NaN()), -1.5)
						for k, c := range cs {
							r[i].out[k] = make([]float32, n)
							bnGradOut(r[i].out[k], dy, x, c)
						}
					})
				}
				for i, l := range levels[1:] {
					a, b := r[i+1], r[0]
					// A float64 sum of two NaNs keeps one operand's payload,
					// and which one the Go loop keeps depends on how the
					// compiler orders the addition (under -race it differs),
					// so NaN sums agree as NaN at every level.
					same := func(x, y float64) bool {
						return math.Float64bits(x) == math.Float64bits(y) || (x != x && y != y)
					}
					for k := range 2 {
						for _, p := range []struct {
							name string
							a, b float64
						}{{"sum64", a.s[k], b.s[k]}, {"sumSqDev64", a.q[k], b.q[k]}, {"bnGradSums sdy", a.sdy[k], b.sdy[k]}, {"bnGradSums sdyx", a.sdyx[k], b.sdyx[k]}} {
							if !same(p.a, p.b) {
								t.Errorf("%s %d: %v %v (%#x), Go %v (%#x)", p.name, k, l, p.a, math.Float64bits(p.a), p.b, math.Float64bits(p.b))
							}
						}
					}
					for j := range n {
						if math.Float32bits(a.ss[j]) != math.Float32bits(b.ss[j]) && !(l == simdAVX512 && a.ss[j] != a.ss[j] && b.ss[j] != b.ss[j]) {
							t.Errorf("scaleShift[%d]: %v %v, Go %v", j, l, a.ss[j], b.ss[j])
						}
						if math.Float32bits(a.ip[j]) != math.Float32bits(b.ip[j]) && !(l == simdAVX512 && a.ip[j] != a.ip[j] && b.ip[j] != b.ip[j]) {
							t.Errorf("scaleShift in place [%d]: %v %#x, Go %#x", j, l, math.Float32bits(a.ip[j]), math.Float32bits(b.ip[j]))
						}
						for k := range cs {
							if math.Float32bits(a.out[k][j]) != math.Float32bits(b.out[k][j]) && !(l == simdAVX512 && a.out[k][j] != a.out[k][j] && b.out[k][j] != b.out[k][j]) {
								t.Errorf("bnGradOut %d [%d]: %v %#x, Go %#x", k, j, l, math.Float32bits(a.out[k][j]), math.Float32bits(b.out[k][j]))
							}
						}
					}
				}
			})
		}
	}
}

// BenchmarkNormSIMD times the batch-norm loops at each level on a plane of
// ResNet-20's first stage (32x32).
func BenchmarkNormSIMD(b *testing.B) {
	const n = 32 * 32
	rng := rand.New(rand.NewPCG(1, 2))
	x, dy, out := optimValues(rng, n), optimValues(rng, n), make([]float32, n)
	c := &bnGradConsts{mu: 0.1, is: 2, m: n, sdy: 0.3, sdyx: 0.4, k: 0.5}
	for _, l := range levelsUpTo(simdNormLevel) {
		withNormLevel(l, func() {
			b.Run("sum64/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					sum64(x)
				}
			})
			b.Run("sumSqDev64/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					sumSqDev64(x, 0.1)
				}
			})
			b.Run("scaleShift/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					scaleShift(out, x, 0.5, 0.25)
				}
			})
			b.Run("bnGradSums/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					bnGradSums(dy, x, 0.1, 2)
				}
			})
			b.Run("bnGradOut/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					bnGradOut(out, dy, x, c)
				}
			})
		})
	}
}
