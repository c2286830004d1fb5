package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestDropoutAssemblyMatchesGo checks the dropout loop at every SIMD level
// this CPU runs against the Go loop bit for bit: the same elements kept
// (the hash and the threshold agree on every draw, p at and between the
// 2⁻²⁴ steps included), the same products, NaNs, infinities, zeros and
// subnormals dropped or kept alike, at counter offsets that straddle 2³²
// and 2⁶⁴ and on lengths with tails, in every dtype.
func TestDropoutAssemblyMatchesGo(t *testing.T) {
	levels := levelsUpTo(simdDropout)
	if len(levels) == 1 {
		t.Log("no AVX2 on this CPU: only the Go loop runs")
	}
	defer func(l simdLevel) { simdDropout = l }(simdDropout)
	rng := rand.New(rand.NewPCG(6, 6))
	ps := []float32{0, 0.1, 0.25, 0.5, 0.9, 1 - 1.0/(1<<24), 1, 3.0 / (1 << 24), float32(math.Nextafter32(0.5, 1))}
	for _, dt := range dtype.All {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 33, 5000, 70001} {
			h := specialBits32(rng, n)
			for i := range h {
				if rng.IntN(2) == 0 {
					h[i] = float32(rng.NormFloat64())
				}
			}
			for pi, p := range ps {
				key := device.RandKey{Seed: rng.Uint64(), Offset: uint64(pi) * (1<<32 - 7)}
				if pi%3 == 2 {
					key.Offset = -uint64(n / 2) // the counters wrap
				}
				out := make([][]float32, len(levels))
				for li, l := range levels {
					simdDropout = l
					d := New()
					src, dst := d.Alloc(dt, n, device.Temp), d.Alloc(dt, n, device.Temp)
					d.CopyFromHost(src, h)
					d.Dropout(dst, src, p, key)
					out[li] = make([]float32, n)
					d.CopyToHost(out[li], dst)
				}
				for li, l := range levels[1:] {
					for i, want := range out[0] {
						if got := out[li+1][i]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%v n=%d p=%v: element %d = %v (%#08x) with %v, %v (%#08x) in Go", dt, n, p, i, got, math.Float32bits(got), l, want, math.Float32bits(want))
						}
					}
				}
			}
		}
	}
}

// TestDropThreshold checks the integer threshold against Uniform's float
// comparison on the draws either side of it.
func TestDropThreshold(t *testing.T) {
	for _, p := range []float32{0, 1e-9, 0.1, 0.5, 0.7, 1 - 1.0/(1<<24), 1} {
		k := dropThreshold(p)
		u := func(k uint64) float32 { return float32(k) * (1.0 / (1 << 24)) }
		if k < 1<<24 && !(u(k) >= p) {
			t.Errorf("p=%v: threshold %d draws %v < p", p, k, u(k))
		}
		if k > 0 && u(k-1) >= p {
			t.Errorf("p=%v: draw %d (%v) would be kept too", p, k-1, u(k-1))
		}
	}
}

// BenchmarkDropoutLevels times Dropout's loop at each level on one
// goroutine's share (16384 float32) of a CNN activation, in cache.
func BenchmarkDropoutLevels(b *testing.B) {
	const n = 16384
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	for _, l := range levelsUpTo(simdDropout) {
		b.Run(l.String(), func(b *testing.B) {
			defer func(old simdLevel) { simdDropout = old }(simdDropout)
			simdDropout = l
			xb, yb := &Buffer{dt: dtype.F32, n: n, f32: x}, &Buffer{dt: dtype.F32, n: n, f32: y}
			b.SetBytes(8 * n)
			for b.Loop() {
				dropoutPiece(yb, xb, 0.25, 4.0/3, device.RandKey{Seed: 1}, 0, n)
			}
		})
	}
}
