package autograd

import (
	"fmt"
	"math"
	"slices"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// The operations of transformers: embedding lookup, layer normalisation,
// softmax, batched products with transposed operands, permutations and
// splits of axes, and fused causal self-attention. The fused ops run
// device.TransformerKernels; the rest compose kernels of other groups.

// InputIDs copies token ids onto the graph's device as a leaf of the given
// shape (default (len(ids))) that does not require grad: exact integers in
// an F32 tensor, as the embedding kernels read them (and class labels are
// stored), which holds ids below 2^24.
func (g *Graph) InputIDs(ids []int32, shape ...int) *Var {
	if shape == nil {
		shape = []int{len(ids)}
	}
	h := tensor.Host{Shape: shape, Data: make([]float32, len(ids))}
	for i, id := range ids {
		if id < 0 || id >= 1<<24 {
			panic(fmt.Sprintf("autograd.InputIDs: id %d at %d is outside [0, 2^24)", id, i))
		}
		h.Data[i] = float32(id)
	}
	return g.Input(h)
}

// Embedding returns the rows of table (vocab, dim) that ids (an F32 Var of
// exact integers in [0, vocab), see InputIDs) name, shaped (ids' shape...,
// dim). Its gradient adds each output row's gradient into the table row it
// came from, so repeated ids accumulate. It runs in the table's dtype (an
// F32 parameter stays F32 under autocast, as in PyTorch).
func (g *Graph) Embedding(table0, ids *Var) *Var {
	dt := g.computeType(OpEmbedding, table0)
	table := g.as(table0, dt)
	ids.mustLive("Embedding")
	ts := table.Shape()
	if len(ts) != 2 || ids.DType() != dtype.F32 {
		panic(fmt.Sprintf("autograd.Embedding: table %v, ids %v %v; want (vocab, dim) and F32 ids", ts, ids.Shape(), ids.DType()))
	}
	dim, n := ts[1], ids.Value.Numel()
	var space [8]int
	y := g.alloc(dt, append(append(space[:0], ids.Shape()...), dim)...)
	g.dev.Embedding(y.Buffer(), buf(table), buf(ids), n, dim)
	out := g.result(y)
	if g.recording(table) {
		g.save(ids.Value)
		g.push(OpEmbedding, out, []*Var{table}, func(dy *tensor.Tensor) {
			dtab := g.alloc(table.DType(), ts...)
			g.dev.EmbeddingGrad(dtab.Buffer(), dy.Buffer(), buf(ids), n, dim)
			g.accum(table, dtab)
		})
	}
	return out
}

// LayerNorm normalises x over its last axis and applies w and b (that
// axis's length; b may be nil): (x - mean)/sqrt(var + eps)·w + b, with the
// biased variance, as torch.nn.LayerNorm. Statistics are F32; under
// autocast the op runs in F32 (PyTorch's list), so a 16-bit x is widened.
//
// For its backward pass it keeps the normalised input x̂ = (x -
// mean)/sqrt(var + eps) and the F32 1/sqrt(var + eps), not x, so that x
// (in a transformer, the residual stream) is not kept alive by it. This is
// apex's memory-efficient LayerNorm, except that x̂ itself is kept rather
// than recovered from the output by dividing by w. In F32 that is the same
// bytes and the same gradient, bit for bit; see LayerNormTo for autocast.
func (g *Graph) LayerNorm(x0, w0, b0 *Var, eps float32) *Var {
	return g.LayerNormTo(x0, w0, b0, eps, g.computeType(OpLayerNorm, x0, w0, b0))
}

// LayerNormTo is LayerNorm with its result rounded once to dtype out as it
// is stored: for a LayerNorm whose output goes to an op that computes in
// out (a Linear under autocast, see OpDType), the bits of LayerNorm followed
// by that op's cast, without the F32 output and the cast's pass. Its
// gradient then arrives in out, as the cast's backward would widen it.
//
// When out is 16-bit, x̂ is kept in out too: half the bytes of an F32 x̂,
// at the cost of x̂'s rounding to out in the gradient (a relative 2^-8 in
// BF16, of the order of the rounding the output itself already had).
func (g *Graph) LayerNormTo(x0, w0, b0 *Var, eps float32, yt dtype.DType) *Var {
	dt := g.computeType(OpLayerNorm, x0, w0, b0)
	x, w, b := g.as(x0, dt), g.as(w0, dt), g.as(b0, dt)
	xs := x.Shape()
	rows, cols := rowsCols(xs)
	if len(xs) == 0 || !slices.Equal(w.Shape(), []int{cols}) || (b != nil && !slices.Equal(b.Shape(), []int{cols})) {
		var bs []int
		if b != nil {
			bs = b.Shape()
		}
		panic(fmt.Sprintf("autograd.LayerNorm: input %v, weight %v, bias %v; want (..., C), (C), (C)", xs, w.Shape(), bs))
	}
	rec := g.recording(x, w, b)
	rstd := g.alloc(dtype.F32, rows)
	var xhat *tensor.Tensor
	var hb, bb device.Buffer
	if rec {
		ht := dt
		if yt.Size() == 2 {
			ht = yt
		}
		xhat = g.alloc(ht, xs...)
		hb = xhat.Buffer()
	}
	y := g.alloc(yt, xs...)
	if b != nil {
		bb = buf(b)
	}
	g.dev.LayerNorm(y.Buffer(), hb, rstd.Buffer(), buf(x), buf(w), bb, rows, cols, eps)
	out := g.result(y)
	if !rec {
		rstd.Release()
		return out
	}
	g.saveOwn(xhat, rstd)
	g.push(OpLayerNorm, out, []*Var{x, w, b}, func(dy *tensor.Tensor) {
		dx := g.alloc(dt, xs...)
		dw := g.alloc(dtype.F32, cols)
		var db *tensor.Tensor
		var dbb device.Buffer
		if b != nil {
			db = g.alloc(dtype.F32, cols)
			dbb = db.Buffer()
		}
		g.dev.LayerNormGrad(dx.Buffer(), dw.Buffer(), dbb, dy.Buffer(), xhat.Buffer(), rstd.Buffer(), buf(w), rows, cols)
		g.accum(x, dx)
		g.accum(w, dw)
		if b != nil {
			g.accum(b, db)
		}
	})
	return out
}

// Softmax returns exp(x)/sum(exp(x)) along the last axis (in F32 under
// autocast).
func (g *Graph) Softmax(x0 *Var) *Var {
	dt := g.computeType(OpSoftmax, x0)
	x := g.as(x0, dt)
	rows, cols := rowsCols(x.Shape())
	y := g.alloc(dt, x.Shape()...)
	g.dev.Softmax(y.Buffer(), buf(x), rows, cols)
	out := g.result(y)
	if g.recording(x) {
		g.save(y)
		g.push(OpSoftmax, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, x.Shape()...)
			g.dev.SoftmaxGrad(dx.Buffer(), dy.Buffer(), y.Buffer(), rows, cols)
			g.accum(x, dx)
		})
	}
	return out
}

