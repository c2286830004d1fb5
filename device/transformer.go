package device

import "fmt"

// TransformerKernels are the kernels of sequence models: the embedding
// lookup and its scatter-add adjoint, layer normalisation over the last
// axis, softmax over rows, and fused causal self-attention.
//
// Like every group they take the destination first, read F32, F16 and
// BF16 storage and accumulate in float32; the statistics they hand from
// forward to backward (LayerNorm's 1/std, Attention's row logsumexp) are
// F32 buffers.
type TransformerKernels interface {
	// Embedding gathers rows of a table: dst[i, :] = table[ids[i], :].
	// ids holds exact integers in [0, vocab) (stored in a floating-point
	// buffer, as class labels are); a kernel given another panics.
	// dst (n, dim); table (vocab, dim); ids (n)
	Embedding(dst, table, ids Buffer, n, dim int)
	// EmbeddingGrad is Embedding's adjoint: dtable is overwritten with
	// zeros and then each dy row is added into the row its id names, in
	// order of i, so that repeated ids accumulate and the result does not
	// depend on how the work is shared out. dtable (vocab, dim); dy (n,
	// dim); ids (n)
	EmbeddingGrad(dtable, dy, ids Buffer, n, dim int)

	// Softmax computes dst = exp(src - max) / sum(exp(src - max)) along each
	// row. dst, src (rows, cols)
	Softmax(dst, src Buffer, rows, cols int)
	// SoftmaxGrad computes dst = y * (dy - sum(dy * y)) along each row,
	// where y is Softmax's output. dst, dy, y (rows, cols)
	SoftmaxGrad(dst, dy, y Buffer, rows, cols int)

	// LayerNorm normalises each row of x over its cols elements and applies
	// the affine transform: xhat = (x - mean) * rstd, y = xhat * w + b, with
	// the biased variance and rstd = 1/sqrt(var + eps) computed in float32
	// (or wider). For LayerNormGrad it writes each row's rstd (F32) and,
	// unless xhat is nil (no backward pass), x̂ itself, the float32 value
	// rounded to xhat's dtype, which may be narrower than x's: under
	// autocast a 16-bit x̂ is what the backward pass keeps instead of an F32
	// input. y is computed from the unrounded x̂. b may be nil (no bias).
	// y, xhat, x (rows, cols); w, b (cols); rstd (rows)
	LayerNorm(y, xhat, rstd, x, w, b Buffer, rows, cols int, eps float32)
	// LayerNormGrad computes LayerNorm's gradients from the x̂ and rstd its
	// forward pass wrote: with g = dy * w, dx = rstd * ((g - mean(g)) -
	// xhat * mean(g * xhat)), and dw = sum(dy * xhat) and db = sum(dy)
	// over the rows (cols, F32, overwritten; db nil when there is no bias).
	// dx, dy, xhat (rows, cols); w (cols); rstd (rows)
	LayerNormGrad(dx, dw, db, dy, xhat, rstd, w Buffer, rows, cols int)

	// Attention is scaled dot-product attention on the packed projections
	// of a transformer's attention layer: qkv (B, T, 3, H, D) holds for
	// each position the H heads' queries, then their keys, then their
	// values (the output of one C -> 3C product, C = H*D); y (B, T, H, D)
	// gets each head's softmax(q·kᵀ·Scale, masked when Causal) · v, with
	// dropout applied to the probabilities. The kernel never stores the
	// T x T probabilities: it keeps a float32 running maximum and sum per
	// row as it goes through the keys (online softmax) and writes each
	// row's logsumexp to lse (B, H, T), F32, for AttentionGrad.
	Attention(y, lse, qkv Buffer, p AttentionParams)
	// AttentionGrad computes dqkv (B, T, 3, H, D), overwritten, from dy
	// (B, T, H, D), recomputing the probabilities from qkv and lse instead
	// of reading them; y is Attention's output.
	AttentionGrad(dqkv, dy, qkv, y, lse Buffer, p AttentionParams)
}

// AttentionParams describes a fused attention call.
type AttentionParams struct {
	B, T, H, D int     // batch, sequence length, heads, head size
	Scale      float32 // the logits' factor, usually 1/sqrt(D)
	Causal     bool    // position t attends to positions 0..t only
	// Dropout is the probability of zeroing an attention weight (the rest
	// are scaled by 1/(1-Dropout)). Weight (b, h, i, j) is dropped when
	// Uniform(Key, ((b*H + h)*T + i)*T + j) < Dropout, on every backend,
	// and its recomputation in AttentionGrad finds the same mask.
	Dropout float32
	Key     RandKey
}

// Valid reports whether p describes an attention a kernel can run: positive
// sizes and a dropout probability in [0, 1). A kernel given another panics.
func (p AttentionParams) Valid() bool {
	return p.B > 0 && p.T > 0 && p.H > 0 && p.D > 0 && p.Dropout >= 0 && p.Dropout < 1
}

func (p AttentionParams) String() string {
	return fmt.Sprintf("attention B=%d T=%d H=%d D=%d scale=%g causal=%v dropout=%g", p.B, p.T, p.H, p.D, p.Scale, p.Causal, p.Dropout)
}

// QKV is the number of elements of Attention's qkv, and Out that of y and dy.
func (p AttentionParams) QKV() int { return p.B * p.T * 3 * p.H * p.D }

// Out is the number of elements of Attention's output y (B, T, H, D).
func (p AttentionParams) Out() int { return p.B * p.T * p.H * p.D }

// Rows is the number of elements of Attention's lse (B, H, T).
func (p AttentionParams) Rows() int { return p.B * p.H * p.T }

// DropIndex is the counter of attention weight (bh, i, j), bh = b*H + h, in
// the dropout mask's random stream.
func (p AttentionParams) DropIndex(bh, i, j int) uint64 {
	return uint64((bh*p.T+i)*p.T + j)
}
