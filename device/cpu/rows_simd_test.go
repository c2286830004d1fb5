package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestAddWidenMatchesGo checks the float64 accumulation at every SIMD
// level this CPU runs against the Go loop, bit for bit, over lengths with
// and without tails and values over many binades (so that the float64 sums
// round), with both zeros, subnormals, infinities and NaNs mixed in.
func TestAddWidenMatchesGo(t *testing.T) {
	levels := levelsUpTo(simdRows)
	if len(levels) == 1 {
		t.Skip("no AVX2 on this CPU: only the Go loop runs")
	}
	defer func(l simdLevel) { simdRows = l }(simdRows)
	rng := rand.New(rand.NewPCG(3, 3))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-41, -1e-45, float32(math.Inf(1)), float32(math.NaN()), math.MaxFloat32}
	for _, n := range []int{1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 1000, 4099} {
		src := make([]float32, n)
		acc := make([]float64, n)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(60)-30)))
			acc[i] = rng.NormFloat64() * math.Pow(2, float64(rng.IntN(60)-30))
			if rng.IntN(8) == 0 {
				src[i] = special[rng.IntN(len(special))]
			}
		}
		src[n-1] = float32(math.Inf(-1))
		simdRows = simdGo
		want := append([]float64(nil), acc...)
		for range 3 {
			addWiden(want, src)
		}
		for _, l := range levels[1:] {
			simdRows = l
			got := append([]float64(nil), acc...)
			for range 3 {
				addWiden(got, src)
			}
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n=%d %v: element %d = %v (%#x), want %v (%#x)", n, l, i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
				}
			}
		}
	}
}

// TestExpandRepeatsRows checks that a broadcast whose rows repeat (a bias
// over a batch, a column over rows) gives each row the bits computing it
// would: against Expand of one row at a time, in every dtype, with alpha
// 1 and not, over enough rows to be split among goroutines.
func TestExpandRepeatsRows(t *testing.T) {
	d := New()
	rng := rand.New(rand.NewPCG(4, 4))
	for _, dt := range dtype.All {
		for _, alpha := range []float32{1, -0.3} {
			const rows, cols = 300, 37
			h := make([]float32, cols)
			for i := range h {
				h[i] = float32(rng.NormFloat64())
			}
			h[3] = float32(math.NaN())
			src := d.Alloc(dt, cols, device.Temp)
			d.CopyFromHost(src, h)
			all := d.Alloc(dt, rows*cols, device.Temp)
			d.Expand(all, src, device.Strides{Shape: []int{rows, cols}, A: []int{0, 1}}, alpha)
			one := d.Alloc(dt, cols, device.Temp)
			d.Expand(one, src, device.Strides{Shape: []int{1, cols}, A: []int{0, 1}}, alpha)
			ab, ob := d.buf(all, "test"), d.buf(one, "test")
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					var g, w uint32
					if dt == dtype.F32 {
						g, w = math.Float32bits(ab.f32[r*cols+j]), math.Float32bits(ob.f32[j])
					} else {
						g, w = uint32(ab.u16[r*cols+j]), uint32(ob.u16[j])
					}
					if g != w {
						t.Fatalf("%v alpha %v: row %d col %d = %#x, want %#x", dt, alpha, r, j, g, w)
					}
				}
			}
			// A column broadcast along rows (stride 1 then 0) has no
			// repeated rows; its values must still be right.
			col := d.Alloc(dt, rows*cols, device.Temp)
			srcRows := d.Alloc(dt, rows, device.Temp)
			hr := make([]float32, rows)
			for i := range hr {
				hr[i] = float32(i)
			}
			d.CopyFromHost(srcRows, hr)
			d.Expand(col, srcRows, device.Strides{Shape: []int{rows, cols}, A: []int{1, 0}}, alpha)
			out := make([]float32, rows*cols)
			d.CopyToHost(out, col)
			for r := 0; r < rows; r++ {
				if want := dtype.Round(dt, alpha*dtype.Round(dt, float32(r))); out[r*cols+cols-1] != want {
					t.Fatalf("%v column broadcast: row %d = %v, want %v", dt, r, out[r*cols+cols-1], want)
				}
			}
			for _, b := range []device.Buffer{src, all, one, col, srcRows} {
				d.Free(b)
			}
		}
	}
}
