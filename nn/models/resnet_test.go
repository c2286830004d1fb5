package models_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/tensor"
)

// TestResNet20DirectMatchesColumns checks a training step's gradients of
// ResNet-20 in FP32 with the device's direct convolutions against the
// column path (autograd.Im2Col), parameter by parameter, and the loss: the
// two differ only in the order of their sums, so every gradient agrees
// within the F32 tolerance.
func TestResNet20DirectMatchesColumns(t *testing.T) {
	dev := cpu.New()
	defer dev.Close()
	if !dev.DirectConv(device.NewConvShape(4, 16, 32, 32, 3, 3, 1, 1), 16, dtype.F32) {
		t.Skip("no direct convolution on this CPU")
	}
	rng := rand.New(rand.NewPCG(20, 35))
	net := models.ResNet20(rng, 10)
	nn.To(net, dev)
	defer nn.Release(net)
	x := tensor.NormalHost(rng, 0, 1, 4, 3, 32, 32)
	y := []int32{3, 1, 4, 1}
	step := func(opts ...autograd.Option) (float32, [][]float32) {
		g := autograd.NewGraph(dev, opts...)
		defer g.Release()
		loss := nn.CrossEntropy(g, net.Forward(g, g.Input(x)), y)
		g.Backward(loss)
		var grads [][]float32
		for _, p := range net.Params() {
			grads = append(grads, p.Grad.ToHost())
			p.ZeroGrad()
		}
		return loss.Value.ToHost()[0], grads
	}
	lossDirect, direct := step()
	lossCols, cols := step(autograd.Im2Col())
	if !dtype.Close(dtype.F32, float64(lossDirect), float64(lossCols), 0) {
		t.Errorf("loss: direct %v, columns %v", lossDirect, lossCols)
	}
	worst := 0.0
	for i, p := range net.Params() {
		bad := 0
		for j := range cols[i] {
			got, want := float64(direct[i][j]), float64(cols[i][j])
			worst = max(worst, math.Abs(got-want)/(1e-5+1e-4*math.Abs(want)))
			if !dtype.Close(dtype.F32, got, want, 0) {
				if bad < 3 {
					t.Errorf("%s %v [%d]: direct %v, columns %v", p.Name, p.Shape(), j, got, want)
				}
				bad++
			}
		}
		if bad > 3 {
			t.Errorf("%s: %d of %d elements differ", p.Name, bad, len(cols[i]))
		}
	}
	t.Logf("largest difference: %.2f of the F32 tolerance", worst)
}
