package dtype

import (
	"math"
	"testing"
)

// TestClose checks the rule at its edges: just inside and just outside
// atol + rtol*|want| for each dtype, the slack, and NaN and infinities.
func TestClose(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	cases := []struct {
		name             string
		dt               DType
		got, want, slack float64
		close            bool
	}{
		{"f32 inside", F32, 1 + 1.09e-4, 1, 0, true},
		{"f32 outside", F32, 1 + 1.11e-4, 1, 0, false},
		{"f32 near zero", F32, 9e-6, 0, 0, true},
		{"f16 inside", F16, 100.9, 100, 0, true},
		{"f16 outside", F16, 101.1, 100, 0, false},
		{"bf16 inside", BF16, -102, -100, 0, true},
		{"bf16 outside", BF16, -102.1, -100, 0, false},
		{"slack widens", F32, 1.5, 1, 0.5, true},
		{"nan matches nan", F32, nan, nan, 0, true},
		{"nan is not a number", F32, nan, 1, 1e9, false},
		{"a number is not nan", F32, 1, nan, 1e9, false},
		{"inf matches itself", F16, inf, inf, 0, true},
		{"inf is not -inf", F16, inf, -inf, 0, false},
		{"inf is not large", BF16, inf, 3e38, 1e40, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Close(c.dt, c.got, c.want, c.slack); got != c.close {
				t.Errorf("Close(%v, %v, %v, %v) = %v, want %v", c.dt, c.got, c.want, c.slack, got, c.close)
			}
		})
	}
}
