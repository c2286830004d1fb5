package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerNormLevels holds the AVX-512 LayerNorm row loops to the Go
// ones, bit for bit: the same operations in the same order, the row sums
// in sixteen lanes added alike.
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
		type out struct{ y, yNoBias, dx, pw, pb, dxNoBias, pwNoBias []float32 }
		run := func(level simdLevel) out {
			defer func(l simdLevel) { simdTranscend = l }(simdTranscend)
			simdTranscend = level
			o := out{make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)}
			layerNormRow(o.y, x, w, b, m, is)
			layerNormRow(o.yNoBias, x, w, nil, m, is)
			for i := range o.pw { // partial sums from an earlier row
				o.pw[i], o.pb[i], o.pwNoBias[i] = float32(i), -float32(i), 0.5
			}
			layerNormGradRow(o.dx, o.pw, o.pb, dy, x, w, m, is)
			layerNormGradRow(o.dxNoBias, o.pwNoBias, nil, dy, x, w, m, is)
			return o
		}
		g, a := run(simdGo), run(simdAVX512)
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"y", a.y, g.y}, {"y without bias", a.yNoBias, g.yNoBias}, {"dx", a.dx, g.dx}, {"pw", a.pw, g.pw}, {"pb", a.pb, g.pb},
			{"dx without bias", a.dxNoBias, g.dxNoBias}, {"pw without bias", a.pwNoBias, g.pwNoBias}} {
			for i := range c.want {
				if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
					t.Errorf("n=%d: %s[%d]: avx512 %v, go %v", n, c.what, i, c.got[i], c.want[i])
				}
			}
		}
	}
}
