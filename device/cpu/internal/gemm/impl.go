package gemm

import "os"

// impl is one complete implementation: a micro-kernel, its tile shape and
// cache blocking, and the packing primitives it is fed by. Every slice
// argument is long enough for the block it describes; the assembly wrappers
// check that before they take a pointer.
type impl struct {
	name       string
	mr, nr     int // micro-tile: mr rows of C by nr columns
	kc, mc, nc int // largest k, m and n blocks

	// tile sets the mr x nr tile c = alpha*(a·b) + beta*c, a being kc steps
	// of mr packed floats and b kc steps of nr; beta == 0 does not read c.
	tile tileFn

	// tileHalf, where the implementation has it, is tile storing its
	// result rounded to binary16 into out (ldo elements a row) rather than
	// into c: the same float32 values, rounded to nearest even. A Gemm16
	// with an F16 C uses it for the full tiles of the last k block.
	tileHalf tileHalfFn

	// tileWide, where the implementation has it, is tileHalf storing each
	// binary16 value widened back to float32 into out: the bits tileHalf
	// and a widening pass would give. A Gemm16 into Out16.F32 with F16
	// uses it as tileHalf is used.
	tileWide tileWideFn
	// tileUnscale, where the implementation has it, is tileWide also
	// multiplying each widened value by inv (Out16.Unscale) and reporting
	// whether any product is Inf or NaN.
	tileUnscale tileUnscaleFn

	// tileBF16 and tileBF16Wide, where the implementation has them, are
	// tileHalf and tileWide rounding to bfloat16.
	tileBF16     tileHalfFn
	tileBF16Wide tileWideFn

	// edge[i][j] is a kernel for a rows[i] x cols[j] tile at the bottom or
	// right edge of C, reading the same packed panels as tile (rows and cols
	// ascending, the last being mr and nr). Every element is computed with
	// the same FMAs in the same order whichever kernel covers it, so edge
	// kernels change the speed, never the bits. nil where tile is the only
	// kernel.
	rows, cols []int
	edge       [][]tileFn

	// Packing primitives, strides in elements. copy2D and cvt2D copy a
	// rows x cols block (cvt2D widening binary16, or bfloat16 when bf16);
	// transpose and transpose16 write dst[q*ldd+p] = src[p*lds+q] for
	// p < rows, q < cols.
	copy2D      func(dst []float32, ldd int, src []float32, lds int, rows, cols int)
	cvt2D       func(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool)
	transpose   func(dst []float32, ldd int, src []float32, lds int, rows, cols int)
	transpose16 func(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool)

	// dot, where set, is the implementation Gemm switches to when A and B
	// are both bfloat16 (see bf16Dot): its kernels multiply bfloat16 pairs
	// natively instead of widening them.
	dot *impl

	// pays, on a dot implementation, reports whether its kernels beat the
	// widening path's on this CPU (measured once, the first time it is
	// asked); nil counts as yes. The VDPBF16PS kernels run at twice the
	// FMA kernels' speed on a Zen 4 or Zen 5 and at half of it on an
	// Emerald Rapids Xeon, where the instruction issues once every two
	// cycles.
	pays func() bool

	// pairs marks a bfloat16 dot implementation. Its panels hold pairs of
	// bfloat16 at consecutive k (low half first) in the 32-bit slots of the
	// float32 buffers, so a panel has ceil(kc/2) steps and its kernels
	// count steps in pairs. zip and trPairs pack them (see packPairs):
	// zip sets dst[q*ldd+p] = src[2q*lds+p] | src[(2q+1)*lds+p]<<16 for
	// q < pairs, p < cols (two k rows interleaved); trPairs sets
	// dst[q*ldd+p] = src[p*lds+2q] | src[p*lds+2q+1]<<16 for p < rows,
	// q < pairs (32-bit pairs transposed).
	pairs   bool
	zip     func(dst []float32, ldd int, src []uint16, lds int, pairs, cols int)
	trPairs func(dst []float32, ldd int, src []uint16, lds int, rows, pairs int)

	// tiles marks a pairs implementation whose kernel works in AMX tile
	// registers: a step count is padded to a multiple of 16 pairs (one
	// tile of k), kc is a multiple of 32, and an A micro-panel holds mr
	// rows of pairs, each row's pairs contiguous (packRowPairs), rather
	// than k-major. run computes n full tiles of C, one below the other,
	// from consecutive A micro-panels and one B micro-panel, as n calls of
	// tile would; macro hands it each column of full tiles at once, so that
	// the tile configuration is loaded once a column rather than once a tile.
	tiles bool
	run   func(steps int, a, b, c []float32, ldc int, alpha, beta float32, n int)
	// runRound, where the implementation has it, is run for alpha 1 and
	// beta 0 or 1 storing each tile rounded to bfloat16 into d (rows ldd
	// apart) instead of into c: a bfloat16 C's last k block, rounded while
	// the tile is in cache rather than read back from c.
	runRound func(steps int, a, b, c []float32, ldc int, beta float32, n int, d []uint16, ldd int)
	// runRoundW is runRound storing into a float32 d the rounded values
	// widened back: a bfloat16 C kept in float32 (Out16.F32).
	runRoundW func(steps int, a, b, c []float32, ldc int, beta float32, n int, d []float32, ldd int)
	// tileRows, where the implementation has it, packs the first groups
	// whole groups of 16 pairs of an A micro-panel of 32 rows whose k is
	// contiguous in storage (lds apart) in one call: what packTiles
	// otherwise copies a 64-byte row piece at a time.
	tileRows func(dst []float32, src []uint16, lds, groups int)
}

