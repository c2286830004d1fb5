//go:build !amd64 || purego

package gemm

import "unsafe"

// directConv is false off amd64: the direct convolution's kernels are
// AVX-512 assembly, and callers take the im2col path instead.
const directConv = false

func convFwd8x48(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func convFwd8x32(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func convFwd8x16(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint64, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad32x12(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad32x8(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad32x4(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad16x16(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad16x8(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad16x4(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvOK() bool { return false }

func amxConvFwd1x1(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvFwd1x2(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvFwd2x1(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvFwd2x2(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvWgrad1(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvWgrad2(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvWgrad3(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int) {
	panic("gemm: direct convolution without its kernels")
}

func amxConvWgrad4(cfg *byte, acc *float32, a *uint16, lda int, offs *int, b *uint32, ldb, nblk, nimg, aImg, bImg, first int) {
	panic("gemm: direct convolution without its kernels")
}

func interleaveRows(dst *uint32, ldd int, a, b *uint16, lds, rows, n int, idx *uint16) {
	panic("gemm: direct convolution without its kernels")
}

func copyRows16(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, n int) {
	panic("gemm: direct convolution without its kernels")
}

func copyRows32(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, n int) {
	panic("gemm: direct convolution without its kernels")
}

func transposeWords(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	transposeGo(dst, ldd, src, lds, rows, cols)
}

func splitRowsF32(dst0, dst1 unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, w int) {
	panic("gemm: direct convolution without its kernels")
}

func splitRows16(dst0, dst1 unsafe.Pointer, ldd int, src unsafe.Pointer, lds, rows, w int) {
	panic("gemm: direct convolution without its kernels")
}

func mergeRowsF32(dst unsafe.Pointer, ldd int, src0, src1 unsafe.Pointer, lds, rows, w int) {
	panic("gemm: direct convolution without its kernels")
}

func mergeRows16(dst unsafe.Pointer, ldd int, src0, src1 unsafe.Pointer, lds, rows, w int) {
	panic("gemm: direct convolution without its kernels")
}
