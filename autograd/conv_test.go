package autograd_test

import (
	"github.com/mixprec/mixprec/internal/testdev"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestConvChunking checks that splitting a batch into im2col chunks changes
// nothing: output and gradients are bitwise equal with one image per chunk.
func TestConvChunking(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(4, 4))
		xh := tensor.UniformHost(rng, -1, 1, 5, 3, 6, 6)
		wh := tensor.UniformHost(rng, -1, 1, 4, 3, 3, 3)
		bh := tensor.UniformHost(rng, -1, 1, 4)
		run := func() [][]float32 {
			g := autograd.NewGraph(dev)
			defer g.Release()
			x := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, xh), true)
			w := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, wh), true)
			b := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, bh), true)
			defer x.Value.Release()
			defer w.Value.Release()
			defer b.Value.Release()
			y := g.Conv2d(x, w, b, 1, 1)
			g.Backward(g.Sum(g.Mul(y, y)))
			return [][]float32{y.Value.ToHost(), x.Grad.ToHost(), w.Grad.ToHost(), b.Grad.ToHost()}
		}
		whole := run()
		restore := autograd.SetColBudget(1) // one image per chunk
		chunked := run()
		restore()
		for i := range whole {
			for j := range whole[i] {
				if math.Float32bits(whole[i][j]) != math.Float32bits(chunked[i][j]) {
					t.Fatalf("tensor %d element %d: %v in one chunk, %v image by image", i, j, whole[i][j], chunked[i][j])
				}
			}
		}
	})
}
