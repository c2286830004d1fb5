package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/safetensors"
	"github.com/mixprec/mixprec/tensor"
)

// GPTConfig is a GPT's shape, in nanoGPT's terms.
type GPTConfig struct {
	Vocab   int     // vocabulary size (vocab_size)
	Block   int     // the longest sequence, and the position table's size (block_size)
	Layers  int     // transformer blocks (n_layer)
	Heads   int     // attention heads (n_head), dividing Embd
	Embd    int     // the residual stream's width (n_embd)
	Dropout float32 // on embeddings, attention weights and each block's outputs
	Bias    bool    // biases in Linears and LayerNorms (nanoGPT's train.py: false)
}

// Check reports the first setting a GPT cannot be built with, in words a
// command-line user can act on.
func (c GPTConfig) Check() error {
	switch {
	case c.Vocab <= 0:
		return fmt.Errorf("a vocabulary of %d characters", c.Vocab)
	case c.Block <= 0 || c.Layers <= 0 || c.Heads <= 0 || c.Embd <= 0:
		return fmt.Errorf("block %d, layers %d, heads %d, embd %d: each must be positive", c.Block, c.Layers, c.Heads, c.Embd)
	case c.Embd%c.Heads != 0:
		return fmt.Errorf("%d heads do not divide an embedding width of %d", c.Heads, c.Embd)
	case c.Dropout < 0 || c.Dropout >= 1:
		return fmt.Errorf("dropout %v is outside [0, 1)", c.Dropout)
	}
	return nil
}

// GPT is nanoGPT's model: token and position embeddings, Layers pre-norm
// transformer blocks (causal self-attention and a GELU MLP), a final
// LayerNorm and a language-model head whose weight is the token
// embedding's (tied: one parameter, whose gradient sums both uses).
//
// Its State paths are nanoGPT's state_dict names (transformer.wte.weight,
// transformer.h.0.attn.c_attn.weight, ...); lm_head.weight, being
// transformer.wte.weight, is not listed, so weight files hold it once.
type GPT struct {
	Config   GPTConfig
	WTE, WPE *nn.Embedding
	Drop     *nn.Dropout
	H        []*nn.Block
	LnF      *nn.LayerNorm
	// Segments checkpoints the blocks in that many segments (gradient
	// checkpointing; nn.CheckpointSequential), 0 for none. A choice made
	// with SetRecompute takes its place.
	Segments int

	recompute *nn.Recompute
}

// NewGPT builds a GPT with nanoGPT's initialisation: every Linear and
// Embedding weight N(0, 0.02), each residual projection's (c_proj) N(0,
// 0.02/√(2·Layers)), biases 0, LayerNorm weights 1. It panics on a config
// Check refuses.
func NewGPT(c GPTConfig, rng *rand.Rand) *GPT {
	if err := c.Check(); err != nil {
		panic("models.NewGPT: " + err.Error())
	}
	normal := func(std float64, shape ...int) *autograd.Var {
		return autograd.NewParam("weight", tensor.NormalHost(rng, 0, float32(std), shape...))
	}
	linear := func(in, out int, std float64) *nn.Linear {
		l := &nn.Linear{In: in, Out: out, W: normal(std, out, in)}
		if c.Bias {
			l.B = autograd.NewParam("bias", tensor.NewHost(out))
		}
		return l
	}
	proj := 0.02 / math.Sqrt(2*float64(c.Layers))
	m := &GPT{Config: c,
		WTE:  &nn.Embedding{W: normal(0.02, c.Vocab, c.Embd), Num: c.Vocab, Dim: c.Embd},
		WPE:  &nn.Embedding{W: normal(0.02, c.Block, c.Embd), Num: c.Block, Dim: c.Embd},
		Drop: nn.NewDropout(c.Dropout, rng),
	}
	for range c.Layers {
		m.H = append(m.H, &nn.Block{
			Ln1: nn.NewLayerNorm(c.Embd, nn.Bias(c.Bias)),
			Attn: &nn.CausalSelfAttention{CAttn: linear(c.Embd, 3*c.Embd, 0.02), CProj: linear(c.Embd, c.Embd, proj),
				Heads: c.Heads, AttnDrop: nn.NewDropout(c.Dropout, rng), ResidDrop: nn.NewDropout(c.Dropout, rng)},
			Ln2: nn.NewLayerNorm(c.Embd, nn.Bias(c.Bias)),
			MLP: &nn.MLP{CFc: linear(c.Embd, 4*c.Embd, 0.02), Act: nn.GELU(), CProj: linear(4*c.Embd, c.Embd, proj),
				Drop: nn.NewDropout(c.Dropout, rng)},
		})
	}
	m.LnF = nn.NewLayerNorm(c.Embd, nn.Bias(c.Bias))
	return m
}