// Transpose says which operands of a product are transposed.
type Transpose uint8

const (
	// NN multiplies a by b.
	NN Transpose = iota
	// NT multiplies a by bᵀ.
	NT
	// TN multiplies aᵀ by b.
	TN
	// TT multiplies aᵀ by bᵀ.
	TT
)

func (t Transpose) a() bool { return t == TN || t == TT }
func (t Transpose) b() bool { return t == NT || t == TT }

// BatchMatMul returns op(a) @ op(b) for each of the leading (batch) indices
// of a and b, which must agree: a (..., M, K) or, transposed, (..., K, M);
// b (..., K, N) or (..., N, K); the result (..., M, N). Under autocast it
// runs in the low dtype (PyTorch's bmm).
func (g *Graph) BatchMatMul(a0, b0 *Var, t Transpose) *Var {
	dt := g.computeType(OpBMM, a0, b0)
	a, b := g.as(a0, dt), g.as(b0, dt)
	as, bs := a.Shape(), b.Shape()
	if len(as) < 2 || len(as) != len(bs) || !slices.Equal(as[:len(as)-2], bs[:len(bs)-2]) {
		panic(fmt.Sprintf("autograd.BatchMatMul: shapes %v and %v; want (..., M, K) and (..., K, N) with equal batch dimensions", as, bs))
	}
	r := len(as) - 2
	m, ka := as[r], as[r+1]
	if t.a() {
		m, ka = ka, m
	}
	kb, n := bs[r], bs[r+1]
	if t.b() {
		kb, n = n, kb
	}
	if ka != kb {
		panic(fmt.Sprintf("autograd.BatchMatMul: shapes %v and %v (%v) do not multiply", as, bs, t))
	}
	k := ka
	batch := tensor.Numel(as[:r])
	outShape := append(slices.Clone(as[:r]), m, n)
	y := g.alloc(dt, outShape...)
	g.dev.Gemm(y.Buffer(), buf(a), buf(b), batched(batch, t.a(), t.b(), m, n, k, m*k, k*n, m*n))
	out := g.result(y)
	if g.recording(a, b) {
		g.save(a.Value, b.Value)
		g.push(OpBMM, out, []*Var{a, b}, func(dy *tensor.Tensor) {
			if a.requiresGrad {
				// a (M,K): da = dy op(b)ᵀ; aᵀ stored (K,M): da = op(b) dyᵀ.
				da := g.alloc(dt, as...)
				if t.a() {
					g.dev.Gemm(da.Buffer(), buf(b), dy.Buffer(), batched(batch, t.b(), true, k, m, n, k*n, m*n, m*k))
				} else {
					g.dev.Gemm(da.Buffer(), dy.Buffer(), buf(b), batched(batch, false, !t.b(), m, k, n, m*n, k*n, m*k))
				}
				g.accum(a, da)
			}
			if b.requiresGrad {
				// b (K,N): db = op(a)ᵀ dy; bᵀ stored (N,K): db = dyᵀ op(a).
				db := g.alloc(dt, bs...)
				if t.b() {
					g.dev.Gemm(db.Buffer(), dy.Buffer(), buf(a), batched(batch, true, t.a(), n, k, m, m*n, m*k, k*n))
				} else {
					g.dev.Gemm(db.Buffer(), buf(a), dy.Buffer(), batched(batch, !t.a(), false, k, n, m, m*k, m*n, k*n))
				}
				g.accum(b, db)
			}
		})
	}
	return out
}

