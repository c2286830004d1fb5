//go:build !amd64 || purego

package gemm

func unscaleSIMD(s []float32, inv float32) (int, bool) { return 0, false }
