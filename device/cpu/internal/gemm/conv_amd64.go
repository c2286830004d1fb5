//go:build !purego

package gemm

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// directConv reports whether the direct convolution's kernels run here:
// they are AVX-512 (masked loads and stores).
var directConv = cpu.X86.HasAVX512F

// convFwd8x48, convFwd8x32 and convFwd8x16 compute an 8 x 48, 8 x 32
// and 8 x 16 block of output pixels (see genConvFwd); ymask's bits 16v to
// 16v+15 are vector v's lanes to store.
//
//go:noescape
func convFwd8x48(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32)

//go:noescape
func convFwd8x32(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32)

//go:noescape
func convFwd8x16(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32)

// convWgrad<O>x<C> computes one tap's F32 weight gradient for O output
// channels by C input channels over nimg prepared images (see
// genConvWgradF).
//
//go:noescape
func convWgrad32x12(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)

//go:noescape
func convWgrad32x8(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)

//go:noescape
func convWgrad32x4(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)

//go:noescape
func convWgrad16x16(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)

//go:noescape
func convWgrad16x8(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)

//go:noescape
func convWgrad16x4(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int)

// amxConvOK reports whether the BF16 direct kernels run: AMX-BF16 tiles
// granted by Linux (as for the GEMM's amxImpl), AVX-512BW for the
// conversions around them.
var amxConvOK = sync.OnceValue(func() bool {
	return directConv && cpu.X86.HasAVX512BW && cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && amxPermit()
})

// The BF16 kernels (see genAMXConvFwd, genAMXConvWgrad, genInterleaveRows
// and genCopyRows16).

//go:noescape
func amxConvFwd1x1(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32)

//go:noescape
func amxConvFwd1x2(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32)

//go:noescape
func amxConvFwd2x1(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32)

//go:noescape
func amxConvFwd2x2(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32)

//go:noescape
func amxConvWgrad1(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int)

//go:noescape
func amxConvWgrad2(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int)

//go:noescape
func amxConvWgrad3(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int)

//go:noescape
func amxConvWgrad4(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int)

//go:noescape
func interleaveRows(dst *uint32, ldd int, a, b *uint16, lds, rows, n int, idx *uint16)

//go:noescape
func copyRows16(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, n int)

//go:noescape
func copyRows32(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, n int)

// transposeWords is the packing transpose of 32-bit words for the BF16
// weight gradient's dy (see PrepWeightGradBF16).
func transposeWords(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	asmHelpers{}.transpose(dst, ldd, src, lds, rows, cols)
}

// The phase loops (genSplitRows, genMergeRows).

//go:noescape
func splitRowsF32(dst0, dst1 unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, w int)

//go:noescape
func splitRows16(dst0, dst1 unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, w int)

//go:noescape
func mergeRowsF32(dst unsafe.Pointer, ldd int, src0, src1 unsafe.Pointer, lds, rows, w int)

//go:noescape
func mergeRows16(dst unsafe.Pointer, ldd int, src0, src1 unsafe.Pointer, lds, rows, w int)
