package optim_test

import (
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// TestAdamWGroups checks nanoGPT's decay rule and that each group steps
// with its own decay: with a zero gradient, AdamW's update is the decay
// alone, p·(1 - lr·wd).
func TestAdamWGroups(t *testing.T) {
	dev := cpu.New()
	mat := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1, 2, 3, 4}, 2, 2))
	vec := autograd.ParamOf("b", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1, 2}, 2))
	groups := optim.DecayGroups([]*autograd.Var{vec, mat}, 0.1)
	if len(groups) != 2 || len(groups[0].Params) != 1 || groups[0].Params[0] != mat || groups[0].WeightDecay != 0.1 ||
		len(groups[1].Params) != 1 || groups[1].Params[0] != vec || groups[1].WeightDecay != 0 {
		t.Fatalf("DecayGroups = %+v; want [w] with 0.1, then [b] with 0", groups)
	}
	o := optim.NewAdamWGroups(groups, optim.LR(0.5))
	defer o.Release()
	for _, p := range []*autograd.Var{mat, vec} {
		p.Grad = tensor.Zeros(dev, dtype.F32, device.Grad, p.Shape()...)
	}
	o.Step()
	if got, want := mat.Value.ToHost(), []float32{0.95, 1.9, 2.85, 3.8}; !equal(got, want) {
		t.Errorf("decayed parameter = %v, want %v", got, want)
	}
	if got, want := vec.Value.ToHost(), []float32{1, 2}; !equal(got, want) {
		t.Errorf("undecayed parameter = %v, want %v", got, want)
	}
	// The state remembers the groups' decays: an optimiser with other
	// groups refuses it.
	ts, meta := o.StateDict()
	other := optim.NewAdamWGroups(optim.DecayGroups([]*autograd.Var{mat, vec}, 0.2), optim.LR(0.5))
	defer other.Release()
	if err := other.LoadStateDict(ts, meta); err == nil {
		t.Error("state saved with decay 0.1 loaded into an optimiser with 0.2")
	}
	mat.FreeGrad()
	vec.FreeGrad()
	mat.Value.Release()
	vec.Value.Release()
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
