package autograd_test

import (
	"github.com/mixprec/mixprec/internal/testdev"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestConvChunking checks that splitting a batch into im2col chunks, and
// keeping the columns for the backward pass or unrolling them again there,
// change nothing: output and gradients are bitwise equal with one image per
// chunk and with the columns kept or not (ConvColumnBudget), in F32 and
// under BF16 autocast.
func TestConvChunking(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, low := range []dtype.DType{dtype.F32, dtype.BF16} {
			testConvChunking(t, dev, low)
		}
	})
}

func testConvChunking(t *testing.T, dev device.Device, low dtype.DType) {
	rng := rand.New(rand.NewPCG(4, 4))
	xh := tensor.UniformHost(rng, -1, 1, 5, 3, 6, 6)
	wh := tensor.UniformHost(rng, -1, 1, 4, 3, 3, 3)
	bh := tensor.UniformHost(rng, -1, 1, 4)
	colBytes := device.Bytes(low, 5*27*36) // 5 images of 27x36 columns
	run := func(budget int64) [][]float32 {
		g := autograd.NewGraph(dev, autograd.ConvColumnBudget(budget))
		defer g.Release()
		if low != dtype.F32 {
			amp.Autocast(g, low)
		}
		x := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, xh), true)
		w := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, wh), true)
		b := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, bh), true)
		defer x.Value.Release()
		defer w.Value.Release()
		defer b.Value.Release()
		y := g.Conv2d(x, w, b, 1, 1)
		want := int64(0)
		if budget >= colBytes {
			want = colBytes
		}
		if kept := autograd.KeptColumns(g); kept != want {
			t.Fatalf("%v, budget %d: %d bytes of columns kept, want %d", low, budget, kept, want)
		}
		g.Backward(g.Sum(g.Mul(y, y)))
		return [][]float32{y.Value.ToHost(), x.Grad.ToHost(), w.Grad.ToHost(), b.Grad.ToHost()}
	}
	whole := run(colBytes)
	cases := map[string][][]float32{"one chunk, columns unrolled again": run(colBytes - 1)}
	restore := autograd.SetColBudget(1) // one image per chunk
	cases["image by image, columns kept"] = run(1 << 30)
	cases["image by image, columns unrolled again"] = run(0)
	restore()
	for name, got := range cases {
		for i := range whole {
			for j := range whole[i] {
				if math.Float32bits(whole[i][j]) != math.Float32bits(got[i][j]) {
					t.Fatalf("%v: tensor %d element %d: %v in one chunk with the columns kept, %v %s", low, i, j, whole[i][j], got[i][j], name)
				}
			}
		}
	}
}
