package cpu

// The batch-norm loops: Go versions here, which the AVX-512 versions
// (normsimd_amd64.s) replace where the CPU has it and match bit for bit.
// Sums keep sixteen float64 partial sums, element j in lane j%16, combined
// by lanes16: more accurate than one running sum, and the same bits on
// both paths and whatever the number of goroutines. Products are wrapped
// in float64() so that no compiler fuses them into the following add,
// which the assembly does not do either.

// lanes16 combines sixteen partial sums: lane l with l+8, then the halves
// of what is left, as the assembly's LANESUM16 does.
func lanes16(a *[16]float64) float64 {
	var s [8]float64
	for l := range 8 {
		s[l] = a[l] + a[l+8]
	}
	for l := range 4 {
		s[l] += s[l+4]
	}
	for l := range 2 {
		s[l] += s[l+2]
	}
	return s[0] + s[1]
}

// sum64 is the float64 sum of x.
func sum64(x []float32) float64 {
	if len(x) > 0 && simdNormLevel != simdGo {
		return sum64AVX512(&x[0], len(x))
	}
	var acc [16]float64
	for j, v := range x {
		acc[j%16] += float64(v)
	}
	return lanes16(&acc)
}

// sumSqDev64 is the float64 sum of (x - mu)^2.
func sumSqDev64(x []float32, mu float64) float64 {
	if len(x) > 0 && simdNormLevel != simdGo {
		return sumSqDev64AVX512(&x[0], len(x), mu)
	}
	var acc [16]float64
	for j, v := range x {
		dx := float64(v) - mu
		acc[j%16] += float64(dx * dx)
	}
	return lanes16(&acc)
}

// scaleShift sets dst = src*scale + shift (dst may be src).
func scaleShift(dst, src []float32, scale, shift float32) {
	if len(src) > 0 && simdNormLevel != simdGo {
		_ = dst[len(src)-1]
		scaleShift32(&dst[0], &src[0], len(src), scale, shift)
		return
	}
	for j, v := range src {
		dst[j] = float32(v*scale) + shift
	}
}

// bnGradSums returns BatchNormGrad's sums over a plane: of dy, and of
// dy*(x-mu)*is.
func bnGradSums(dy, x []float32, mu, is float64) (sdy, sdyx float64) {
	if len(dy) > 0 && simdNormLevel != simdGo {
		_ = x[len(dy)-1]
		return bnGradSumsAVX512(&dy[0], &x[0], len(dy), mu, is)
	}
	var a, b [16]float64
	for j, v := range dy {
		a[j%16] += float64(v)
		b[j%16] += float64(float64(float64(v)*(float64(x[j])-mu)) * is)
	}
	return lanes16(&a), lanes16(&b)
}

// bnGradConsts are what bnGradOut needs besides the plane (the assembly
// reads them in this order).
type bnGradConsts struct {
	mu, is, m, sdy, sdyx, k float64
}

// bnGradOut writes BatchNormGrad's dx for a plane:
// k*(m*dy - sdy - xhat*sdyx) with xhat = (x-mu)*is, in float64.
func bnGradOut(dst, dy, x []float32, c *bnGradConsts) {
	if len(dy) > 0 && simdNormLevel != simdGo {
		_, _ = dst[len(dy)-1], x[len(dy)-1]
		bnGradOutAVX512(&dst[0], &dy[0], &x[0], len(dy), c)
		return
	}
	for j, v := range dy {
		xhat := float64((float64(x[j]) - c.mu) * c.is)
		dst[j] = float32(c.k * (float64(c.m*float64(v)) - c.sdy - float64(xhat*c.sdyx)))
	}
}
