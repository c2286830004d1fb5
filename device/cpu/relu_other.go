//go:build !amd64 || purego

package cpu

// Without the amd64 assembly the ReLU loops run in Go.
var simdReLU = simdGo

func reluF32SIMD(out, x []float32) int                { return 0 }
func reluGradF32SIMD(out, g, y []float32) int         { return 0 }
func relu16SIMD(out, x []uint16, h half16) int        { return 0 }
func reluGrad16SIMD(out, g, y []uint16, h half16) int { return 0 }
