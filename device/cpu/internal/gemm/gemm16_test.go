package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// TestGemm16 checks that Gemm16 gives the bits of widening C, calling Gemm
// on the float32 copy and rounding the result once: on every shape TestGemm
// covers and the MLP's, with each implementation, small blocks (so that C's
// blocks cross every k, m and n block boundary), several worker counts,
// beta 0 (C's NaNs must not leak in), 1 and -0.5, and alpha 0 or k 0; and
// that a C stored in F32 receives those 16-bit results widened, bit for bit,
// with nothing around it touched.
func TestGemm16(t *testing.T) {
	shapes := append(gemmShapes(), [3]int{128, 256, 784}, [3]int{70, 3, 0})
	if testing.Short() {
		shapes = shapes[:8]
	}
	var ims []*impl
	for _, im := range impls {
		ims = append(ims, im, smallBlocking(im))
	}
	for _, im := range ims {
		for _, out := range []dtype.DType{dtype.F16, dtype.BF16} {
			for _, tr := range transCombos {
				for si, s := range shapes {
					for _, beta := range []float32{0, 1, -0.5} {
						alpha := float32(1)
						if si%5 == 4 {
							alpha = 0
						}
						sa, sb := storages[si%3], storages[(si+1)%3]
						if out == dtype.BF16 && si%2 == 0 {
							sa, sb = bf16, bf16 // the native BF16 pairs where the CPU has them
						}
						name := fmt.Sprintf("%s/%v/%v%v/%dx%dx%d/%v×%v/a%g/b%g", im.name, out, tr.a, tr.b, s[0], s[1], s[2], sa, sb, alpha, beta)
						workers := 1 + si%3
						check16(t, name, im, workers, out, tr.a, tr.b, s[0], s[1], s[2], alpha, beta, sa, sb, uint64(si))
					}
				}
			}
		}
	}
}

func check16(t *testing.T, name string, im *impl, workers int, out dtype.DType, transA, transB bool, m, n, k int, alpha, beta float32, sa, sb storage, seed uint64) {
	t.Helper()
	withImpl(t, im)
	withWorkers(t, workers)
	rng := rand.New(rand.NewPCG(seed, 16))
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	a, _ := newOperand(rng, sa, ar, ac, 1, 2)
	b, _ := newOperand(rng, sb, br, bc, 0, 1)
	// A 16-bit C with a leading dimension past n, an offset and sentries
	// around it; beta == 0 fills it with NaNs, which must not be read.
	const ldExtra, off, sentry = 3, 5, 0x7e77
	ld := n + ldExtra
	c16 := make([]uint16, off+m*ld+4)
	for i := range c16 {
		c16[i] = sentry
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			v := rng.Float32()*2 - 1
			if beta == 0 {
				c16[off+i*ld+j] = 0x7e00 // NaN in both formats' patterns we write
			} else {
				tmp := []uint16{0}
				dtype.Encode(out, tmp, []float32{v})
				c16[off+i*ld+j] = tmp[0]
			}
		}
	}
	// The reference: widen, Gemm in float32, round once.
	want := append([]uint16(nil), c16...)
	c32 := make([]float32, m*n)
	for i := 0; i < m; i++ {
		if beta != 0 {
			dtype.Decode(out, c32[i*n:i*n+n], want[off+i*ld:off+i*ld+n])
		}
	}
	if m > 0 && n > 0 {
		Gemm(transA, transB, m, n, k, alpha, a, b, beta, c32, max(n, 1))
	}
	for i := 0; i < m; i++ {
		dtype.Encode(out, want[off+i*ld:off+i*ld+n], c32[i*n:i*n+n])
	}
	// The same C stored widened in float32 (its sentries and the NaNs of
	// beta == 0 widened too), computed before c16 is overwritten.
	w32 := make([]float32, len(c16))
	dtype.Decode(out, w32, c16)
	Gemm16(transA, transB, m, n, k, alpha, a, b, beta, Out16{U16: c16, BF16: out == dtype.BF16, Off: off, LD: ld})
	for i := range want {
		if c16[i] != want[i] {
			t.Fatalf("%s: C16[%d] = %#04x, want %#04x (widen, Gemm, round)", name, i, c16[i], want[i])
		}
	}
	Gemm16(transA, transB, m, n, k, alpha, a, b, beta, Out16{F32: w32, BF16: out == dtype.BF16, Off: off, LD: ld})
	wide := make([]float32, len(want))
	dtype.Decode(out, wide, want)
	for i := range wide {
		if math.Float32bits(w32[i]) != math.Float32bits(wide[i]) {
			t.Fatalf("%s: C stored in F32: C[%d] = %v, want %v (the 16-bit result widened)", name, i, w32[i], wide[i])
		}
	}
	if beta == 0 {
		// Unscaled as stored: the widened results times the factor, C's
		// rows alone (the sentries and the gaps past n keep their values).
		for _, inv := range []float32{0x1p-16, 1.0 / 3} {
			u32 := make([]float32, len(c16))
			dtype.Decode(out, u32, c16)
			for i := range m {
				Unscale(wide[off+i*ld:off+i*ld+n], inv)
			}
			nf := Gemm16(transA, transB, m, n, k, alpha, a, b, 0, Out16{F32: u32, BF16: out == dtype.BF16, Off: off, LD: ld, Unscale: inv})
			for i := range wide {
				if math.Float32bits(u32[i]) != math.Float32bits(wide[i]) {
					t.Fatalf("%s: C unscaled by %g as stored: C[%d] = %v, want %v (widened, then unscaled)", name, inv, i, u32[i], wide[i])
				}
			}
			if nf {
				t.Fatalf("%s: C unscaled by %g: Gemm16 reports an Inf or NaN among finite results", name, inv)
			}
			dtype.Decode(out, wide, want)
		}
	}
}

