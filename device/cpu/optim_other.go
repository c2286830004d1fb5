//go:build !amd64 || purego

package cpu

// Without the amd64 assembly every optimiser loop runs in Go.
var simdOptim = simdGo

func sgdMomentumSIMD(ps, gs, ms []float32, mom, damp, lr float32) int { return 0 }
func sgdPlainSIMD(ps, gs []float32, lr float32) int                   { return 0 }
func adamSIMD(ps, gs, ms, vs []float32, k *adamConsts) int            { return 0 }
func unscaleSIMD(s []float32, inv float32) (int, bool)                { return 0, false }
