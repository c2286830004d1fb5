//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdTranscend selects the exponential and GELU loops: AVX-512 (with
// AVX512DQ, for VRNDSCALEPS's full form, and BMI2 for the tail mask), else
// the Go loops. Tests lower it to compare the two.
var simdTranscend = levelOf(false, cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2)

//go:noescape
func geluAVX512(dst, src *float32, n int)

//go:noescape
func geluGradAVX512(dst, dy, x *float32, n int)

//go:noescape
func expShiftAVX512(dst, src *float32, n int, m float32) float32

//go:noescape
func attnSoftmaxAVX512(p, s *float32, ld, rows, cols, diag int, m, l, corr *float32)

//go:noescape
func attnProbsAVX512(p, s *float32, ld, rows, cols, diag int, lse *float32)

//go:noescape
func attnDSAVX512(ds, p, dp *float32, ld, rows, cols int, di *float32)

//go:noescape
func lnRowAVX512(y, h, x, w, b *float32, n int, m, is float32)

//go:noescape
func lnGradRowAVX512(dx, dy, h, w *float32, n int, is float32, pw, pb *float32)

//go:noescape
func geluBF16AVX512(dst, src *uint16, n int)

//go:noescape
func geluGradBF16AVX512(dst, dy, x *uint16, n int)

//go:noescape
func arithAVX512(op int, out, a, b *float32, n int)
