package oracle

import "slices"

// MatMul is a @ b for a (..., M, K) and b (..., K, N) with equal leading
// (batch) dimensions.
func MatMul(a, b Array) Array { return BatchMatMul(a, b, false, false) }

// BatchMatMul is op(a) @ op(b) for each leading index, op transposing the
// last two axes where asked: a (..., M, K) or, transposed, (..., K, M); b
// (..., K, N) or (..., N, K); the result (..., M, N).
func BatchMatMul(a, b Array, transA, transB bool) Array {
	r := len(a.Shape) - 2
	need(r >= 0 && len(b.Shape) == len(a.Shape) && slices.Equal(a.Shape[:r], b.Shape[:r]), "BatchMatMul", "shapes %v and %v", a.Shape, b.Shape)
	ar, ac, br, bc := a.Shape[r], a.Shape[r+1], b.Shape[r], b.Shape[r+1]
	m, k := ar, ac
	if transA {
		m, k = ac, ar
	}
	kb, n := br, bc
	if transB {
		kb, n = bc, br
	}
	need(k == kb, "BatchMatMul", "shapes %v and %v (transposed %v, %v) do not multiply", a.Shape, b.Shape, transA, transB)
	out := New(append(slices.Clone(a.Shape[:r]), m, n)...)
	at := func(x Array, base, cols, i, j int, t bool) float64 {
		if t {
			i, j = j, i
		}
		return x.Data[base+i*cols+j]
	}
	for p := range Numel(a.Shape[:r]) {
		for i := range m {
			for j := range n {
				var s float64
				for l := range k {
					s += at(a, p*ar*ac, ac, i, l, transA) * at(b, p*br*bc, bc, l, j, transB)
				}
				out.Data[p*m*n+i*n+j] = s
			}
		}
	}
	return out
}

// biasOf is b's element o, or 0 without a bias (b nil).
func biasOf(b *Array, o int) float64 {
	if b == nil {
		return 0
	}
	return b.Data[o]
}

// Linear is x @ wᵀ + b for x (..., in), w (out, in) and b (out), or
// without a bias when b is nil: PyTorch's layout.
func Linear(x, w Array, b *Array) Array {
	need(len(w.Shape) == 2 && len(x.Shape) >= 1 && x.Shape[len(x.Shape)-1] == w.Shape[1], "Linear", "input %v, weight %v", x.Shape, w.Shape)
	in, outF := w.Shape[1], w.Shape[0]
	rows := len(x.Data) / in
	out := New(append(slices.Clone(x.Shape[:len(x.Shape)-1]), outF)...)
	for r := range rows {
		for o := range outF {
			s := biasOf(b, o)
			for i := range in {
				s += x.Data[r*in+i] * w.Data[o*in+i]
			}
			out.Data[r*outF+o] = s
		}
	}
	return out
}
