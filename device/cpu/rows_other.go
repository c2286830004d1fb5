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
