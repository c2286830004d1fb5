package gemm

// Unscale multiplies s by inv in place and reports whether any product is
// Inf or NaN: the loss scaler's unscaling of a gradient. The SIMD loops
// (UnscaleAVX512, UnscaleAVX2) and the Go tail perform the same single
// multiply per element, so the bits do not depend on which ran.
func Unscale(s []float32, inv float32) (nonFinite bool) {
	done, nf := unscaleSIMD(s, inv)
	for i, v := range s[done:] {
		v *= inv
		s[done+i] = v
		if v-v != 0 { // NaN for Inf and NaN alike
			nf = true
		}
	}
	return nf
}

// unscale multiplies rows x cols of the 16-bit C stored widened in F32,
// from offset at, by Out16.Unscale when it is set (a store that no
// unscaling kernel made), and reports whether any product is Inf or NaN.
func (j *job) unscale(at, rows, cols int) bool {
	inv := j.out.Unscale
	if inv == 0 {
		return false
	}
	nf := false
	for i := range rows {
		nf = Unscale(j.out.F32[at+i*j.out.LD:at+i*j.out.LD+cols], inv) || nf
	}
	return nf
}
