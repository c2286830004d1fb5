package nn

import (
	"fmt"
	"math/rand/v2"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/tensor"
)

// The layers of a GPT-style transformer. Their children and parameters
// carry PyTorch's attribute names (ln_1, attn.c_attn, mlp.c_fc, ...), so
// State paths are those of the equivalent torch.nn model's state_dict.

// Labelled is a Container whose children have names of their own, as a
// PyTorch module's attributes do: State, RNGs and the weight files use
// them in paths ("attn.c_proj.weight") instead of indices.
type Labelled interface {
	Container
	// ChildNames names Children, one each, in the same order.
	ChildNames() []string
}

// childPrefix is the path prefix of child i of c under prefix.
func childPrefix(prefix string, c Container, i int) string {
	if l, ok := c.(Labelled); ok {
		return prefix + l.ChildNames()[i] + "."
	}
	return fmt.Sprintf("%s%d.", prefix, i)
}

// Embedding is a lookup table of Num vectors of size Dim (torch.nn.Embedding).
// Its input is a Var of token ids (autograd.Graph.InputIDs).
type Embedding struct {
	W        *autograd.Var
	Num, Dim int
}

// NewEmbedding makes an Embedding with PyTorch's default initialisation,
// N(0, 1).
func NewEmbedding(num, dim int, rng *rand.Rand) *Embedding {
	if num <= 0 || dim <= 0 {
		panic(fmt.Sprintf("nn.NewEmbedding: %d vectors of size %d", num, dim))
	}
	return &Embedding{W: autograd.NewParam("weight", tensor.NormalHost(rng, 0, 1, num, dim)), Num: num, Dim: dim}
}

// Forward returns the rows of W that ids name, shaped (ids' shape..., Dim).
func (e *Embedding) Forward(g *autograd.Graph, ids *autograd.Var) *autograd.Var {
	return g.Embedding(e.W, ids)
}

// Params is W.
func (e *Embedding) Params() []*autograd.Var { return []*autograd.Var{e.W} }

func (e *Embedding) String() string { return fmt.Sprintf("Embedding(%d, %d)", e.Num, e.Dim) }

// LayerNorm normalises over the last axis of size Dim with a learned scale
// and, optionally, shift (torch.nn.LayerNorm; bias=False as in nanoGPT's
// LayerNorm class).
type LayerNorm struct {
	W, B *autograd.Var // B nil without bias
	Dim  int
	Eps  float32
}

// NewLayerNorm makes a LayerNorm with weight 1, bias 0 and eps 1e-5,
// PyTorch's defaults. It takes the option Bias (default on; nanoGPT's
// models may have none).
func NewLayerNorm(dim int, opts ...Option) *LayerNorm {
	bias := configure("nn.NewLayerNorm", layerConfig{bias: true}, []string{"Bias"}, opts).bias
	if dim <= 0 {
		panic(fmt.Sprintf("nn.NewLayerNorm: size %d", dim))
	}
	l := &LayerNorm{Dim: dim, Eps: 1e-5}
	ones := tensor.NewHost(dim)
	for i := range ones.Data {
		ones.Data[i] = 1
	}
	l.W = autograd.NewParam("weight", ones)
	if bias {
		l.B = autograd.NewParam("bias", tensor.NewHost(dim))
	}
	return l
}

// Forward normalises x (..., Dim).
func (l *LayerNorm) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return g.LayerNorm(x, l.W, l.B, l.Eps)
}

// ForwardFor normalises x for an op that takes the result next (a Linear):
// under autocast the result is stored in that op's dtype (the same bits as
// its own cast, without it; autograd.Graph.LayerNormTo).
func (l *LayerNorm) ForwardFor(g *autograd.Graph, x *autograd.Var, next autograd.Op) *autograd.Var {
	return g.LayerNormTo(x, l.W, l.B, l.Eps, g.OpDType(next, x.DType(), l.W.DType()))
}

// Params are W and, if present, B.
func (l *LayerNorm) Params() []*autograd.Var {
	if l.B == nil {
		return []*autograd.Var{l.W}
	}
	return []*autograd.Var{l.W, l.B}
}

func (l *LayerNorm) String() string {
	return fmt.Sprintf("LayerNorm(%d, bias=%v)", l.Dim, l.B != nil)
}

// CausalSelfAttention is a GPT's attention layer: one C -> 3C projection to
// queries, keys and values (c_attn), causal multi-head attention with
// dropout on its weights (autograd.Graph.Attention, fused), an output
// projection (c_proj) and dropout on the result.
type CausalSelfAttention struct {
	CAttn, CProj *Linear
	Heads        int
	AttnDrop     *Dropout // on the attention weights
	ResidDrop    *Dropout // on the output
	// Composed runs the attention as separate operations
	// (autograd.Graph.AttentionComposed) instead of the fused kernel: the
	// reference, and a way to measure what fusing buys.
	Composed bool
}