func (t Transpose) String() string {
	return [...]string{"NN", "NT", "TN", "TT"}[t]
}

// Permute returns x with its axes reordered: axis i of the result is axis
// perm[i] of x (torch.permute), as a contiguous copy.
func (g *Graph) Permute(x *Var, perm ...int) *Var {
	x.mustLive("Permute")
	xs := x.Shape()
	if len(perm) != len(xs) {
		panic(fmt.Sprintf("autograd.Permute: %d axes for shape %v", len(perm), xs))
	}
	seen := make([]bool, len(xs))
	for _, p := range perm {
		if p < 0 || p >= len(xs) || seen[p] {
			panic(fmt.Sprintf("autograd.Permute: %v is not a permutation of the axes of %v", perm, xs))
		}
		seen[p] = true
	}
	st := device.ContiguousStrides(xs)
	shape, strides := make([]int, len(xs)), make([]int, len(xs))
	inv := make([]int, len(xs))
	for i, p := range perm {
		shape[i], strides[i] = xs[p], st[p]
		inv[p] = i
	}
	y := g.alloc(x.DType(), shape...)
	g.dev.Expand(y.Buffer(), buf(x), device.Strides{Shape: shape, A: strides}, 1)
	out := g.result(y)
	if g.recording(x) {
		yst := device.ContiguousStrides(shape)
		back := make([]int, len(xs))
		for i := range xs {
			back[i] = yst[inv[i]]
		}
		g.push(OpPermute, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dy.DType(), xs...)
			g.dev.Expand(dx.Buffer(), dy.Buffer(), device.Strides{Shape: xs, A: back}, 1)
			g.accum(x, dx)
		})
	}
	return out
}

// Chunk splits x along its first axis into n equal parts (torch.chunk with
// equal sizes), each a contiguous copy.
func (g *Graph) Chunk(x *Var, n int) []*Var {
	x.mustLive("Chunk")
	xs := x.Shape()
	if len(xs) == 0 || n <= 0 || xs[0]%n != 0 {
		panic(fmt.Sprintf("autograd.Chunk: %v into %d parts; want a first axis divisible by the count", xs, n))
	}
	part := slices.Clone(xs)
	part[0] /= n
	size := tensor.Numel(part)
	outs := make([]*Var, n)
	for i := range outs {
		y := g.alloc(x.DType(), part...)
		g.dev.Copy(y.Buffer(), 0, buf(x), i*size, size)
		outs[i] = g.result(y)
	}
	if g.recording(x) {
		g.pushMulti(OpSplit, outs, []*Var{x}, func(dys []*tensor.Tensor) {
			dx := g.alloc(x.DType(), xs...)
			if slices.Contains(dys, nil) {
				g.dev.Fill(dx.Buffer(), 0) // a part no gradient reached
			}
			for i, dy := range dys {
				if dy != nil {
					g.dev.Copy(dx.Buffer(), i*size, dy.Buffer(), 0, size)
				}
			}
			g.accum(x, dx)
		})
	}
	return outs
}

// Attention configures a fused attention op.
type Attention struct {
	Heads  int
	Causal bool
	// Dropout is the probability of dropping an attention weight; its
	// mask comes from RNG through the graph, so a checkpointed segment's
	// recomputation draws the same one.
	Dropout float32
	RNG     *RNG
	// Scale multiplies the logits; 0 means 1/sqrt(head size).
	Scale float32
}

