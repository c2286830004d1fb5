package dtype

import "math"

// Tolerance returns docs/design.md §6's (atol, rtol) for results stored as d:
// two values agree when |got-want| <= atol + rtol*|want|. F32 (1e-5, 1e-4),
// F16 (1e-3, 1e-2), BF16 (1e-3, 2e-2): each a few units of the dtype's
// rounding, so a result rounded once to d, or accumulated in float32 and
// then rounded, passes, and an op computing something else fails. Every
// test in the module judges results by this one rule; a test that allows
// more says why, with the error it measured.
func Tolerance(d DType) (atol, rtol float64) {
	switch d {
	case F16:
		return 1e-3, 1e-2
	case BF16:
		return 1e-3, 2e-2
	}
	return 1e-5, 1e-4
}

// Close reports whether got is within d's tolerance of want, plus slack (0
// for the plain rule): |got-want| <= atol + rtol*|want| + slack. A NaN
// matches only a NaN, and an infinity only itself.
func Close(d DType, got, want, slack float64) bool {
	atol, rtol := Tolerance(d)
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		return math.IsNaN(want) && math.IsNaN(got)
	case math.IsInf(want, 0) || math.IsInf(got, 0):
		return got == want
	}
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)+slack
}
