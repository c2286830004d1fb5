//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// simdNorm selects the AVX-512 batch-norm loops; tests turn it off to check
// them against the Go loops.
var simdNorm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2

//go:noescape
func scaleShift32(dst, src *float32, n int, scale, shift float32)

//go:noescape
func sum64AVX512(x *float32, n int) float64

//go:noescape
func sumSqDev64AVX512(x *float32, n int, mu float64) float64

//go:noescape
func bnGradSumsAVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64)

//go:noescape
func bnGradOutAVX512(dst, dy, x *float32, n int, c *bnGradConsts)
