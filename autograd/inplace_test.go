package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/tensor"
)

// TestActivationGradInPlace checks that an activation's backward writes
// its gradient over the incoming one: in loss = Sum(ReLU(Tanh(x))) the
// backward pass holds x, tanh(x), the ReLU's output (both saved) and one
// gradient of n elements, not a second one for each activation's result,
// and x's gradient is right.
// A gradient arriving as a view (Sum's is not one) or in another dtype
// takes a buffer of its own, which the other tests of the package cover.
func TestActivationGradInPlace(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		const n = 1 << 16
		rng := rand.New(rand.NewPCG(9, 9))
		xh := tensor.UniformHost(rng, -1, 1, n)
		xt := tensor.FromHost(dev, dtype.F32, device.Temp, xh)
		defer xt.Release()
		dev.ResetPeak()
		g := autograd.NewGraph(dev)
		defer g.Release()
		x := g.Leaf(xt, true)
		th := g.Tanh(x)
		g.Backward(g.Sum(g.ReLU(th)))
		peak := dev.MemStats().Peak.Total
		// x, tanh(x), ReLU's output and one gradient: 4n floats; a
		// gradient of its own for each activation would make it 5n.
		if limit := int64(4*n*4 + 4096); peak > limit {
			t.Errorf("backward peaked at %d bytes, want at most %d (x, two saved outputs and one gradient of %d floats)", peak, limit, n)
		}
		got, tv := x.Grad.ToHost(), th.Value.ToHost()
		for i := range got {
			want := 0.0
			if tv[i] > 0 {
				want = 1 - float64(tv[i])*float64(tv[i])
			}
			if math.Abs(float64(got[i])-want) > 1e-6 {
				t.Fatalf("dx[%d] = %v, want %v", i, got[i], want)
			}
		}
	})
}