// Attention is multi-head scaled dot-product attention on packed
// projections: qkv (B, T, 3C) holds each position's queries, keys and
// values (C each, C = Heads × head size, heads side by side, as one
// C -> 3C Linear makes them); the result is (B, T, C), the heads side by
// side again. The softmax keeps float32 statistics and the T x T weights
// are never stored (device.TransformerKernels.Attention): backward
// recomputes them. Under autocast it runs in the low dtype, as PyTorch's
// scaled_dot_product_attention.
func (g *Graph) Attention(qkv0 *Var, a Attention) *Var {
	dt := g.computeType(OpAttention, qkv0)
	qkv := g.as(qkv0, dt)
	qs := qkv.Shape()
	if len(qs) != 3 || a.Heads <= 0 || qs[2]%(3*a.Heads) != 0 {
		panic(fmt.Sprintf("autograd.Attention: qkv %v with %d heads; want (B, T, 3C) with C divisible by the heads", qs, a.Heads))
	}
	if a.Dropout < 0 || a.Dropout >= 1 || (a.Dropout > 0 && a.RNG == nil) {
		panic(fmt.Sprintf("autograd.Attention: dropout %v (RNG %v); want [0, 1) and an RNG when positive", a.Dropout, a.RNG != nil))
	}
	c := qs[2] / 3
	p := device.AttentionParams{B: qs[0], T: qs[1], H: a.Heads, D: c / a.Heads, Scale: a.Scale, Causal: a.Causal, Dropout: a.Dropout}
	if p.Scale == 0 {
		p.Scale = float32(1 / math.Sqrt(float64(p.D)))
	}
	if p.Dropout > 0 {
		p.Key = g.Draw(a.RNG, p.B*p.H*p.T*p.T)
	}
	y := g.alloc(dt, qs[0], qs[1], c)
	lse := g.alloc(dtype.F32, p.B, p.H, p.T)
	g.dev.Attention(y.Buffer(), lse.Buffer(), buf(qkv), p)
	out := g.result(y)
	if g.recording(qkv) {
		g.save(qkv.Value, y)
		g.saveOwn(lse)
		g.push(OpAttention, out, []*Var{qkv}, func(dy *tensor.Tensor) {
			dq := g.alloc(dt, qs...)
			g.dev.AttentionGrad(dq.Buffer(), dy.Buffer(), buf(qkv), y.Buffer(), lse.Buffer(), p)
			g.accum(qkv, dq)
		})
	} else {
		lse.Release()
	}
	return out
}

// AttentionComposed is Attention written out in the graph's primitive
// operations, as a framework without a fused kernel would run it: the heads
// are split out of qkv by a permutation, the T x T logits of every head are
// a batched product, masked by adding -Inf above the diagonal, then
// softmax, dropout (the same mask as Attention's for the same RNG state)
// and a second product, and the heads are put back side by side. It stores
// the T x T weights for backward; it is the reference the fused op is
// tested against.
func (g *Graph) AttentionComposed(qkv *Var, a Attention) *Var {
	qs := qkv.Shape()
	if len(qs) != 3 || a.Heads <= 0 || qs[2]%(3*a.Heads) != 0 {
		panic(fmt.Sprintf("autograd.AttentionComposed: qkv %v with %d heads; want (B, T, 3C) with C divisible by the heads", qs, a.Heads))
	}
	b, t, c := qs[0], qs[1], qs[2]/3
	h, d := a.Heads, c/a.Heads
	scale := a.Scale
	if scale == 0 {
		scale = float32(1 / math.Sqrt(float64(d)))
	}
	// (B, T, 3, H, D) -> (3, B, H, T, D) -> q, k, v (B·H, T, D)
	parts := g.Chunk(g.Permute(g.Reshape(qkv, b, t, 3, h, d), 2, 0, 3, 1, 4), 3)
	q, k, v := g.Reshape(parts[0], b*h, t, d), g.Reshape(parts[1], b*h, t, d), g.Reshape(parts[2], b*h, t, d)
	s := g.Scale(g.BatchMatMul(q, k, NT), scale)
	if a.Causal {
		mask := tensor.NewHost(t, t)
		for i := range t {
			for j := i + 1; j < t; j++ {
				mask.Data[i*t+j] = float32(math.Inf(-1))
			}
		}
		s = g.Add(s, g.Input(mask))
	}
	p := g.Softmax(s)
	if a.Dropout > 0 {
		p = g.Dropout(p, a.Dropout, a.RNG)
	}
	y := g.BatchMatMul(p, v, NN) // (B·H, T, D)
	return g.Reshape(g.Permute(g.Reshape(y, b, h, t, d), 0, 2, 1, 3), b, t, c)
}