// Forward returns the logits (B, T, Vocab) of the token ids idx (B, T),
// an F32 Var of exact integers (autograd.Graph.InputIDs), T at most Block.
func (m *GPT) Forward(g *autograd.Graph, idx *autograd.Var) *autograd.Var {
	s := idx.Shape()
	if len(s) != 2 || s[1] > m.Config.Block || s[1] <= 0 {
		panic(fmt.Sprintf("models.GPT: ids %v; want (B, T) with T in [1, %d]", s, m.Config.Block))
	}
	pos := make([]int32, s[1])
	for i := range pos {
		pos[i] = int32(i)
	}
	// Each value of the residual stream is freed once the next exists
	// (autograd.Graph.Free, in nn.RunChain): nothing keeps it for
	// backward, since an add keeps nothing and a LayerNorm keeps its
	// normalised input. A checkpointed span keeps its input, which goes
	// once the backward pass has recomputed the span.
	tok, posEmb := m.WTE.Forward(g, idx), m.WPE.Forward(g, g.InputIDs(pos))
	x := g.Add(tok, posEmb)
	g.Free(tok, posEmb)
	if d := m.Drop.Forward(g, x); d != x {
		g.Free(x)
		x = d
	}
	r := m.recompute
	if r == nil && m.Segments > 0 {
		r = &nn.Recompute{Spans: blockSpans(len(m.H), m.Segments)}
	}
	x = nn.RunChain(g, nn.Modules(m.Units()), r, x, true)
	h := m.LnF.ForwardFor(g, x, autograd.OpLinear)
	g.Free(x)
	logits := g.Linear(h, m.WTE.W, nil) // lm_head, tied to wte
	g.Free(h)
	return logits
}

// Units are the blocks' halves, attention then MLP for each block
// (nn.Block.Halves), named h.N.attn and h.N.mlp: the GPT as an nn.Chain.
// The embeddings before them and ln_f and the head after them are always
// kept.
func (m *GPT) Units() []nn.Unit {
	out := make([]nn.Unit, 0, 2*len(m.H))
	for i, b := range m.H {
		h := b.Halves()
		out = append(out, nn.Unit{Name: fmt.Sprintf("h.%d.attn", i), M: h[0]}, nn.Unit{Name: fmt.Sprintf("h.%d.mlp", i), M: h[1]})
	}
	return out
}

// SetRecompute makes Forward recompute the spans of r's units (Units),
// in place of Segments; nil returns to Segments.
func (m *GPT) SetRecompute(r *nn.Recompute) {
	if r != nil {
		nn.CheckSpans("models.GPT.SetRecompute", r.Spans, 2*len(m.H))
	}
	m.recompute = r
}

// blockSpans are the spans of units (two a block) that checkpoint n
// blocks in the given number of segments of whole blocks.
func blockSpans(n, segments int) []nn.Span {
	spans := nn.EvenSpans(n, segments)
	for i := range spans {
		spans[i].Lo, spans[i].Hi = 2*spans[i].Lo, 2*spans[i].Hi
	}
	return spans
}

// Loss is the mean cross-entropy of logits (B, T, Vocab) against targets
// (B·T ids), nanoGPT's F.cross_entropy over the flattened positions.
func (m *GPT) Loss(g *autograd.Graph, logits *autograd.Var, targets []int32) *autograd.Var {
	s := logits.Shape()
	return nn.CrossEntropy(g, g.Reshape(logits, s[0]*s[1], s[2]), targets)
}

