package nn_test

import (
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/tensor"
)

// TestBlockFreesDead: after a transformer block's recorded forward pass,
// the only results not kept for backward that are still live are its
// input and its output: the branches' projections, their dropouts and
// the first residual sum were freed as soon as they were dead; and what it
// kept for backward is gone once Backward has run. With and without
// dropout, in F32 and under BF16 autocast.
func TestBlockFreesDead(t *testing.T) {
	const b, tt, c = 2, 5, 8
	for _, low := range []dtype.DType{dtype.F32, dtype.BF16} {
		for _, p := range []float32{0, 0.2} {
			t.Run(low.String()+"/dropout "+map[bool]string{false: "off", true: "on"}[p > 0], func(t *testing.T) {
				dev := cpu.New()
				rng := rand.New(rand.NewPCG(7, 7))
				blk := &nn.Block{
					Ln1: nn.NewLayerNorm(c),
					Attn: &nn.CausalSelfAttention{CAttn: nn.NewLinear(c, 3*c, rng), CProj: nn.NewLinear(c, c, rng), Heads: 2,
						AttnDrop: nn.NewDropout(p, rng), ResidDrop: nn.NewDropout(p, rng)},
					Ln2: nn.NewLayerNorm(c),
					MLP: &nn.MLP{CFc: nn.NewLinear(c, 4*c, rng), Act: nn.GELU(), CProj: nn.NewLinear(4*c, c, rng), Drop: nn.NewDropout(p, rng)},
				}
				nn.To(blk, dev)
				defer nn.Release(blk)
				g := autograd.NewGraph(dev)
				defer g.Release()
				if low != dtype.F32 {
					amp.Autocast(g, low)
				}
				xt := tensor.Normal(dev, dtype.F32, device.Temp, rng, 0, 1, b, tt, c)
				defer xt.Release()
				x := g.Leaf(xt, true)
				before := dev.MemStats().Live.Category(device.Temp)
				y := blk.Forward(g, x)
				got := dev.MemStats().Live.Category(device.Temp) - before
				want := device.Bytes(y.DType(), b*tt*c)
				if x.Value.Category() != device.Temp { // kept by ln_1 for backward
					want -= device.Bytes(x.DType(), b*tt*c)
				}
				if got != want {
					t.Errorf("Temp grew by %d bytes in the block, want %d (its output alone)", got, want)
				}
				g.Backward(g.Mean(y)) // what was freed was not needed
				// What the block kept for backward went as backward used it.
				if got := dev.MemStats().Live.Category(device.Activation); got != 0 {
					t.Errorf("%d bytes kept for backward still live after it, want 0", got)
				}
			})
		}
	}
}
