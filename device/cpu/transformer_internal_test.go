package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerNormLevels holds the AVX-512 LayerNorm row loops to the Go
// ones, bit for bit: the same operations in the same order, the row sums
// in sixteen lanes added alike; x̂ is written when asked for, and is the
// value the gradient's loops read.
func TestLayerNormLevels(t *testing.T) {
	if simdTranscend == simdGo {
		t.Skip("no AVX-512 loops on this CPU")
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 7, 16, 33, 128, 130} {
		x, dy, w, b := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], dy[i], w[i], b[i] = rng.Float32()*4-1, rng.Float32()*2-1, rng.Float32()+0.5, rng.Float32()-0.5
		}
		m, is := float32(0.7), float32(1.3)
		type out struct{ y, h, yNoBias, yNoHat, dx, pw, pb, dxNoBias, pwNoBias []float32 }
		run := func(level simdLevel) out {
			defer func(l simdLevel) { simdTranscend = l }(simdTranscend)
			simdTranscend = level
			mk := func() []float32 { return make([]float32, n) }
			o := out{mk(), mk(), mk(), mk(), mk(), mk(), mk(), mk(), mk()}
			layerNormRow(o.y, o.h, x, w, b, m, is)
			layerNormRow(o.yNoBias, nil, x, w, nil, m, is)
			layerNormRow(o.yNoHat, nil, x, w, b, m, is)
			for i := range o.pw { // partial sums from an earlier row
				o.pw[i], o.pb[i], o.pwNoBias[i] = float32(i), -float32(i), 0.5
			}
			layerNormGradRow(o.dx, o.pw, o.pb, dy, o.h, w, is)
			layerNormGradRow(o.dxNoBias, o.pwNoBias, nil, dy, o.h, w, is)
			return o
		}
		g, a := run(simdGo), run(simdAVX512)
		for i := range x {
			if want := float32(float32(x[i]-m) * is); math.Float32bits(g.h[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d: go x̂[%d] = %v, want (x - m)·is = %v", n, i, g.h[i], want)
			}
		}
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"y", a.y, g.y}, {"x̂", a.h, g.h}, {"y without bias", a.yNoBias, g.yNoBias}, {"y without x̂", a.yNoHat, g.y},
			{"dx", a.dx, g.dx}, {"pw", a.pw, g.pw}, {"pb", a.pb, g.pb},
			{"dx without bias", a.dxNoBias, g.dxNoBias}, {"pw without bias", a.pwNoBias, g.pwNoBias}} {
			for i := range c.want {
				if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
					t.Errorf("n=%d: %s[%d]: avx512 %v, go %v", n, c.what, i, c.got[i], c.want[i])
				}
			}
		}
	}
}
