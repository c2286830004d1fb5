//go:build !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// simdNormLevel selects the batch-norm loops: AVX-512 (with AVX512DQ and
// BMI2), else AVX2, else Go. Tests lower it to check each against the Go
// loops.
var simdNormLevel = levelOf(cpu.X86.HasAVX2, cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2)

//go:noescape
func bnScaleShiftAVX512(dst, src *float32, n int, scale, shift float32)

//go:noescape
func bnSum64AVX512(x *float32, n int) float64

//go:noescape
func bnSumSqDev64AVX512(x *float32, n int, mu float64) float64

//go:noescape
func bnGradSums64AVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64)

//go:noescape
func bnGradOut32AVX512(dst, dy, x *float32, n int, c *bnGradConsts)

// The AVX2 loops: the same operations in the same order as the Go loops
// (which operand comes first included, as that decides a NaN's payload),
// the tail masked as in the AVX-512 loops.

//go:noescape
func bnScaleShiftAVX2(dst, src *float32, n int, scale, shift float32)

//go:noescape
func bnSum64AVX2(x *float32, n int) float64

//go:noescape
func bnSumSqDev64AVX2(x *float32, n int, mu float64) float64

//go:noescape
func bnGradSums64AVX2(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64)

//go:noescape
func bnGradOut32AVX2(dst, dy, x *float32, n int, c *bnGradConsts)

// normsimd.go calls these five (by the names they had when only the
// AVX-512 loops existed) where simdNormLevel is not simdGo, for n > 0 elements; they
// run the loops of simdNormLevel.

func scaleShift32(dst, src *float32, n int, scale, shift float32) {
	if simdNormLevel == simdAVX512 {
		bnScaleShiftAVX512(dst, src, n, scale, shift)
	} else {
		bnScaleShiftAVX2(dst, src, n, scale, shift)
	}
}

func sum64AVX512(x *float32, n int) float64 {
	if simdNormLevel == simdAVX512 {
		return bnSum64AVX512(x, n)
	}
	return bnSum64AVX2(x, n)
}

func sumSqDev64AVX512(x *float32, n int, mu float64) float64 {
	if simdNormLevel == simdAVX512 {
		return bnSumSqDev64AVX512(x, n, mu)
	}
	return bnSumSqDev64AVX2(x, n, mu)
}

func bnGradSumsAVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64) {
	if simdNormLevel == simdAVX512 {
		return bnGradSums64AVX512(dy, x, n, mu, is)
	}
	return bnGradSums64AVX2(dy, x, n, mu, is)
}

func bnGradOutAVX512(dst, dy, x *float32, n int, c *bnGradConsts) {
	if simdNormLevel == simdAVX512 {
		bnGradOut32AVX512(dst, dy, x, n, c)
	} else {
		bnGradOut32AVX2(dst, dy, x, n, c)
	}
}

// The loops of bnact_amd64.s (see bnact.go).

//go:generate go run bnact_gen.go

//go:noescape
func bnActF32(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int)

//go:noescape
func bnActBF16(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int)

//go:noescape
func bnActGradSumsF32(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64)

//go:noescape
func bnActGradSumsBF16(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64)

//go:noescape
func bnActGradOutF32(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int)

//go:noescape
func bnActGradOutBF16(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int)

//go:noescape
func bnSum64BF16(x *uint16, n int) float64

//go:noescape
func bnSumSqDev64BF16(x *uint16, n int, mu float64) float64

//go:noescape
func addF32(dst, x, y unsafe.Pointer, n int)

//go:noescape
func addBF16(dst, x, y unsafe.Pointer, n int)

//go:noescape
func bnActF16(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int)

//go:noescape
func bnActGradSumsF16(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64)

//go:noescape
func bnActGradOutF16(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int)

//go:noescape
func bnSum64F16(x *uint16, n int) float64

//go:noescape
func bnSumSqDev64F16(x *uint16, n int, mu float64) float64

//go:noescape
func addF16(dst, x, y unsafe.Pointer, n int)