// TestGemm16NonFinite checks the rounded stores on results that are
// infinite, NaN (quieted, as dtype rounds them) or beyond F16's range, for
// each implementation and both forms of C: the bits of calling Gemm and
// rounding once. The products are large enough for full tiles of every
// implementation, whose kernels round in registers.
func TestGemm16NonFinite(t *testing.T) {
	const m, n, k = 25, 70, 20
	rng := rand.New(rand.NewPCG(7, 16))
	a := make([]float32, m*k)
	for i := range a {
		a[i] = rng.Float32()*2 - 1
	}
	b := make([]float32, k*n)
	for i := range b {
		b[i] = rng.Float32()*2 - 1
	}
	nan := math.Float32frombits(0x7fa01234) // a signalling NaN with a payload
	for i, v := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), nan, 3e4, -7e4, 1e30} {
		a[(3*i+1)*k+i] = v // rows 1, 4, ..., 16: full-tile rows on both tile heights
	}
	for _, im := range impls {
		withImpl(t, im)
		for _, out := range []dtype.DType{dtype.F16, dtype.BF16} {
			c32 := make([]float32, m*n)
			Gemm(false, false, m, n, k, 1, Operand{F32: a, LD: k}, Operand{F32: b, LD: n}, 0, c32, n)
			want := make([]uint16, m*n)
			dtype.Encode(out, want, c32)
			got := make([]uint16, m*n)
			Gemm16(false, false, m, n, k, 1, Operand{F32: a, LD: k}, Operand{F32: b, LD: n}, 0, Out16{U16: got, BF16: out == dtype.BF16, LD: n})
			wide := make([]float32, m*n)
			Gemm16(false, false, m, n, k, 1, Operand{F32: a, LD: k}, Operand{F32: b, LD: n}, 0, Out16{F32: wide, BF16: out == dtype.BF16, LD: n})
			nonFinite := 0
			for i := range want {
				w := dtype.F16ToF32(want[i])
				if out == dtype.BF16 {
					w = dtype.BF16ToF32(want[i])
				}
				if math.IsNaN(float64(w)) || math.IsInf(float64(w), 0) {
					nonFinite++
				}
				if got[i] != want[i] {
					t.Fatalf("%s/%v: C16[%d] = %#04x, want %#04x (Gemm, then round: %v)", im.name, out, i, got[i], want[i], c32[i])
				}
				if math.Float32bits(wide[i]) != math.Float32bits(w) {
					t.Fatalf("%s/%v: C stored in F32: C[%d] = %#08x, want %#08x", im.name, out, i, math.Float32bits(wide[i]), math.Float32bits(w))
				}
			}
			if nonFinite < 2*n {
				t.Fatalf("%s/%v: only %d non-finite results; the test lost its specials", im.name, out, nonFinite)
			}
			// Unscaled as stored, the specials are found, and the bits are
			// those of Unscale after the store.
			uns := make([]float32, m*n)
			if !Gemm16(false, false, m, n, k, 1, Operand{F32: a, LD: k}, Operand{F32: b, LD: n}, 0, Out16{F32: uns, BF16: out == dtype.BF16, LD: n, Unscale: 0x1p-10}) {
				t.Fatalf("%s/%v: Gemm16 unscaling C found no Inf or NaN among %d", im.name, out, nonFinite)
			}
			if !Unscale(wide, 0x1p-10) {
				t.Fatalf("%s/%v: Unscale found no Inf or NaN among %d", im.name, out, nonFinite)
			}
			for i := range wide {
				if math.Float32bits(uns[i]) != math.Float32bits(wide[i]) {
					t.Fatalf("%s/%v: C unscaled as stored: C[%d] = %#08x, want %#08x", im.name, out, i, math.Float32bits(uns[i]), math.Float32bits(wide[i]))
				}
			}
		}
	}
}

