//go:build !amd64 || purego

package cpu

var simdTranscend = simdGo

func geluAVX512(dst, src *float32, n int)                        { panic("unreachable") }
func geluGradAVX512(dst, dy, x *float32, n int)                  { panic("unreachable") }
func expShiftAVX512(dst, src *float32, n int, m float32) float32 { panic("unreachable") }
