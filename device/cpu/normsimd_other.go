//go:build !amd64 || purego

package cpu

// Without the amd64 assembly the batch-norm loops run in Go.
var simdNormLevel = simdGo

func scaleShift32(dst, src *float32, n int, scale, shift float32) { panic("no assembly") }
func sum64AVX512(x *float32, n int) float64                       { panic("no assembly") }
func sumSqDev64AVX512(x *float32, n int, mu float64) float64      { panic("no assembly") }
func bnGradSumsAVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64) {
	panic("no assembly")
}
func bnGradOutAVX512(dst, dy, x *float32, n int, c *bnGradConsts) { panic("no assembly") }
