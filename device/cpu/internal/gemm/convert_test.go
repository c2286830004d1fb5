package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16ToF32(t *testing.T) {
	tests := []struct {
		h    uint16
		want uint32 // float32 bits
	}{
		{0x0000, 0x00000000},              // +0
		{0x8000, 0x80000000},              // -0
		{0x3c00, math.Float32bits(1)},     // 1
		{0xc000, math.Float32bits(-2)},    // -2
		{0x3555, 0x3eaaa000},              // 0.333251953125
		{0x7bff, math.Float32bits(65504)}, // largest finite
		{0x0400, 0x38800000},              // smallest normal 2⁻¹⁴
		{0x0001, 0x33800000},              // smallest subnormal 2⁻²⁴
		{0x03ff, 0x387fc000},              // largest subnormal
		{0x8001, 0xb3800000},              // negative subnormal
		{0x7c00, 0x7f800000},              // +Inf
		{0xfc00, 0xff800000},              // -Inf
		{0x7e00, 0x7fc00000},              // quiet NaN
		{0x7e01, 0x7fc02000},              // quiet NaN with payload
		{0x7d00, 0x7fe00000},              // signalling NaN comes out quiet, payload kept
		{0xfc01, 0xffc02000},              // negative signalling NaN
	}
	for _, tt := range tests {
		if got := math.Float32bits(f16ToF32(tt.h)); got != tt.want {
			t.Errorf("f16ToF32(%#04x) = %#08x, want %#08x", tt.h, got, tt.want)
		}
	}
}

func TestBF16ToF32(t *testing.T) {
	tests := []struct {
		h    uint16
		want float32
	}{
		{0x3f80, 1},
		{0xc040, -3},
		{0x0001, math.Float32frombits(0x00010000)}, // subnormal
		{0x7f80, float32(math.Inf(1))},
	}
	for _, tt := range tests {
		if got := bf16ToF32(tt.h); got != tt.want {
			t.Errorf("bf16ToF32(%#04x) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

// TestConvertAll widens all 65,536 patterns through each implementation's 2-D
// converters, with a stride and an odd width so every tail path runs, and
// requires the scalar function's bits.
func TestConvertAll(t *testing.T) {
	const cols, ld = 61, 64
	rows := (1<<16 + cols - 1) / cols
	src := make([]uint16, rows*ld)
	for x := 0; x < 1<<16; x++ {
		src[x/cols*ld+x%cols] = uint16(x)
	}
	for _, im := range impls {
		for _, bf := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/bf16=%v", im.name, bf), func(t *testing.T) {
				dst := make([]float32, rows*cols)
				scalar := f16ToF32
				if bf {
					scalar = bf16ToF32
				}
				im.cvt2D(dst, cols, src, ld, rows, cols, bf)
				for x := 0; x < 1<<16; x++ {
					got := math.Float32bits(dst[x/cols*cols+x%cols])
					if want := math.Float32bits(scalar(uint16(x))); got != want {
						t.Fatalf("%#04x widens to %#08x, want %#08x", x, got, want)
					}
				}
			})
		}
	}
}

// TestPackHelpers compares each implementation's copies and transposes with
// the Go ones on every small shape, with strides larger than the block, and
// on full 32-wide panels (the AVX-512 fast path), for all three source types.
// The 16-bit sources are random bit patterns, NaNs and subnormals included.
func TestPackHelpers(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const srcLD = 50
	src := make([]float32, 300*srcLD)
	src16 := make([]uint16, 300*srcLD)
	for i := range src {
		src[i] = rng.Float32()
		src16[i] = uint16(rng.Uint32())
	}
	type shape struct{ rows, cols, ldd int }
	var shapes []shape
	for rows := 1; rows <= 20; rows++ {
		for cols := 1; cols <= 40; cols++ {
			shapes = append(shapes, shape{rows, cols, 43})
		}
	}
	shapes = append(shapes, shape{257, 32, 32}, shape{1, 32, 32})
	for _, im := range impls[1:] {
		t.Run(im.name, func(t *testing.T) {
			want := make([]float32, 300*45)
			got := make([]float32, 300*45)
			for _, sh := range shapes {
				name := fmt.Sprintf("%dx%d/ldd=%d", sh.rows, sh.cols, sh.ldd)
				run := func(what string, ref, fast func(dst []float32)) {
					t.Helper()
					clear(want)
					clear(got)
					ref(want)
					fast(got)
					compareBits(t, what+" "+name, got, want)
				}
				run("copy2D",
					func(d []float32) { copy2DGo(d, sh.ldd, src, srcLD, sh.rows, sh.cols) },
					func(d []float32) { im.copy2D(d, sh.ldd, src, srcLD, sh.rows, sh.cols) })
				for _, bf := range []bool{false, true} {
					run(fmt.Sprintf("cvt2D(bf16=%v)", bf),
						func(d []float32) { cvt2DGo(d, sh.ldd, src16, srcLD, sh.rows, sh.cols, bf) },
						func(d []float32) { im.cvt2D(d, sh.ldd, src16, srcLD, sh.rows, sh.cols, bf) })
				}
				if sh.rows > 40 {
					continue // the transposed block would not fit in dst's stride
				}
				// Transposes write cols rows of width rows: use ldd as
				// the stride, which is at least rows here.
				run("transpose",
					func(d []float32) { transposeGo(d, sh.ldd, src, srcLD, sh.rows, sh.cols) },
					func(d []float32) { im.transpose(d, sh.ldd, src, srcLD, sh.rows, sh.cols) })
				for _, bf := range []bool{false, true} {
					run(fmt.Sprintf("transpose16(bf16=%v)", bf),
						func(d []float32) { transpose16Go(d, sh.ldd, src16, srcLD, sh.rows, sh.cols, bf) },
						func(d []float32) { im.transpose16(d, sh.ldd, src16, srcLD, sh.rows, sh.cols, bf) })
				}
			}
		})
	}
}