// Forward attends over x (B, T, C).
func (a *CausalSelfAttention) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	qkv := a.CAttn.Forward(g, x)
	att := autograd.Attention{Heads: a.Heads, Causal: true}
	if a.AttnDrop.training && a.AttnDrop.P > 0 {
		att.Dropout, att.RNG = a.AttnDrop.P, a.AttnDrop.RNG
	}
	var y *autograd.Var
	if a.Composed {
		y = g.AttentionComposed(qkv, att)
	} else {
		y = g.Attention(qkv, att)
	}
	y = handOn(g, qkv, y)
	proj := handOn(g, y, a.CProj.Forward(g, y))
	return handOn(g, proj, a.ResidDrop.Forward(g, proj))
}

// handOn returns y, what a layer made of x, after freeing x (Graph.Free)
// when y is not x itself (a Dropout that is off hands its input on): x was
// made for that layer alone. If the layer kept it for its gradient, it
// goes once the backward pass has used it.
func handOn(g *autograd.Graph, x, y *autograd.Var) *autograd.Var {
	if y != x {
		g.Free(x)
	}
	return y
}

// Params are c_attn's then c_proj's.
func (a *CausalSelfAttention) Params() []*autograd.Var {
	return append(a.CAttn.Params(), a.CProj.Params()...)
}

// Children are the projections and the dropouts.
func (a *CausalSelfAttention) Children() []Module {
	return []Module{a.CAttn, a.CProj, a.AttnDrop, a.ResidDrop}
}

// ChildNames are PyTorch's attribute names.
func (a *CausalSelfAttention) ChildNames() []string {
	return []string{"c_attn", "c_proj", "attn_dropout", "resid_dropout"}
}

// MLP is a transformer block's feed-forward layer: C -> 4C (c_fc), GELU
// (exact, or tanh-approximated), 4C -> C (c_proj), dropout.
type MLP struct {
	CFc, CProj *Linear
	Act        Module
	Drop       *Dropout
}

// Forward applies the MLP to x (..., C).
func (m *MLP) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	// Each result goes once the next exists or, kept for a gradient (GELU
	// keeps its input, c_proj its), once the backward pass is done with it.
	h := m.CFc.Forward(g, x)
	a := handOn(g, h, m.Act.Forward(g, h))
	p := handOn(g, a, m.CProj.Forward(g, a))
	return handOn(g, p, m.Drop.Forward(g, p))
}

// Params are c_fc's then c_proj's.
func (m *MLP) Params() []*autograd.Var { return append(m.CFc.Params(), m.CProj.Params()...) }

// Children are the layers.
func (m *MLP) Children() []Module { return []Module{m.CFc, m.Act, m.CProj, m.Drop} }

// ChildNames are PyTorch's attribute names.
func (m *MLP) ChildNames() []string { return []string{"c_fc", "gelu", "c_proj", "dropout"} }

// Block is a pre-norm transformer block: x + attn(ln_1(x)), then
// x + mlp(ln_2(x)).
type Block struct {
	Ln1  *LayerNorm
	Attn *CausalSelfAttention
	Ln2  *LayerNorm
	MLP  *MLP
}

// Forward applies the block to x (B, T, C): its two halves in turn. The
// branches' outputs are freed once added into the residual stream, and the
// first sum once the second exists: a residual add keeps nothing for its
// gradient, so they are dead (and ln_2 keeps its normalised input, not the
// sum). The LayerNorms' outputs, which the projections keep, go once the
// backward pass has used them.
func (b *Block) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	x1 := residual(g, x, b.Ln1, b.Attn)
	x2 := residual(g, x1, b.Ln2, b.MLP)
	g.Free(x1)
	return x2
}

// residual is x + branch(ln(x)), the branch's output freed once added; x
// is the caller's to free.
func residual(g *autograd.Graph, x *autograd.Var, ln *LayerNorm, branch Module) *autograd.Var {
	n := ln.ForwardFor(g, x, autograd.OpLinear)
	r := handOn(g, n, branch.Forward(g, n))
	out := g.Add(x, r)
	g.Free(r)
	return out
}

// Halves are the block's residual halves as modules, x + attn(ln_1(x))
// and x + mlp(ln_2(x)): applied in turn they are Forward. As units of a
// chain they let a planner recompute one half without the other
// (selective recomputation: attention's activations cost the most per
// FLOP of recomputation, or the MLP's four-times-wide ones may).
func (b *Block) Halves() [2]Module {
	return [2]Module{half{b.Ln1, b.Attn, "ln_1 + attn"}, half{b.Ln2, b.MLP, "ln_2 + mlp"}}
}

// half is one of a Block's residual halves: x + branch(ln(x)).
type half struct {
	ln     *LayerNorm
	branch Module
	name   string
}

func (h half) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return residual(g, x, h.ln, h.branch)
}

func (h half) Params() []*autograd.Var { return append(h.ln.Params(), h.branch.Params()...) }

func (h half) String() string { return h.name }

// Params are the block's parameters in its children's order.
func (b *Block) Params() []*autograd.Var {
	var out []*autograd.Var
	for _, c := range b.Children() {
		out = append(out, c.Params()...)
	}
	return out
}

// Children are ln_1, attn, ln_2 and mlp.
func (b *Block) Children() []Module { return []Module{b.Ln1, b.Attn, b.Ln2, b.MLP} }

// ChildNames are PyTorch's attribute names.
func (b *Block) ChildNames() []string { return []string{"ln_1", "attn", "ln_2", "mlp"} }
