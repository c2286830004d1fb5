//go:build !purego

package gemm

import (
	"sync"
	"time"

	"golang.org/x/sys/cpu"
)

//go:generate go run gen.go genconv.go

// The assembly in kernel_amd64.s takes raw pointers; the wrappers below are
// where the bounds are checked, once per call, before a pointer is taken.

// Micro-kernels: kernAVX512xRxC computes an R x C tile from panels packed for
// the 12x32 tile, kernAVX2xRxC from panels packed for the 6x16 one.

//go:noescape
func kernAVX512x12x32(kc int, a, b, c *float32, ldc int, alpha, beta float32)

// kernAVX512x12x32H is kernAVX512x12x32 storing its tile as binary16 into
// out instead of c.
//
//go:noescape
func kernAVX512x12x32H(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *uint16, ldo int)

// kernAVX512x12x32HW is kernAVX512x12x32H storing each binary16 value
// widened back to float32 into out.
//
//go:noescape
func kernAVX512x12x32HW(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int)

// kernAVX512x12x32HWU is kernAVX512x12x32HW multiplying each widened value
// by inv before it stores it (Out16.Unscale), reporting any Inf or NaN.
//
//go:noescape
func kernAVX512x12x32HWU(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int, inv float32) (nonFinite bool)

//go:noescape
func kernAVX512x12x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX512x8x32(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX512x8x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX512x4x32(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX512x4x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX2x6x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

// kernAVX2x6x16H and kernAVX2x6x16HW are kernAVX2x6x16 storing binary16,
// and binary16 widened back to float32, into out.
//
//go:noescape
func kernAVX2x6x16H(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *uint16, ldo int)

//go:noescape
func kernAVX2x6x16HW(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int)

//go:noescape
func kernAVX2x6x16HWU(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int, inv float32) (nonFinite bool)

// kernAVX2x6x16B and kernAVX2x6x16BW round to bfloat16 instead.
//
//go:noescape
func kernAVX2x6x16B(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *uint16, ldo int)

//go:noescape
func kernAVX2x6x16BW(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int)

//go:noescape
func kernAVX2x6x8(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX2x4x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX2x4x8(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX2x2x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernAVX2x2x8(kc int, a, b, c *float32, ldc int, alpha, beta float32)

// Packing helpers, one per source type (see gen.go for what each does).

//go:noescape
func cvt2DF32(dst *float32, ldd int, src *float32, lds int, rows, cols int)

//go:noescape
func cvt2DF16(dst *float32, ldd int, src *uint16, lds int, rows, cols int)

//go:noescape
func cvt2DBF16(dst *float32, ldd int, src *uint16, lds int, rows, cols int)

//go:noescape
func tr8F32(dst *float32, ldd int, src *float32, lds int, n8 int)

//go:noescape
func tr8F16(dst *float32, ldd int, src *uint16, lds int, n8 int)

//go:noescape
func tr8BF16(dst *float32, ldd int, src *uint16, lds int, n8 int)

//go:noescape
func tr4F32(dst *float32, ldd int, src *float32, lds int, n4 int)

//go:noescape
func tr4F16(dst *float32, ldd int, src *uint16, lds int, n4 int)

//go:noescape
func tr4BF16(dst *float32, ldd int, src *uint16, lds int, n4 int)

//go:noescape
func tr2F32(dst *float32, ldd int, src *float32, lds int, n8 int)

//go:noescape
func tr2F16(dst *float32, ldd int, src *uint16, lds int, n8 int)

//go:noescape
func tr2BF16(dst *float32, ldd int, src *uint16, lds int, n8 int)

//go:noescape
func panel32F32(dst *float32, src *float32, lds int, rows int)

//go:noescape
func panel32F16(dst *float32, src *uint16, lds int, rows int)

//go:noescape
func panel32BF16(dst *float32, src *uint16, lds int, rows int)

//go:noescape
func fmaPeakAVX512(n int)

// Bfloat16 dot-product kernels (AVX512_BF16): the AVX-512 tiles over panels
// of bfloat16 pairs, kc counting pairs; see gen.go.

//go:noescape
func kernDotAVX512x12x32(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernDotAVX512x12x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernDotAVX512x8x32(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernDotAVX512x8x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernDotAVX512x4x32(kc int, a, b, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernDotAVX512x4x16(kc int, a, b, c *float32, ldc int, alpha, beta float32)

// Their packing helpers (see impl.zip and impl.trPairs).

//go:noescape
func zip2DBF16(dst *float32, ldd int, src *uint16, lds int, pairs, cols int)

//go:noescape
func tr8Pair(dst *float32, ldd int, src *uint16, lds int, n8 int)

//go:noescape
func tr4Pair(dst *float32, ldd int, src *uint16, lds int, n4 int)

//go:noescape
func dotPeakAVX512(n int)

//go:noescape
func fmaPeakAVX2(n int)

// amxBF16 computes n 32x32 tiles of C with AMX-BF16 (see genAMX); steps
// is a multiple of 16, mode 0 for alpha 1 and beta 0, 1 for alpha 1 and
// beta 1, 2 otherwise.
//
//go:noescape
func amxBF16(steps int, a, b, c *float32, ldc int, alpha, beta float32, n, mode int)

// amxBF16Round is amxBF16 in mode 0 or 1 storing each tile rounded to
// bfloat16 into d, rows ldd apart, instead of into c (see genAMX).
//
//go:noescape
func amxBF16Round(steps int, a, b, c *float32, ldc int, alpha, beta float32, n, mode int, d *uint16, ldd int)

// amxBF16RoundW is amxBF16Round storing the rounded values widened to
// float32 into d, rows ldd apart (see genAMX).
//
//go:noescape
func amxBF16RoundW(steps int, a, b, c *float32, ldc int, alpha, beta float32, n, mode int, d *float32, ldd int)

//go:noescape
func amxPeak(n int)

// tileFunc wraps an assembly kernel for an mr x nr tile whose panels are
// packed sa floats (A) and sb floats (B) per k step.
func tileFunc(mr, nr, sa, sb int, kern func(kc int, a, b, c *float32, ldc int, alpha, beta float32)) tileFn {
	return func(kc int, a, b, c []float32, ldc int, alpha, beta float32) {
		_ = a[(kc-1)*sa+mr-1]
		_ = b[(kc-1)*sb+nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		kern(kc, &a[0], &b[0], &c[0], ldc, alpha, beta)
	}
}

// tileHalfFunc wraps a binary16-storing kernel as tileHalf does.
func tileHalfFunc(mr, nr, sa, sb int, kern func(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *uint16, ldo int)) tileHalfFn {
	return func(kc int, a, b, c []float32, ldc int, alpha, beta float32, out []uint16, ldo int) {
		_ = a[(kc-1)*sa+mr-1]
		_ = b[(kc-1)*sb+nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		_ = out[(mr-1)*ldo+nr-1]
		kern(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, &out[0], ldo)
	}
}

// tileWideFunc wraps a kernel storing binary16 widened as tileWide does.
func tileWideFunc(mr, nr, sa, sb int, kern func(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int)) tileWideFn {
	return func(kc int, a, b, c []float32, ldc int, alpha, beta float32, out []float32, ldo int) {
		_ = a[(kc-1)*sa+mr-1]
		_ = b[(kc-1)*sb+nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		_ = out[(mr-1)*ldo+nr-1]
		kern(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, &out[0], ldo)
	}
}

// tileUnscaleFunc wraps a kernel storing binary16 widened and unscaled as
// tileUnscale does.
func tileUnscaleFunc(mr, nr, sa, sb int, kern func(kc int, a, b, c *float32, ldc int, alpha, beta float32, out *float32, ldo int, inv float32) bool) tileUnscaleFn {
	return func(kc int, a, b, c []float32, ldc int, alpha, beta float32, out []float32, ldo int, inv float32) bool {
		_ = a[(kc-1)*sa+mr-1]
		_ = b[(kc-1)*sb+nr-1]
		_ = c[(mr-1)*ldc+nr-1]
		_ = out[(mr-1)*ldo+nr-1]
		return kern(kc, &a[0], &b[0], &c[0], ldc, alpha, beta, &out[0], ldo, inv)
	}
}

// span2D is how many elements a rows x cols block with stride ld covers.
func span2D(ld, rows, cols int) int { return (rows-1)*ld + cols }

// asmHelpers returns an implementation's packing helpers; panel32 says whether
// the AVX-512 routines for full 32-wide panels may be used.
type asmHelpers struct{ panel32 bool }

func (h asmHelpers) copy2D(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = dst[span2D(ldd, rows, cols)-1]
	_ = src[span2D(lds, rows, cols)-1]
	if h.panel32 && ldd == 32 && cols == 32 {
		panel32F32(&dst[0], &src[0], lds, rows)
		return
	}
	cvt2DF32(&dst[0], ldd, &src[0], lds, rows, cols)
}

func (h asmHelpers) cvt2D(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool) {
	if rows <= 0 || cols <= 0 {
		return
	}
	_ = dst[span2D(ldd, rows, cols)-1]
	_ = src[span2D(lds, rows, cols)-1]
	switch {
	case h.panel32 && ldd == 32 && cols == 32 && bf16:
		panel32BF16(&dst[0], &src[0], lds, rows)
	case h.panel32 && ldd == 32 && cols == 32:
		panel32F16(&dst[0], &src[0], lds, rows)
	case bf16:
		cvt2DBF16(&dst[0], ldd, &src[0], lds, rows, cols)
	default:
		cvt2DF16(&dst[0], ldd, &src[0], lds, rows, cols)
	}
}

func (asmHelpers) transpose(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	transposeAsm(dst, ldd, src, lds, rows, cols, tr8F32, tr4F32, tr2F32, transposeGo)
}

func (asmHelpers) transpose16(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool) {
	if bf16 {
		transposeAsm(dst, ldd, src, lds, rows, cols, tr8BF16, tr4BF16, tr2BF16, transposeTailBF16)
		return
	}
	transposeAsm(dst, ldd, src, lds, rows, cols, tr8F16, tr4F16, tr2F16, transposeTailF16)
}

// tailSpan is how many elements transposeTail16 widens at a time.
const tailSpan = 256

// transposeTail16 is transpose16Go for the rows the shuffle kernels leave
// (an AVX2 A panel's last 2 of 6 rows, a 10-wide B panel's last 2): it
// widens them with cvt2D into a buffer on the stack, tailSpan elements at
// a time, and transposes float32. Widening one element at a time in Go
// made a 6-row F16 panel cost 1.2x a float32 one.
func transposeTail16(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool) {
	if rows > tailSpan {
		transpose16Go(dst, ldd, src, lds, rows, cols, bf16)
		return
	}
	var buf [tailSpan]float32
	step := tailSpan / rows
	for q := 0; q < cols; q += step {
		w := min(step, cols-q)
		asmHelpers{}.cvt2D(buf[:], w, src[q:], lds, rows, w, bf16)
		transposeGo(dst[q*ldd:], ldd, buf[:], w, rows, w)
	}
}

func transposeTailF16(dst []float32, ldd int, src []uint16, lds int, rows, cols int) {
	transposeTail16(dst, ldd, src, lds, rows, cols, false)
}

func transposeTailBF16(dst []float32, ldd int, src []uint16, lds int, rows, cols int) {
	transposeTail16(dst, ldd, src, lds, rows, cols, true)
}

// transposeAsm does 8-, 4- and then 2-row groups with the shuffle kernels
// and leaves the last rows and columns (fewer than 2 rows, or fewer than 8
// or 4 columns) to tail.
func transposeAsm[T float32 | uint16](dst []float32, ldd int, src []T, lds int, rows, cols int,
	tr8, tr4, tr2 func(dst *float32, ldd int, src *T, lds int, n int),
	tail func(dst []float32, ldd int, src []T, lds int, rows, cols int)) {
	if rows <= 0 || cols <= 0 {
		return
	}
	// dst is written as cols rows of the rows-wide block, src read as rows
	// rows of cols.
	_ = dst[span2D(ldd, cols, rows)-1]
	_ = src[span2D(lds, rows, cols)-1]
	p := 0
	for ; p+8 <= rows; p += 8 {
		q := cols &^ 7
		if q > 0 {
			tr8(&dst[p], ldd, &src[p*lds], lds, q/8)
		}
		if q < cols {
			tail(dst[q*ldd+p:], ldd, src[p*lds+q:], lds, 8, cols-q)
		}
	}
	if p+4 <= rows {
		q := cols &^ 3
		if q > 0 {
			tr4(&dst[p], ldd, &src[p*lds], lds, q/4)
		}
		if q < cols {
			tail(dst[q*ldd+p:], ldd, src[p*lds+q:], lds, 4, cols-q)
		}
		p += 4
	}
	if p+2 <= rows {
		q := cols &^ 7
		if q > 0 {
			tr2(&dst[p], ldd, &src[p*lds], lds, q/8)
		}
		if q < cols {
			tail(dst[q*ldd+p:], ldd, src[p*lds+q:], lds, 2, cols-q)
		}
		p += 2
	}
	if p < rows {
		tail(dst[p:], ldd, src[p*lds:], lds, rows-p, cols)
	}
}

// zip packs a k-major bfloat16 operand for the dot kernels; AVX-512BW.
func (asmHelpers) zip(dst []float32, ldd int, src []uint16, lds int, pairs, cols int) {
	if pairs <= 0 || cols <= 0 {
		return
	}
	_ = dst[span2D(ldd, pairs, cols)-1]
	_ = src[span2D(lds, 2*pairs, cols)-1]
	zip2DBF16(&dst[0], ldd, &src[0], lds, pairs, cols)
}

// trPairs packs a k-contiguous bfloat16 operand for the dot kernels: 8- and
// then 4-row groups with the shuffle kernels, the last rows and pairs
// (fewer than 4 of either) in Go.
func (asmHelpers) trPairs(dst []float32, ldd int, src []uint16, lds int, rows, pairs int) {
	if rows <= 0 || pairs <= 0 {
		return
	}
	_ = dst[span2D(ldd, pairs, rows)-1]
	_ = src[span2D(lds, rows, 2*pairs)-1]
	p := 0
	for ; p+8 <= rows; p += 8 {
		q := pairs &^ 7
		if q > 0 {
			tr8Pair(&dst[p], ldd, &src[p*lds], lds, q/8)
		}
		if q < pairs {
			trPairsGo(dst[q*ldd+p:], ldd, src[p*lds+2*q:], lds, 8, pairs-q)
		}
	}
	if p+4 <= rows {
		q := pairs &^ 3
		if q > 0 {
			tr4Pair(&dst[p], ldd, &src[p*lds], lds, q/4)
		}
		if q < pairs {
			trPairsGo(dst[q*ldd+p:], ldd, src[p*lds+2*q:], lds, 4, pairs-q)
		}
		p += 4
	}
	if p < rows {
		trPairsGo(dst[p:], ldd, src[p*lds:], lds, rows-p, pairs)
	}
}

// avx2Impl needs AVX2, FMA and F16C (Haswell, Zen 1 and later). Its 6x16
// tile is BLIS's: twelve accumulators, two B vectors and two broadcasts fill
// the sixteen Y registers. Its kc is avx512Impl's, which with the same FMA
// order per element makes the two agree bit for bit (TestAsmImplsBits).
var avx2Impl = &impl{
	name: "avx2",
	mr:   6, nr: 16,
	kc: 256, mc: 144, nc: 4080,
	tile:     tileFunc(6, 16, 6, 16, kernAVX2x6x16),
	tileHalf: tileHalfFunc(6, 16, 6, 16, kernAVX2x6x16H),
	tileWide: tileWideFunc(6, 16, 6, 16, kernAVX2x6x16HW),

	tileUnscale: tileUnscaleFunc(6, 16, 6, 16, kernAVX2x6x16HWU),

	tileBF16:     tileHalfFunc(6, 16, 6, 16, kernAVX2x6x16B),
	tileBF16Wide: tileWideFunc(6, 16, 6, 16, kernAVX2x6x16BW),

	rows: []int{2, 4, 6},
	cols: []int{8, 16},
	edge: [][]tileFn{
		{tileFunc(2, 8, 6, 16, kernAVX2x2x8), tileFunc(2, 16, 6, 16, kernAVX2x2x16)},
		{tileFunc(4, 8, 6, 16, kernAVX2x4x8), tileFunc(4, 16, 6, 16, kernAVX2x4x16)},
		{tileFunc(6, 8, 6, 16, kernAVX2x6x8), tileFunc(6, 16, 6, 16, kernAVX2x6x16)},
	},
	copy2D:      asmHelpers{}.copy2D,
	cvt2D:       asmHelpers{}.cvt2D,
	transpose:   asmHelpers{}.transpose,
	transpose16: asmHelpers{}.transpose16,
}

// avx512Impl adds AVX-512F. The 12x32 tile (the row-major form of BLIS's
// 32x12 SKX kernel) uses 24 of the 32 Z registers as accumulators: two FMAs
// per broadcast keep both FMA pipes busy with one load per two FMAs. kc = 256
// keeps a 32 KiB B micro-panel in L1 while A streams from L2.
var avx512Impl = &impl{
	name: "avx512",
	mr:   12, nr: 32,
	kc: 256, mc: 240, nc: 4096,
	tile:     tileFunc(12, 32, 12, 32, kernAVX512x12x32),
	tileHalf: tileHalfFunc(12, 32, 12, 32, kernAVX512x12x32H),
	tileWide: tileWideFunc(12, 32, 12, 32, kernAVX512x12x32HW),

	tileUnscale: tileUnscaleFunc(12, 32, 12, 32, kernAVX512x12x32HWU),

	rows: []int{4, 8, 12},
	cols: []int{16, 32},
	edge: [][]tileFn{
		{tileFunc(4, 16, 12, 32, kernAVX512x4x16), tileFunc(4, 32, 12, 32, kernAVX512x4x32)},
		{tileFunc(8, 16, 12, 32, kernAVX512x8x16), tileFunc(8, 32, 12, 32, kernAVX512x8x32)},
		{tileFunc(12, 16, 12, 32, kernAVX512x12x16), tileFunc(12, 32, 12, 32, kernAVX512x12x32)},
	},
	copy2D:      asmHelpers{panel32: true}.copy2D,
	cvt2D:       asmHelpers{panel32: true}.cvt2D,
	transpose:   asmHelpers{}.transpose,
	transpose16: asmHelpers{}.transpose16,
}

// avx512DotImpl is avx512Impl's variant for two bfloat16 operands on CPUs
// with AVX512_BF16 (Zen 4, Cooper Lake, Sapphire Rapids and later): the
// same tiles, fed bfloat16 pairs, so a VDPBF16PS does the work of two FMAs
// and the packed panels are half as large. kc = 512 k values is 256 pairs,
// a 32 KiB B micro-panel as for float32. Its bits differ from the widening
// path's (each instruction adds two products, and bfloat16 subnormal inputs
// count as zero) but depend, as there, only on the row of op(A), the column
// of op(B), k, alpha, beta and C.
var avx512DotImpl = &impl{
	name: "avx512-bf16dot",
	mr:   12, nr: 32,
	kc: 512, mc: 240, nc: 4096,
	pairs: true,
	tile:  tileFunc(12, 32, 12, 32, kernDotAVX512x12x32),
	rows:  []int{4, 8, 12},
	cols:  []int{16, 32},
	edge: [][]tileFn{
		{tileFunc(4, 16, 12, 32, kernDotAVX512x4x16), tileFunc(4, 32, 12, 32, kernDotAVX512x4x32)},
		{tileFunc(8, 16, 12, 32, kernDotAVX512x8x16), tileFunc(8, 32, 12, 32, kernDotAVX512x8x32)},
		{tileFunc(12, 16, 12, 32, kernDotAVX512x12x16), tileFunc(12, 32, 12, 32, kernDotAVX512x12x32)},
	},
	zip:     asmHelpers{}.zip,
	trPairs: asmHelpers{}.trPairs,
	pays:    sync.OnceValue(dotPaysAVX512),
}

// dotPaysAVX512 times VDPBF16PS against FMA throughput (dotPeakAVX512 and
// fmaPeakAVX512: 16 independent chains, no memory traffic, 2048 iterations
// each, the best of 6 alternated rounds after a warm-up, about 0.2 ms in
// all) and reports whether the dot instruction delivers at least 1.25 times
// the FMA's flops. It does twice an FMA's work, so that holds where it
// issues at 5/8 of the FMA's rate or better: twice the flops on a Zen 4 or
// Zen 5, half on an Emerald Rapids Xeon (measured there: 84 GFLOP/s beside
// 169). The 1.25 keeps a CPU at parity on the widening path, whose bits
// are the F32 path's.
func dotPaysAVX512() bool {
	const n = 2048
	fmaPeakAVX512(n) // warm-up: the first 512-bit instructions can run slower
	dotPeakAVX512(n)
	fma, dot := time.Duration(1<<62), time.Duration(1<<62)
	for range 6 {
		t := time.Now()
		fmaPeakAVX512(n)
		fma = min(fma, time.Since(t))
		t = time.Now()
		dotPeakAVX512(n)
		dot = min(dot, time.Since(t))
	}
	// flops: fma does n*16*16*2 in fma, dot n*16*16*4 in dot.
	return 2*float64(fma) >= 1.25*float64(dot)
}

//go:noescape
func tileRowsBF16(dst *float32, src *uint16, lds int, groups int)

// tileRows is amxImpl.tileRows: it checks the bounds tileRowsBF16 touches.
func tileRows(dst []float32, src []uint16, lds, groups int) {
	if groups <= 0 {
		return
	}
	_ = dst[groups*512-1]
	_ = src[31*lds+32*groups-1]
	tileRowsBF16(&dst[0], &src[0], lds, groups)
}

// amxRun is amxImpl.run: it checks the panels and C and calls amxBF16.
func amxRun(steps int, a, b, c []float32, ldc int, alpha, beta float32, n int) {
	mode := amxMode(steps, a, b, c, ldc, alpha, beta, n)
	amxBF16(steps, &a[0], &b[0], &c[0], ldc, alpha, beta, n, mode)
}

// amxMode checks the panels and C of n tiles for the AMX kernels and
// returns their mode for alpha and beta (see genAMX).
func amxMode(steps int, a, b, c []float32, ldc int, alpha, beta float32, n int) int {
	_ = a[n*32*steps-1]
	_ = b[32*steps-1]
	_ = c[(32*n-1)*ldc+31]
	switch {
	case alpha == 1 && beta == 0:
		return 0
	case alpha == 1 && beta == 1:
		return 1
	}
	return 2
}

// amxRunRound is amxImpl.runRound: amxRun for alpha 1 and beta 0 or 1,
// each tile rounded to bfloat16 into d (rows ldd apart) as it is done.
func amxRunRound(steps int, a, b, c []float32, ldc int, beta float32, n int, d []uint16, ldd int) {
	mode := amxMode(steps, a, b, c, ldc, 1, beta, n)
	_ = d[(32*n-1)*ldd+31]
	amxBF16Round(steps, &a[0], &b[0], &c[0], ldc, 1, beta, n, mode, &d[0], ldd)
}

// amxRunRoundW is amxImpl.runRoundW: amxRunRound into a float32 d, each
// value rounded to bfloat16 and widened back.
func amxRunRoundW(steps int, a, b, c []float32, ldc int, beta float32, n int, d []float32, ldd int) {
	mode := amxMode(steps, a, b, c, ldc, 1, beta, n)
	_ = d[(32*n-1)*ldd+31]
	amxBF16RoundW(steps, &a[0], &b[0], &c[0], ldc, 1, beta, n, mode, &d[0], ldd)
}

func amxTile(steps int, a, b, c []float32, ldc int, alpha, beta float32) {
	amxRun(steps, a, b, c, ldc, alpha, beta, 1)
}

// amxImpl is avx512Impl's variant for two bfloat16 operands on CPUs with
// AMX-BF16 (Sapphire Rapids and later) where the OS lets this process use
// the tile registers (amxPermit, asked at init): a TDPBF16PS multiplies a 16x32 block of
// A by a 32x16 block of B into 16x16 float32 accumulators, 16384 flops an
// instruction, and the 32x32 tile of C is four of them. B is packed as the
// dot kernels' B is (pairs of k, 32 columns), A as rows of pairs. kc = 512
// k values gives 32 KiB A and B micro-panels, as avx512DotImpl's B; mc is
// 16 micro-panels. There are no edge kernels: an edge tile is a full one
// computed into the scratch tile, whose valid part is merged into C, with
// the same bits (see genAMX).
var amxImpl = &impl{
	name: "amx-bf16",
	mr:   32, nr: 32,
	kc: 512, mc: 512, nc: 4096,
	pairs:     true,
	tiles:     true,
	tile:      amxTile,
	run:       amxRun,
	runRound:  amxRunRound,
	runRoundW: amxRunRoundW,
	tileRows:  tileRows,
	zip:       asmHelpers{}.zip,
	trPairs:   asmHelpers{}.trPairs,
	transpose: asmHelpers{}.transpose,
}

func init() {
	// HasAVX2 and HasAVX512F include the OS's consent to save the wider
	// registers; F16C and FMA are checked separately. AVX-512BW is needed
	// only to widen 16 bfloat16 values at once (VPMOVZXWD into Z).
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		impls = append(impls, avx2Impl)
		if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW {
			impls = append(impls, avx512Impl)
			// x/sys reports AVX512_BF16 (CPUID 7.1 EAX bit 5) only
			// where the OS saves the Z registers.
			if cpu.X86.HasAVX512BF16 {
				avx512Impl.dot = avx512DotImpl
			}
			// CPUID's AMX bits say nothing of the OS: amxPermit asks
			// it (one system call, here rather than on first use so
			// that every path to the kernels finds the permission).
			if cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && amxPermit() {
				avx512Impl.dot = amxImpl
			}
		}
	}
	active = impls[len(impls)-1]
}
