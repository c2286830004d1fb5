package device

import (
	"math"
	"testing"
)

// checkBreaks checks that good is Valid and that each change in breaks
// makes a copy of it invalid.
func checkBreaks[S interface{ Valid() bool }](t *testing.T, kind string, good S, breaks map[string]func(s *S)) {
	t.Helper()
	if !good.Valid() {
		t.Errorf("%s %+v: Valid() = false", kind, good)
	}
	for name, f := range breaks {
		s := good
		f(&s)
		if s.Valid() {
			t.Errorf("%s with %s: %+v: Valid() = true", kind, name, s)
		}
	}
}

// TestShapesValid checks the geometry every backend's conv and pool
// kernels accept, and that each way of breaking it is caught.
func TestShapesValid(t *testing.T) {
	checkBreaks(t, "conv", NewConvShape(2, 3, 8, 8, 3, 3, 1, 1), map[string]func(s *ConvShape){
		"chunk past N":    func(s *ConvShape) { s.N0, s.NB = 1, 2 },
		"negative N0":     func(s *ConvShape) { s.N0 = -1 },
		"negative NB":     func(s *ConvShape) { s.NB = -1 },
		"zero stride":     func(s *ConvShape) { s.StrideW = 0 },
		"empty output":    func(s *ConvShape) { s.OH = 0 },
		"negative C":      func(s *ConvShape) { s.C = -1 },
		"negative H":      func(s *ConvShape) { s.H = -1 },
		"negative kernel": func(s *ConvShape) { s.KW = -1 },
		"negative pad":    func(s *ConvShape) { s.PadH = -1 },
	})
	checkBreaks(t, "pool", NewPoolShape(2, 3, 8, 8, 2, 2, 0), map[string]func(s *PoolShape){
		"pad over half":  func(s *PoolShape) { s.PadH = 2 },
		"negative pad":   func(s *PoolShape) { s.PadW = -1 },
		"empty window":   func(s *PoolShape) { s.KH = 0 },
		"zero stride":    func(s *PoolShape) { s.StrideH = 0 },
		"empty output":   func(s *PoolShape) { s.OW = 0 },
		"empty input":    func(s *PoolShape) { s.H = 0 },
		"negative N":     func(s *PoolShape) { s.N = -1 },
		"negative C":     func(s *PoolShape) { s.C = -1 },
		"negative width": func(s *PoolShape) { s.W = -3 },
	})
}

// TestAdamScalars checks the per-step constants against their definitions
// at a few steps, and AdamW's decay factor.
func TestAdamScalars(t *testing.T) {
	for _, step := range []int{1, 2, 10, 1000} {
		h := AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, WeightDecay: 0.01, Step: step}
		stepSize, bc2sqrt, decay := h.Scalars()
		b1, b2 := float64(float32(0.9)), float64(float32(0.999))
		wantStep := float64(float32(1e-3)) / (1 - math.Pow(b1, float64(step)))
		wantSqrt := math.Sqrt(1 - math.Pow(b2, float64(step)))
		if math.Abs(float64(stepSize)-wantStep) > 1e-7*wantStep || math.Abs(float64(bc2sqrt)-wantSqrt) > 1e-7*wantSqrt {
			t.Errorf("step %d: stepSize %v, bc2sqrt %v; want %v, %v", step, stepSize, bc2sqrt, wantStep, wantSqrt)
		}
		if want := float32(1) - float32(1e-3)*float32(0.01); decay != want {
			t.Errorf("step %d: decay %v, want %v", step, decay, want)
		}
	}
}
