package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestDropoutAssemblyMatchesGo checks the AVX-512 dropout against the Go
// loop bit for bit: the same elements kept (the hash and the threshold
// agree on every draw, p at and between the 2⁻²⁴ steps included), the same
// products, NaNs dropped or kept alike, at counter offsets that straddle
// 2³² and on lengths with tails, in every dtype.
func TestDropoutAssemblyMatchesGo(t *testing.T) {
	if !simdDropout {
		t.Skip("no AVX-512 DQ on this CPU: only the Go loop runs")
	}
	defer func(v bool) { simdDropout = v }(simdDropout)
	rng := rand.New(rand.NewPCG(6, 6))
	ps := []float32{0, 0.1, 0.25, 0.5, 0.9, 1 - 1.0/(1<<24), 1, 3.0 / (1 << 24), float32(math.Nextafter32(0.5, 1))}
	for _, dt := range dtype.All {
		for _, n := range []int{1, 15, 16, 33, 5000, 70001} {
			h := make([]float32, n)
			for i := range h {
				h[i] = float32(rng.NormFloat64())
			}
			h[n/2] = float32(math.NaN())
			for pi, p := range ps {
				key := device.RandKey{Seed: rng.Uint64(), Offset: uint64(pi) * (1<<32 - 7)}
				var out [2][]float32
				for pass, simd := range []bool{true, false} {
					simdDropout = simd
					d := New()
					src, dst := d.Alloc(dt, n, device.Temp), d.Alloc(dt, n, device.Temp)
					d.CopyFromHost(src, h)
					d.Dropout(dst, src, p, key)
					out[pass] = make([]float32, n)
					d.CopyToHost(out[pass], dst)
				}
				for i := range out[0] {
					if math.Float32bits(out[0][i]) != math.Float32bits(out[1][i]) {
						t.Fatalf("%v n=%d p=%v: element %d = %v with AVX-512, %v in Go", dt, n, p, i, out[0][i], out[1][i])
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
