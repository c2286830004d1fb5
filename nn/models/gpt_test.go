package models_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
)

func tinyGPT(bias bool, dropout float32) models.GPTConfig {
	return models.GPTConfig{Vocab: 11, Block: 8, Layers: 2, Heads: 2, Embd: 16, Dropout: dropout, Bias: bias}
}

// TestGPTStateNames checks that the state paths are nanoGPT's state_dict
// names, with lm_head (tied to wte) not listed twice.
func TestGPTStateNames(t *testing.T) {
	m := models.NewGPT(tinyGPT(true, 0), rand.New(rand.NewPCG(1, 1)))
	var got []string
	for _, e := range nn.State(m) {
		got = append(got, e.Name)
	}
	want := []string{"transformer.wte.weight", "transformer.wpe.weight"}
	for _, h := range []string{"transformer.h.0.", "transformer.h.1."} {
		for _, p := range []string{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
			"ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"} {
			want = append(want, h+p)
		}
	}
	want = append(want, "transformer.ln_f.weight", "transformer.ln_f.bias")
	if !slices.Equal(got, want) {
		t.Errorf("state names:\n got %v\nwant %v", got, want)
	}
	if n, want := nn.CountParams(m), 11*16+8*16+2*(4*16+16*48+48+16*16+16+16*64+64+64*16+16)+2*16; n != want {
		t.Errorf("CountParams = %d, want %d", n, want)
	}
	noBias := models.NewGPT(tinyGPT(false, 0), rand.New(rand.NewPCG(1, 1)))
	for _, e := range nn.State(noBias) {
		if e.Var.Shape()[0] == 0 || (len(e.Var.Shape()) == 1 && e.Name[len(e.Name)-4:] == "bias") {
			t.Errorf("bias=false model has %s", e.Name)
		}
	}
}

// gptStep runs one forward and backward pass and returns the loss and every
// parameter's gradient, in State order.
func gptStep(t *testing.T, dev device.Device, m *models.GPT, low dtype.DType, x, y []int32, b, tt int) (float32, [][]float32) {
	t.Helper()
	g := autograd.NewGraph(dev)
	defer g.Release()
	if low != dtype.F32 {
		amp.Autocast(g, low)
	}
	loss := m.Loss(g, m.Forward(g, g.InputIDs(x, b, tt)), y)
	g.Backward(loss)
	var grads [][]float32
	for _, e := range nn.State(m) {
		if e.Var.Grad == nil {
			t.Fatalf("%s: no gradient", e.Name)
		}
		grads = append(grads, e.Var.Grad.ToHost())
		e.Var.FreeGrad()
	}
	return loss.Value.Item(), grads
}

