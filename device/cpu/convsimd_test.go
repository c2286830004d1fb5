package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// poolValues are pooling inputs with ties (small integers, zeros of both
// signs) and NaNs of both signs, which decide which element a window picks.
func poolValues(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		switch rng.IntN(12) {
		case 0:
			out[i] = math.Float32frombits(0x7fc00000)
		case 1:
			out[i] = math.Float32frombits(0xffc00000)
		case 2:
			out[i] = float32(math.Copysign(0, -1))
		case 3:
			out[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
		default:
			out[i] = float32(rng.IntN(5) - 2)
		}
	}
	return out
}

// withSIMDConv runs f with the AVX-512 conv loops on or off.
func withSIMDConv(on bool, f func()) {
	old := simdConv
	simdConv = on
	defer func() { simdConv = old }()
	f()
}

// TestMaxPool2x2SIMD checks the AVX-512 2x2 pooling against the Go loop bit
// for bit (values and positions), for row lengths around the 16-window step
// and odd input widths, with and without positions.
func TestMaxPool2x2SIMD(t *testing.T) {
	if !simdConv {
		t.Skip("no AVX-512 on this CPU: only the Go loop runs")
	}
	for _, ow := range []int{1, 2, 7, 12, 15, 16, 17, 31, 32, 33, 50} {
		for _, extra := range []int{0, 1} { // input width 2*ow or 2*ow+1
			for _, withPos := range []bool{true, false} {
				t.Run(fmt.Sprintf("ow%d/w%d/pos=%v", ow, 2*ow+extra, withPos), func(t *testing.T) {
					w, oh := 2*ow+extra, 3
					rng := rand.New(rand.NewPCG(uint64(ow), uint64(extra)))
					x := poolValues(rng, 2*oh*w+extra) // an odd last row, never read
					var ys, ps [2][]float32
					for i, on := range []bool{true, false} {
						ys[i] = make([]float32, oh*ow)
						if withPos {
							ps[i] = make([]float32, oh*ow)
						}
						withSIMDConv(on, func() { maxPool2x2(ys[i], ps[i], x, w, oh, ow) })
					}
					for i := range ys[0] {
						if math.Float32bits(ys[0][i]) != math.Float32bits(ys[1][i]) {
							t.Errorf("y[%d]: AVX-512 %v (%#08x), Go %v (%#08x)", i, ys[0][i], math.Float32bits(ys[0][i]), ys[1][i], math.Float32bits(ys[1][i]))
						}
						if withPos && ps[0][i] != ps[1][i] {
							t.Errorf("pos[%d]: AVX-512 %v, Go %v", i, ps[0][i], ps[1][i])
						}
					}
				})
			}
		}
	}
}