// Params lists every trainable parameter once (wte, not a second lm_head).
func (m *GPT) Params() []*autograd.Var {
	var out []*autograd.Var
	for _, c := range m.Children() {
		out = append(out, c.Params()...)
	}
	return out
}

// Children are the embeddings, their dropout, the blocks and ln_f.
func (m *GPT) Children() []nn.Module {
	out := []nn.Module{m.WTE, m.WPE, m.Drop}
	for _, b := range m.H {
		out = append(out, b)
	}
	return append(out, m.LnF)
}

// ChildNames are nanoGPT's paths.
func (m *GPT) ChildNames() []string {
	out := []string{"transformer.wte", "transformer.wpe", "transformer.drop"}
	for i := range m.H {
		out = append(out, "transformer.h."+strconv.Itoa(i))
	}
	return append(out, "transformer.ln_f")
}

// SetComposed makes every attention layer run as separate operations
// (autograd.Graph.AttentionComposed) instead of the fused kernel, or back.
func (m *GPT) SetComposed(composed bool) {
	for _, b := range m.H {
		b.Attn.Composed = composed
	}
}

func (m *GPT) String() string {
	c := m.Config
	return fmt.Sprintf("GPT(vocab %d, block %d, %d layers, %d heads, embd %d, dropout %v, bias %v)", c.Vocab, c.Block, c.Layers, c.Heads, c.Embd, c.Dropout, c.Bias)
}

// GPTWeights prepares a nanoGPT-named weights file's tensors for a GPT:
// it drops lm_head.weight when it equals transformer.wte.weight (PyTorch's
// state_dict lists the tied weight twice) and the causal-mask buffers
// (transformer.h.N.attn.bias, of shape (1, 1, block, block)) that nanoGPT
// registers without flash attention; an lm_head that differs from wte is
// an error, since this GPT ties them.
func GPTWeights(tensors []safetensors.Tensor) ([]safetensors.Tensor, error) {
	var wte, head *safetensors.Tensor
	out := make([]safetensors.Tensor, 0, len(tensors))
	for i := range tensors {
		t := &tensors[i]
		switch {
		case t.Name == "lm_head.weight":
			head = t
			continue
		case strings.HasPrefix(t.Name, "transformer.h.") && strings.HasSuffix(t.Name, ".attn.bias") && len(t.Shape) == 4:
			continue
		case t.Name == "transformer.wte.weight":
			wte = t
		}
		out = append(out, *t)
	}
	if head != nil {
		if wte == nil || !slices.Equal(head.Shape, wte.Shape) || !slices.Equal(head.Floats(), wte.Floats()) {
			return nil, fmt.Errorf("lm_head.weight differs from transformer.wte.weight; this GPT ties them")
		}
	}
	return out, nil
}

// GPTConfigOf infers what a nanoGPT-named weights file says of a GPT's
// shape: Vocab and Embd from transformer.wte.weight, Block from
// transformer.wpe.weight, Layers from the blocks present, Bias from
// whether ln_f has one. Heads and Dropout are not in the weights.
func GPTConfigOf(tensors []safetensors.Tensor) (GPTConfig, error) {
	var c GPTConfig
	shape := map[string][]int{}
	for _, t := range tensors {
		shape[t.Name] = t.Shape
		if rest, ok := strings.CutPrefix(t.Name, "transformer.h."); ok {
			if i, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '.'), 0)]); err == nil {
				c.Layers = max(c.Layers, i+1)
			}
		}
	}
	wte, wpe := shape["transformer.wte.weight"], shape["transformer.wpe.weight"]
	if len(wte) != 2 || len(wpe) != 2 {
		return c, fmt.Errorf("no transformer.wte.weight and transformer.wpe.weight of two dimensions: not nanoGPT-named GPT weights")
	}
	c.Vocab, c.Embd, c.Block = wte[0], wte[1], wpe[0]
	_, c.Bias = shape["transformer.ln_f.bias"]
	return c, nil
}
