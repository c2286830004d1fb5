package nn_test

import (
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/reftest"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/nn"
)

// TestMLPMatchesPyTorch loads a small MLP's weights and inputs from the
// PyTorch reference file and checks logits, loss and every parameter
// gradient within the F32 tolerance.
func TestMLPMatchesPyTorch(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		var ref struct {
			Params map[string]reftest.Array `json:"params"`
			X      reftest.Array            `json:"x"`
			Labels []int32                  `json:"labels"`
			Logits reftest.Array            `json:"logits"`
			Loss   float64                  `json:"loss"`
			Grads  map[string]reftest.Array `json:"grads"`
		}
		reftest.Load(t, "mlp", &ref)
		model := nn.NewSequential(
			&nn.Linear{In: 20, Out: 16}, nn.ReLU(),
			&nn.Linear{In: 16, Out: 12}, nn.ReLU(),
			&nn.Linear{In: 12, Out: 5})
		for _, l := range []int{0, 2, 4} {
			lin := model.Layers[l].(*nn.Linear)
			lin.W = autograd.NewParam("weight", ref.Params[itoa(l)+".weight"].Host())
			lin.B = autograd.NewParam("bias", ref.Params[itoa(l)+".bias"].Host())
		}
		nn.To(model, dev)
		g := autograd.NewGraph(dev)
		defer g.Release()
		logits := model.Forward(g, g.Input(ref.X.Host()))
		loss := nn.CrossEntropy(g, logits, ref.Labels)
		g.Backward(loss)
		reftest.Compare(t, "logits", logits.Value.ToHost(), ref.Logits, dtype.F32)
		if got := float64(loss.Value.Item()); !dtype.Close(dtype.F32, got, ref.Loss, 0) {
			t.Errorf("loss = %.8g, want %.8g", got, ref.Loss)
		}
		for _, p := range nn.State(model) {
			reftest.Compare(t, "grad "+p.Name, p.Var.Grad.ToHost(), ref.Grads[p.Name], dtype.F32)
		}
	})
}

func itoa(i int) string { return string(rune('0' + i)) }