// TestGemm16UnscaleOverflow checks that a finite result that the factor
// takes past float32's range counts as Inf, on one worker and several,
// and that results that stay finite do not.
func TestGemm16UnscaleOverflow(t *testing.T) {
	const m, n, k = 40, 96, 16
	rng := rand.New(rand.NewPCG(9, 16))
	a, _ := newOperand(rng, f32, m, k, 1, 2)
	b, _ := newOperand(rng, f32, k, n, 0, 1)
	for _, workers := range []int{1, 2, 3} {
		withWorkers(t, workers)
		for _, c := range []struct {
			inv  float32
			want bool
		}{{0x1p-16, false}, {0x1p100, false}, {0x1p127, true}} {
			got := Gemm16(false, false, m, n, k, 1, a, b, 0, Out16{F32: make([]float32, m*n), LD: n, Unscale: c.inv})
			if got != c.want {
				t.Fatalf("workers %d, unscale %g: Gemm16 reports non-finite %v, want %v", workers, c.inv, got, c.want)
			}
		}
	}
}

// TestGemm16UnscaleFullTiles puts one Inf in a product made of full tiles
// alone (24 x 64: whole 12x32 and 6x16 tiles), away from any tile's first
// row, so that only an unscaling kernel's own check can find it; then a
// NaN, then nothing.
func TestGemm16UnscaleFullTiles(t *testing.T) {
	const m, n, k = 24, 64, 8
	for _, im := range impls {
		withImpl(t, im)
		for _, special := range []float32{float32(math.Inf(-1)), float32(math.NaN()), 0.5} {
			rng := rand.New(rand.NewPCG(13, 16))
			a, _ := newOperand(rng, f32, m, k, 0, 0)
			b, _ := newOperand(rng, f32, k, n, 0, 0)
			a.F32[17*k+3] = special // row 17: the sixth of its 12-row tile, the fifth of its 6-row one
			want := !(special == 0.5)
			if got := Gemm16(false, false, m, n, k, 1, a, b, 0, Out16{F32: make([]float32, m*n), LD: n, Unscale: 0x1p-8}); got != want {
				t.Fatalf("%s: A holding %v: Gemm16 reports non-finite %v, want %v", im.name, special, got, want)
			}
		}
	}
}
