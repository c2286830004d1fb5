//go:build !amd64 || purego

package cpu

var simdTranscend = simdGo

func geluAVX512(dst, src *float32, n int)                        { panic("unreachable") }
func geluGradAVX512(dst, dy, x *float32, n int)                  { panic("unreachable") }
func expShiftAVX512(dst, src *float32, n int, m float32) float32 { panic("unreachable") }

func attnSoftmaxAVX512(p, s *float32, ld, rows, cols, diag int, m, l, corr *float32) {
	panic("unreachable")
}
func attnProbsAVX512(p, s *float32, ld, rows, cols, diag int, lse *float32) { panic("unreachable") }
func attnDSAVX512(ds, p, dp *float32, ld, rows, cols int, di *float32)      { panic("unreachable") }

func lnRowAVX512(y, h, x, w, b *float32, n int, m, is float32) { panic("unreachable") }
func lnGradRowAVX512(dx, dy, h, w *float32, n int, is float32, pw, pb *float32) {
	panic("unreachable")
}

func geluBF16AVX512(dst, src *uint16, n int)       { panic("unreachable") }
func geluGradBF16AVX512(dst, dy, x *uint16, n int) { panic("unreachable") }

func arithAVX512(op int, out, a, b *float32, n int) { panic("unreachable") }
