package optim_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/safetensors"
	"github.com/mixprec/mixprec/tensor"
)

// TestStateDictResume trains a small MLP, saves weights and optimiser state
// after 3 steps, and requires that a fresh model and optimiser loaded from
// them reach bitwise the same weights as the uninterrupted run after 3 more.
func TestStateDictResume(t *testing.T) {
	makers := map[string]func([]*autograd.Var) optim.Stateful{
		"sgd": func(p []*autograd.Var) optim.Stateful {
			return optim.NewSGD(p, optim.LR(0.05), optim.Momentum(0.9), optim.Nesterov(), optim.WeightDecay(1e-3))
		},
		"adam": func(p []*autograd.Var) optim.Stateful {
			return optim.NewAdam(p, optim.LR(1e-2), optim.WeightDecay(1e-3))
		},
		"adamw": func(p []*autograd.Var) optim.Stateful { return optim.NewAdamW(p, optim.LR(1e-2)) },
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			dev := cpu.New()
			build := func(seed uint64) (*nn.Sequential, optim.Stateful) {
				rng := rand.New(rand.NewPCG(seed, 1))
				m := nn.NewSequential(nn.NewLinear(6, 5, rng), nn.ReLU(), nn.NewLinear(5, 3, rng))
				nn.To(m, dev)
				return m, mk(m.Params())
			}
			rng := rand.New(rand.NewPCG(9, 9))
			x := tensor.NormalHost(rng, 0, 1, 4, 6)
			y := []int32{0, 2, 1, 2}
			step := func(m *nn.Sequential, o optim.Stateful) {
				g := autograd.NewGraph(dev)
				g.Backward(nn.CrossEntropy(g, m.Forward(g, g.Input(x)), y))
				o.Step()
				o.ZeroGrad()
				g.Release()
			}
			a, oa := build(1)
			defer nn.Release(a)
			defer optim.Release(oa)
			for range 3 {
				step(a, oa)
			}
			weights := nn.Weights(a)
			ts, meta := oa.StateDict()
			for range 3 {
				step(a, oa)
			}
			b, ob := build(2)
			defer nn.Release(b)
			defer optim.Release(ob)
			if err := nn.SetWeights(b, weights); err != nil {
				t.Fatal(err)
			}
			if err := ob.LoadStateDict(ts, meta); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				step(b, ob)
			}
			wa, wb := nn.Weights(a), nn.Weights(b)
			for i := range wa {
				for j := range wa[i].F32 {
					if math.Float32bits(wa[i].F32[j]) != math.Float32bits(wb[i].F32[j]) {
						t.Fatalf("%s[%d]: resumed %v, uninterrupted %v", wa[i].Name, j, wb[i].F32[j], wa[i].F32[j])
					}
				}
			}
		})
	}
}

func TestLoadStateDictRejects(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 1))
	m := nn.NewSequential(nn.NewLinear(4, 3, rng))
	nn.To(m, dev)
	defer nn.Release(m)
	adam := optim.NewAdam(m.Params())
	g := autograd.NewGraph(dev)
	g.Backward(nn.CrossEntropy(g, m.Forward(g, g.Input(tensor.NormalHost(rng, 0, 1, 2, 4))), []int32{0, 1}))
	adam.Step()
	g.Release()
	ts, meta := adam.StateDict()

	other := optim.NewAdamW(m.Params())
	if err := other.LoadStateDict(ts, meta); err == nil || !strings.Contains(err.Error(), `optimizer "adam"`) {
		t.Errorf("AdamW loading Adam's state: %v, want an error naming the optimiser", err)
	}
	betas := optim.NewAdam(m.Params(), optim.Betas(0.8, 0.999))
	if err := betas.LoadStateDict(ts, meta); err == nil || !strings.Contains(err.Error(), "beta1") {
		t.Errorf("other betas: %v, want an error naming beta1", err)
	}
	bad := append([]safetensors.Tensor(nil), ts...)
	bad[0].Shape = []int{4, 3}
	fresh := optim.NewAdam(m.Params())
	if err := fresh.LoadStateDict(bad, meta); err == nil || !strings.Contains(err.Error(), "state.0.exp_avg") {
		t.Errorf("a moment of the wrong shape: %v, want an error naming it", err)
	}
	if mm, _ := fresh.State(); mm[0] != nil {
		t.Error("a failed load left state behind")
	}
	noStep := map[string]string{}
	for k, v := range meta {
		noStep[k] = v
	}
	noStep["state.0.step"] = "0"
	if err := fresh.LoadStateDict(ts, noStep); err == nil || !strings.Contains(err.Error(), "state.0.step") {
		t.Errorf("step 0 with moments: %v, want an error", err)
	}
	optim.Release(adam)
}
