package optim_test

import (
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// TestRelease checks that each optimiser's first step allocates the state
// StateBytes says, and that Release returns all of it to the device: the
// optimiser-state bytes go back to where they were before its first step.
func TestRelease(t *testing.T) {
	makers := []struct {
		name string
		make func([]*autograd.Var) optim.Optimizer
	}{
		{"sgd", func(p []*autograd.Var) optim.Optimizer { return optim.NewSGD(p) }},
		{"sgd-momentum", func(p []*autograd.Var) optim.Optimizer { return optim.NewSGD(p, optim.Momentum(0.9)) }},
		{"adam", func(p []*autograd.Var) optim.Optimizer { return optim.NewAdam(p) }},
		{"adamw", func(p []*autograd.Var) optim.Optimizer { return optim.NewAdamW(p) }},
	}
	for _, m := range makers {
		t.Run(m.name, func(t *testing.T) {
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(1, 2))
			w := autograd.ParamOf("w", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 3, 5))
			defer w.Value.Release()
			before := dev.MemStats().Live.Category(device.Optim)
			opt := m.make([]*autograd.Var{w})
			w.Grad = tensor.Uniform(dev, dtype.F32, device.Grad, rng, -1, 1, 3, 5)
			opt.Step()
			// StateBytes says beforehand what the first step allocates.
			if got, want := dev.MemStats().Live.Category(device.Optim)-before, opt.(interface{ StateBytes() int64 }).StateBytes(); got != want {
				t.Errorf("first step allocated %d bytes of state, StateBytes %d", got, want)
			}
			opt.ZeroGrad()
			opt.Release()
			if got := dev.MemStats().Live.Category(device.Optim); got != before {
				t.Errorf("after Release: %d bytes of optimiser state live, want %d", got, before)
			}
		})
	}
}
