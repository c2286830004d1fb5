//go:build !amd64 || purego

package cpu

// Without the amd64 assembly the pooling and im2col loops run in Go.
var simdConv = false

func maxPoolSIMD(y, pos, x []float32, w, oh, ow int) bool { return false }