// kUnit is what kc is a multiple of: 8 keeps the packing transposes on
// their 8x8 blocks, 32 is one AMX tile of k.
func (im *impl) kUnit() int {
	if im.tiles {
		return 32
	}
	return 8
}

// tileFn is the signature of a micro-kernel; see impl.tile.
type tileFn func(kc int, a, b, c []float32, ldc int, alpha, beta float32)

// tileHalfFn is a tileFn that stores binary16 into out instead of c.
type tileHalfFn func(kc int, a, b, c []float32, ldc int, alpha, beta float32, out []uint16, ldo int)

// tileWideFn is a tileHalfFn storing each binary16 value widened to float32.
type tileWideFn func(kc int, a, b, c []float32, ldc int, alpha, beta float32, out []float32, ldo int)

// tileUnscaleFn is a tileWideFn that unscales; see impl.tileUnscale.
type tileUnscaleFn func(kc int, a, b, c []float32, ldc int, alpha, beta float32, out []float32, ldo int, inv float32) bool

// goImpl is the pure-Go implementation: the fallback off amd64 and the
// reference the assembly is tested against. Its 4x4 tile's sixteen
// accumulators and eight operands fit the 32 floating-point registers of
// arm64 and most other targets (amd64 has 16, but it has the assembly).
var goImpl = &impl{
	name: "go",
	mr:   4, nr: 4,
	kc: 256, mc: 128, nc: 2048,
	tile:        tileGo,
	copy2D:      copy2DGo,
	cvt2D:       cvt2DGo,
	transpose:   transposeGo,
	transpose16: transpose16Go,
}

// impls lists every implementation this CPU can run, slowest first; a
// platform file's init appends its fast ones. active is the one Gemm uses
// (or its dot variant, for two bfloat16 operands).
var (
	impls  = []*impl{goImpl}
	active = goImpl
)

// dotMode says when Gemm multiplies two bfloat16 operands with an
// implementation's dot variant.
type dotMode uint8

const (
	dotAuto dotMode = iota // where the variant pays on this CPU
	dotOn                  // always (where there is one)
	dotOff                 // never: the widening path
)

// bf16Dot is dotAuto unless the environment sets MIXPREC_NO_BF16DOT=1
// (dotOff, to compare the widening path) or MIXPREC_BF16DOT=1 (dotOn, the
// VDPBF16PS kernels even where they are the slower); the tests switch it to
// run both paths on one CPU.
var bf16Dot = dotModeFrom(os.Getenv("MIXPREC_NO_BF16DOT"), os.Getenv("MIXPREC_BF16DOT"))

func dotModeFrom(no, yes string) dotMode {
	switch {
	case no == "1":
		return dotOff
	case yes == "1":
		return dotOn
	}
	return dotAuto
}

// implFor returns the implementation that multiplies a and b: the dot
// variant of active when both are bfloat16 and bf16Dot lets it, else
// active.
func implFor(a, b *Operand) *impl {
	im := active
	if im.dot == nil || bf16Dot == dotOff || a.U16 == nil || !a.BF16 || b.U16 == nil || !b.BF16 {
		return im
	}
	if bf16Dot == dotOn || im.dot.pays == nil || im.dot.pays() {
		return im.dot
	}
	return im
}

// tileGo is the 4x4 micro-kernel in Go.
func tileGo(kc int, a, b, c []float32, ldc int, alpha, beta float32) {
	var c00, c01, c02, c03 float32
	var c10, c11, c12, c13 float32
	var c20, c21, c22, c23 float32
	var c30, c31, c32, c33 float32
	a = a[:4*kc]
	b = b[:4*kc]
	// Stepping the slices rather than indexing lets the compiler drop the
	// bounds checks from the loop.
	for len(a) >= 4 && len(b) >= 4 {
		a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
		a, b = a[4:], b[4:]
	}
	t := [16]float32{
		c00, c01, c02, c03,
		c10, c11, c12, c13,
		c20, c21, c22, c23,
		c30, c31, c32, c33,
	}
	mergeTile(c, ldc, t[:], 4, 4, 4, alpha, beta)
}