func batch(rng *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

// TestGPTCheckpointBitwise checks that checkpointing the blocks changes no
// bit of the loss or any gradient, with dropout on (the recomputation
// draws the same masks), in F32 and under BF16 autocast.
func TestGPTCheckpointBitwise(t *testing.T) {
	dev := cpu.New()
	for _, low := range []dtype.DType{dtype.F32, dtype.BF16} {
		for _, seg := range []int{1, 2} {
			rng := rand.New(rand.NewPCG(2, 2))
			x, y := batch(rng, 3*8, 11), batch(rng, 3*8, 11)
			run := func(segments int) (float32, [][]float32) {
				m := models.NewGPT(tinyGPT(true, 0.2), rand.New(rand.NewPCG(5, 5)))
				nn.To(m, dev)
				defer nn.Release(m)
				m.Segments = segments
				return gptStep(t, dev, m, low, x, y, 3, 8)
			}
			l0, g0 := run(0)
			l1, g1 := run(seg)
			if math.Float32bits(l0) != math.Float32bits(l1) {
				t.Errorf("%v, %d segments: loss %v, %v without checkpointing", low, seg, l1, l0)
			}
			for i := range g0 {
				for j := range g0[i] {
					if math.Float32bits(g0[i][j]) != math.Float32bits(g1[i][j]) {
						t.Fatalf("%v, %d segments: gradient %d[%d] = %v, %v without checkpointing", low, seg, i, j, g1[i][j], g0[i][j])
					}
				}
			}
		}
	}
	if s := dev.MemStats(); s.Live.Total != 0 {
		t.Errorf("memory leaked: %v", s)
	}
}

// TestGPTRecomputeHalves checks that recomputing chosen halves of the
// blocks (attention alone, the MLP alone, a span across two blocks)
// changes no bit of the loss or any gradient, with dropout on, in F32 and
// under BF16 autocast, and that the GPT is a chain of its blocks' halves.
func TestGPTRecomputeHalves(t *testing.T) {
	dev := cpu.New()
	m := models.NewGPT(tinyGPT(true, 0.2), rand.New(rand.NewPCG(5, 5)))
	var names []string
	for _, u := range m.Units() {
		names = append(names, u.Name)
	}
	if got, want := strings.Join(names, " "), "h.0.attn h.0.mlp h.1.attn h.1.mlp"; got != want {
		t.Errorf("units %q, want %q", got, want)
	}
	for _, low := range []dtype.DType{dtype.F32, dtype.BF16} {
		rng := rand.New(rand.NewPCG(2, 2))
		x, y := batch(rng, 3*8, 11), batch(rng, 3*8, 11)
		run := func(spans []nn.Span) (float32, [][]float32) {
			m := models.NewGPT(tinyGPT(true, 0.2), rand.New(rand.NewPCG(5, 5)))
			nn.To(m, dev)
			defer nn.Release(m)
			if spans != nil {
				m.SetRecompute(&nn.Recompute{Spans: spans})
			}
			return gptStep(t, dev, m, low, x, y, 3, 8)
		}
		l0, g0 := run(nil)
		for _, spans := range [][]nn.Span{{{Lo: 0, Hi: 1}}, {{Lo: 1, Hi: 2}, {Lo: 3, Hi: 4}}, {{Lo: 1, Hi: 3}}, {{Lo: 0, Hi: 4}}} {
			l1, g1 := run(spans)
			if math.Float32bits(l0) != math.Float32bits(l1) {
				t.Errorf("%v, spans %v: loss %v, %v without recomputation", low, spans, l1, l0)
			}
			for i := range g0 {
				for j := range g0[i] {
					if math.Float32bits(g0[i][j]) != math.Float32bits(g1[i][j]) {
						t.Fatalf("%v, spans %v: gradient %d[%d] = %v, %v without recomputation", low, spans, i, j, g1[i][j], g0[i][j])
					}
				}
			}
		}
	}
	if s := dev.MemStats(); s.Live.Total != 0 {
		t.Errorf("memory leaked: %v", s)
	}
}

// TestGPTTiedGradient checks the tied weight's gradient against central
// differences of the loss in float64 arithmetic on F32 kernels: a few
// entries of wte, which feed both the embedding and the head.
func TestGPTTiedGradient(t *testing.T) {
	dev := cpu.New()
	m := models.NewGPT(tinyGPT(false, 0), rand.New(rand.NewPCG(7, 7)))
	nn.To(m, dev)
	defer nn.Release(m)
	rng := rand.New(rand.NewPCG(3, 3))
	x, y := batch(rng, 2*5, 11), batch(rng, 2*5, 11)
	_, grads := gptStep(t, dev, m, dtype.F32, x, y, 2, 5)
	loss := func() float64 {
		g := autograd.NewGraph(dev, autograd.WithoutGrad())
		defer g.Release()
		return float64(m.Loss(g, m.Forward(g, g.InputIDs(x, 2, 5)), y).Value.Item())
	}
	w := m.WTE.W.Value.ToHost()
	for _, i := range []int{int(x[0])*16 + 3, int(y[4])*16 + 7, 10*16 + 1} {
		orig := w[i]
		const eps = 1e-2
		w[i] = orig + eps
		m.WTE.W.SetValues(w)
		lp := loss()
		w[i] = orig - eps
		m.WTE.W.SetValues(w)
		lm := loss()
		w[i] = orig
		m.WTE.W.SetValues(w)
		want := (lp - lm) / (2 * eps)
		if got := float64(grads[0][i]); math.Abs(got-want) > 1e-3+2e-2*math.Abs(want) {
			t.Errorf("wte grad[%d] = %.6g, finite difference %.6g", i, got, want)
		}
	}
}

// TestGPTFusedMatchesComposed runs the model with fused attention and with
// the composed reference: F32 losses and gradients agree to rounding.
func TestGPTFusedMatchesComposed(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(4, 4))
	x, y := batch(rng, 3*8, 11), batch(rng, 3*8, 11)
	run := func(composed bool) (float32, [][]float32) {
		m := models.NewGPT(tinyGPT(true, 0.1), rand.New(rand.NewPCG(9, 9)))
		nn.To(m, dev)
		defer nn.Release(m)
		m.SetComposed(composed)
		return gptStep(t, dev, m, dtype.F32, x, y, 3, 8)
	}
	lf, gf := run(false)
	lc, gc := run(true)
	if math.Abs(float64(lf-lc)) > 1e-6 {
		t.Errorf("loss: fused %v, composed %v", lf, lc)
	}
	for i := range gf {
		for j := range gf[i] {
			if d := math.Abs(float64(gf[i][j] - gc[i][j])); d > 1e-6+1e-4*math.Abs(float64(gc[i][j])) {
				t.Fatalf("gradient %d[%d]: fused %v, composed %v", i, j, gf[i][j], gc[i][j])
			}
		}
	}
}
