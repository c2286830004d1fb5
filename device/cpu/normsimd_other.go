//go:build !amd64 || purego

package cpu

import "unsafe"

// Without the amd64 assembly the batch-norm loops run in Go.
var simdNormLevel = simdGo

func scaleShift32(dst, src *float32, n int, scale, shift float32) { panic("no assembly") }
func sum64AVX512(x *float32, n int) float64                       { panic("no assembly") }
func sumSqDev64AVX512(x *float32, n int, mu float64) float64      { panic("no assembly") }
func bnGradSumsAVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64) {
	panic("no assembly")
}
func bnGradOutAVX512(dst, dy, x *float32, n int, c *bnGradConsts) { panic("no assembly") }

func bnActF32(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int) {
	panic("no assembly")
}
func bnActBF16(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int) {
	panic("no assembly")
}
func bnActGradSumsF32(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64) {
	panic("no assembly")
}
func bnActGradSumsBF16(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64) {
	panic("no assembly")
}
func bnActGradOutF32(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int) {
	panic("no assembly")
}
func bnActGradOutBF16(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int) {
	panic("no assembly")
}
func bnSum64BF16(x *uint16, n int) float64                  { panic("no assembly") }
func bnSumSqDev64BF16(x *uint16, n int, mu float64) float64 { panic("no assembly") }
func addF32(dst, x, y unsafe.Pointer, n int)                { panic("no assembly") }
func addBF16(dst, x, y unsafe.Pointer, n int)               { panic("no assembly") }
func bnActF16(dst, x, res unsafe.Pointer, n int, scale, shift float32, flags int) {
	panic("no assembly")
}
func bnActGradSumsF16(dres, dy, y, x unsafe.Pointer, n int, mu, is float64, flags int) (sdy, sdyx float64) {
	panic("no assembly")
}
func bnActGradOutF16(dst, dy, y, x unsafe.Pointer, n int, c *bnGradConsts, flags int) {
	panic("no assembly")
}
func bnSum64F16(x *uint16, n int) float64                  { panic("no assembly") }
func bnSumSqDev64F16(x *uint16, n int, mu float64) float64 { panic("no assembly") }
func addF16(dst, x, y unsafe.Pointer, n int)               { panic("no assembly") }
