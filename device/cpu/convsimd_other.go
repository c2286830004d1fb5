//go:build !amd64 || purego

package cpu

import "github.com/mixprec/mixprec/device"

// Without the amd64 assembly the pooling and im2col loops run in Go.
var simdConvLevel = simdGo

// simdConv is false: conv.go plans no Col2Im register rows.
var simdConv = false

func maxPoolSIMD(y, pos, x *Buffer, p int, s device.PoolShape) bool { return false }

func copyRowsF32SIMD(dst, src []float32, n, rows, ds, ss int) bool        { return false }
func copyRowsU16SIMD(dst, src []uint16, n, rows, ds, ss int) bool         { return false }
func addRowsSIMD(dst, src []float32, off, n, rows, ds, ss int) bool       { return false }
func copyStride2F32SIMD(dst, src []float32, n, rows, ds, ss int) bool     { return false }
func copyStride2U16SIMD(dst, src []uint16, n, rows, ds, ss int) bool      { return false }
func col2imSIMD(dst, col []float32, p *c2iPlan) bool                      { return false }
func maxPoolGradSIMD(dx, dy, pos *Buffer, p int, s device.PoolShape) bool { return false }
