package cpu

import "math"

// exp32 is e^x in float32 arithmetic, within two ulps of the rounded true
// value for normal results: the softmax family's exponentials, which
// math.Exp (float64, with its special-case handling) took several times
// longer to compute. x = n·ln2 + r with |r| <= ln2/2, n rounded to
// nearest; e^r is a degree-6 polynomial (the minimax coefficients of
// Cephes' expf) and 2^n is put into the exponent. Results below the
// smallest normal float32 are flushed to zero, as a GPU's fast exp does;
// a softmax loses nothing by it.
func exp32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654:
		return 0
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	t := float32(x * log2e)
	var n float32
	if t >= 0 {
		n = float32(int32(t + 0.5))
	} else {
		n = float32(int32(t - 0.5))
	}
	r := float32(x - float32(n*ln2hi))
	r = float32(r - float32(n*ln2lo))
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	p = float32(float32(p*float32(r*r))+r) + 1
	e := int32(n) + 127 // in [1, 255] given the clamps above
	if e == 255 {       // x just below the largest finite result: 2^128 is not a float32
		return float32(p*2) * math.Float32frombits(254<<23)
	}
	return p * math.Float32frombits(uint32(e)<<23)
}

// expShift sets dst[j] = exp32(src[j] - m) and returns their sum in
// float64. dst may be src.
func expShift(dst, src []float32, m float32) float64 {
	dst = dst[:len(src)]
	if len(src) > 0 && simdTranscend == simdAVX512 {
		return float64(expShiftAVX512(&dst[0], &src[0], len(src), m))
	}
	var s0, s1 float64
	j := 0
	for ; j+1 < len(src); j += 2 {
		a, b := exp32(src[j]-m), exp32(src[j+1]-m)
		dst[j], dst[j+1] = a, b
		s0 += float64(a)
		s1 += float64(b)
	}
	if j < len(src) {
		a := exp32(src[j] - m)
		dst[j] = a
		s0 += float64(a)
	}
	return s0 + s1
}
