//go:build !purego

package gemm

import "golang.org/x/sys/cpu"

// directConv reports whether the direct convolution's kernels run here:
// they are AVX-512 (masked loads and stores).
var directConv = cpu.X86.HasAVX512F

// convFwd8x32 and convFwd8x16 compute an 8 x 32 and an 8 x 16 block of
// output pixels (see genConvFwd); ymask's low 16 bits are the first
// vector's lanes to store, the high 16 the second's.
//
//go:noescape
func convFwd8x32(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint32, bias *float32)

//go:noescape
func convFwd8x16(w, src *float32, taps *convTap, ntaps, nc, plane int, y *float32, ldy, rows int, ymask uint32, bias *float32)

// convWgrad4x4 computes one tap's weight gradient for 4 x 4 (output,
// input) channels over nimg images into out (see genConvWgrad).
//
//go:noescape
func convWgrad4x4(out, dy *float32, ldy, ndy int, x *float32, ldx, nx int, ents *convEnt, nent, nimg, dyImg, xImg int)
