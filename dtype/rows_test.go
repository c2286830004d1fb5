package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRows checks EncodeRows and DecodeRows against Encode and Decode row
// by row, bit for bit, with the platform's block converters and with a call
// per row: every column count 0-40 and a long one, strides past the rows,
// NaNs, infinities and subnormals, and nothing written between the rows.
func TestRows(t *testing.T) {
	impls := map[string]rowConverters{"per-row": {}}
	if rowsImpl.encode != nil {
		impls["block"] = rowsImpl
	}
	defer func(r rowConverters) { rowsImpl = r }(rowsImpl)
	rng := rand.New(rand.NewPCG(8, 8))
	bits := testPatterns(0)
	for name, impl := range impls {
		rowsImpl = impl
		for _, d := range []DType{F16, BF16} {
			for _, cols := range append(seq(41), 300) {
				rows, ldd, lds := 1+rng.IntN(7), cols+rng.IntN(5), cols+rng.IntN(5)
				src := make([]float32, rows*lds)
				src16 := make([]uint16, rows*lds)
				for i := range src {
					src[i] = math.Float32frombits(bits[rng.IntN(len(bits))])
					src16[i] = uint16(rng.Uint32())
				}
				// Encode.
				got, want := make([]uint16, rows*ldd+3), make([]uint16, rows*ldd+3)
				for i := range got {
					got[i], want[i] = 0xbeef, 0xbeef
				}
				EncodeRows(d, got, ldd, src, lds, rows, cols)
				for r := 0; r < rows; r++ {
					Encode(d, want[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols])
				}
				if i := firstDiff16(got, want); i >= 0 {
					t.Fatalf("%s %v EncodeRows %dx%d ldd %d lds %d: element %d = %#04x, want %#04x", name, d, rows, cols, ldd, lds, i, got[i], want[i])
				}
				// Decode.
				g32, w32 := make([]float32, rows*ldd+3), make([]float32, rows*ldd+3)
				for i := range g32 {
					g32[i], w32[i] = -7, -7
				}
				DecodeRows(d, g32, ldd, src16, lds, rows, cols)
				for r := 0; r < rows; r++ {
					Decode(d, w32[r*ldd:r*ldd+cols], src16[r*lds:r*lds+cols])
				}
				if i := firstDiff32(g32, w32); i >= 0 {
					t.Fatalf("%s %v DecodeRows %dx%d: element %d = %#08x, want %#08x", name, d, rows, cols, i, math.Float32bits(g32[i]), math.Float32bits(w32[i]))
				}
			}
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestRowsPanics checks that a block past the end of either slice panics
// before anything is converted.
func TestRowsPanics(t *testing.T) {
	for _, f := range []func(){
		func() { EncodeRows(F16, make([]uint16, 10), 5, make([]float32, 12), 6, 2, 6) },  // cols > ldd
		func() { EncodeRows(F16, make([]uint16, 9), 5, make([]float32, 12), 6, 2, 5) },   // dst short
		func() { DecodeRows(BF16, make([]float32, 10), 5, make([]uint16, 10), 6, 2, 5) }, // src short
		func() { DecodeRows(F32, make([]float32, 10), 5, make([]uint16, 10), 5, 2, 5) },  // not 16-bit
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}
