package optim_test

import (
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/reftest"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// TestMatchesPyTorch runs each optimiser for six steps from the same
// parameters and gradients as torch.optim and compares every step's
// parameters within the F32 tolerance.
func TestMatchesPyTorch(t *testing.T) {
	var ref struct {
		P0           reftest.Array              `json:"p0"`
		Grads        []reftest.Array            `json:"grads"`
		Trajectories map[string][]reftest.Array `json:"trajectories"`
	}
	reftest.Load(t, "optim", &ref)
	makers := map[string]func([]*autograd.Var) optim.Optimizer{
		"sgd":          func(p []*autograd.Var) optim.Optimizer { return optim.NewSGD(p, optim.LR(0.1)) },
		"sgd_momentum": func(p []*autograd.Var) optim.Optimizer { return optim.NewSGD(p, optim.LR(0.1), optim.Momentum(0.9)) },
		"sgd_dampening_wd": func(p []*autograd.Var) optim.Optimizer {
			return optim.NewSGD(p, optim.LR(0.05), optim.Momentum(0.8), optim.Dampening(0.3), optim.WeightDecay(0.01))
		},
		"sgd_nesterov_wd": func(p []*autograd.Var) optim.Optimizer {
			return optim.NewSGD(p, optim.LR(0.1), optim.Momentum(0.9), optim.Nesterov(), optim.WeightDecay(0.05))
		},
		"adam": func(p []*autograd.Var) optim.Optimizer { return optim.NewAdam(p, optim.LR(0.01)) },
		"adam_wd": func(p []*autograd.Var) optim.Optimizer {
			return optim.NewAdam(p, optim.LR(0.02), optim.Betas(0.8, 0.99), optim.Eps(1e-6), optim.WeightDecay(0.1))
		},
		"adamw": func(p []*autograd.Var) optim.Optimizer {
			return optim.NewAdamW(p, optim.LR(0.01), optim.WeightDecay(0.1))
		},
	}
	for name, traj := range ref.Trajectories {
		t.Run(name, func(t *testing.T) {
			mk, ok := makers[name]
			if !ok {
				t.Fatalf("no optimiser configured for reference case %q", name)
			}
			dev := cpu.New()
			p := autograd.NewParam("p", ref.P0.Host())
			p.To(dev)
			opt := mk([]*autograd.Var{p})
			for i, want := range traj {
				p.Grad = tensor.FromHost(dev, dtype.F32, device.Grad, ref.Grads[i].Host())
				opt.Step()
				p.FreeGrad()
				// Adam divides by sqrt(v)+eps; after six steps float32
				// rounding in the moments leaves errors of a few 1e-7
				// relative, inside the F32 tolerance.
				reftest.Compare(t, name, p.Value.ToHost(), want, dtype.F32)
			}
		})
	}
}
