//go:build !amd64 || purego

package gemm

// directConv is false off amd64: the direct convolution's kernels are
// AVX-512 assembly, and callers take the im2col path instead.
const directConv = false

func convFwd8x32(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint32, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func convFwd8x16(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint32, bias *float32) {
	panic("gemm: direct convolution without its kernels")
}

func convWgrad4x4(out, dy *float32, ldy, ndy int, x *float32, ldx, nx int, ents *convEnt, nent, nimg, dyImg, xImg int) {
	panic("gemm: direct convolution without its kernels")
}
