//go:build !amd64 || purego

package cpu

var simdRows = simdGo

// addWiden does dst[i] += float64(src[i]) over len(src) elements.
func addWiden(dst []float64, src []float32) {
	dst = dst[:len(src)]
	for j, x := range src {
		dst[j] += float64(x)
	}
}

// sumBlocks is sumBlocksGo: there are no SIMD loops here.
func sumBlocks(src []float32) float64 { return sumBlocksGo(src) }
