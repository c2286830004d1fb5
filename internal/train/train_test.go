package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// handStep is the step examples/mnist writes out, as examples/cifar and
// mixprec memcompare each wrote it before Step.
func handStep(dev device.Device, net *nn.Sequential, opt optim.Optimizer, scaler *amp.GradScaler, low dtype.DType, segments int, x tensor.Host, y []int32) (float64, error) {
	g := autograd.NewGraph(dev)
	if low != dtype.F32 {
		amp.Autocast(g, low)
	}
	in := g.Input(x)
	var logits *autograd.Var
	if segments > 0 {
		logits = nn.CheckpointSequential(g, net.Layers, segments, in)
	} else {
		logits = net.Forward(g, in)
	}
	loss := nn.CrossEntropy(g, logits, y)
	g.Backward(scaler.Scale(g, loss))
	if _, err := scaler.Step(opt); err != nil {
		return 0, err
	}
	if err := scaler.Update(); err != nil {
		return 0, err
	}
	opt.ZeroGrad()
	l := float64(loss.Value.Item())
	g.Release()
	return l, nil
}

// TestStepMatchesHandWritten: Step trains bit for bit as the written-out
// step does, in every precision, with and without checkpointing, dropout
// included. Under autocast Step feeds the batch in the low dtype
// (InputDType: the network starts with a Linear), the written-out step in
// F32 for autocast to cast.
func TestStepMatchesHandWritten(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, low := range dtype.All {
			for _, segments := range []int{0, 2} {
				t.Run(fmt.Sprintf("%v/segments=%d", low, segments), func(t *testing.T) {
					type run struct {
						net    *nn.Sequential
						opt    optim.Optimizer
						scaler *amp.GradScaler
					}
					mk := func() run {
						net := models.DeepMLP(rand.New(rand.NewPCG(1, 2)), 12, 16, 3, 5, 0.2)
						nn.To(net, dev)
						return run{net, optim.NewSGD(net.Params(), optim.LR(0.1), optim.Momentum(0.9)), amp.NewGradScaler(amp.For(low))}
					}
					a, b := mk(), mk()
					defer func() {
						for _, r := range []run{a, b} {
							optim.Release(r.opt)
							nn.Release(r.net)
						}
					}()
					step := Step{Dev: dev, Net: b.net, Opt: b.opt, Scaler: b.scaler, Low: low, Segments: segments}
					rng := rand.New(rand.NewPCG(3, 4))
					for i := range 4 {
						x := tensor.NormalHost(rng, 0, 1, 8, 12)
						y := make([]int32, 8)
						for j := range y {
							y[j] = int32(rng.IntN(5))
						}
						want, err := handStep(dev, a.net, a.opt, a.scaler, low, segments, x, y)
						if err != nil {
							t.Fatal(err)
						}
						got, err := step.Run(x, y)
						if err != nil {
							t.Fatal(err)
						}
						if math.Float64bits(got) != math.Float64bits(want) {
							t.Fatalf("step %d: loss %v, written-out step %v", i, got, want)
						}
					}
					pa, pb := a.net.Params(), b.net.Params()
					for i := range pa {
						va, vb := pa[i].Value.ToHost(), pb[i].Value.ToHost()
						for j := range va {
							if math.Float32bits(va[j]) != math.Float32bits(vb[j]) {
								t.Fatalf("parameter %d [%d]: %v, written-out step %v", i, j, vb[j], va[j])
							}
						}
					}
				})
			}
		}
	})
}

func TestTotalSteps(t *testing.T) {
	for _, c := range []struct{ perEpoch, epochs, maxSteps, want int }{
		{469, 3, 0, 1407},
		{469, 3, 25, 25},
		{469, 3, 5000, 1407},
		{390, math.MaxInt / 100, 0, 1 << 62}, // saturates instead of wrapping negative
		{390, math.MaxInt / 100, 7, 7},
		{0, 5, 0, 0},
	} {
		if got := TotalSteps(c.perEpoch, c.epochs, c.maxSteps); got != c.want {
			t.Errorf("TotalSteps(%d, %d, %d) = %d, want %d", c.perEpoch, c.epochs, c.maxSteps, got, c.want)
		}
	}
}

// TestNewOptimizer: a recipe's settings reach its own optimiser and no
// other, so each result steps exactly as the optimiser built by hand.
func TestNewOptimizer(t *testing.T) {
	dev := testdev.Devices()[0]
	lookup := func(name string) models.Recipe {
		s, err := models.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return s.Train
	}
	const lr = 0.05
	for _, c := range []struct {
		name, model string
		want        func(p []*autograd.Var) optim.Optimizer
	}{
		{"sgd", "mlp", func(p []*autograd.Var) optim.Optimizer {
			return optim.NewSGD(p, optim.LR(lr), optim.Momentum(0.9))
		}},
		{"sgd-nesterov", "resnet20", func(p []*autograd.Var) optim.Optimizer {
			return optim.NewSGD(p, optim.LR(lr), optim.Momentum(0.9), optim.Nesterov(), optim.WeightDecay(5e-4))
		}},
		// The recipe's optimiser is SGD with Nesterov momentum: plain SGD
		// is another one.
		{"sgd", "resnet20", func(p []*autograd.Var) optim.Optimizer { return optim.NewSGD(p, optim.LR(lr)) }},
		{"sgd-nesterov", "mlp", func(p []*autograd.Var) optim.Optimizer {
			return optim.NewSGD(p, optim.LR(lr), optim.Momentum(0.9), optim.Nesterov())
		}},
		{"sgd", "cnn", func(p []*autograd.Var) optim.Optimizer { return optim.NewSGD(p, optim.LR(lr)) }},
		{"adamw", "cnn", func(p []*autograd.Var) optim.Optimizer { return optim.NewAdamW(p, optim.LR(lr)) }},
		{"adamw", "mlp", func(p []*autograd.Var) optim.Optimizer { return optim.NewAdamW(p, optim.LR(lr)) }},
		{"adam", "deepmlp", func(p []*autograd.Var) optim.Optimizer { return optim.NewAdam(p, optim.LR(lr)) }},
	} {
		mk := func() []*autograd.Var {
			rng := rand.New(rand.NewPCG(5, 6))
			p := autograd.NewParam("w", tensor.NormalHost(rng, 0, 1, 32))
			p.To(dev)
			return []*autograd.Var{p}
		}
		pa, pb := mk(), mk()
		got, err := NewOptimizer(c.name, pa, lr, lookup(c.model))
		if err != nil {
			t.Fatal(err)
		}
		want := c.want(pb)
		rng := rand.New(rand.NewPCG(7, 8))
		for range 3 {
			g := tensor.NormalHost(rng, 0, 1, 32)
			for _, p := range [][]*autograd.Var{pa, pb} {
				p[0].FreeGrad()
				p[0].Grad = tensor.FromHost(dev, dtype.F32, device.Grad, g)
			}
			got.Step()
			want.Step()
		}
		va, vb := pa[0].Value.ToHost(), pb[0].Value.ToHost()
		for j := range va {
			if math.Float32bits(va[j]) != math.Float32bits(vb[j]) {
				t.Errorf("%s with %s's recipe: weight [%d] %v, built by hand %v", c.name, c.model, j, va[j], vb[j])
				break
			}
		}
		optim.Release(got)
		optim.Release(want)
		for _, p := range [][]*autograd.Var{pa, pb} {
			p[0].FreeGrad()
			p[0].Value.Release()
		}
	}
	if _, err := NewOptimizer("lbfgs", nil, lr, models.Recipe{}); err == nil {
		t.Error("NewOptimizer(lbfgs): no error")
	}
}

// TestInputDType: the low dtype for networks whose input goes to a Linear
// or a convolution alone, F32 without autocast and for a network that
// starts with anything else (dropout would scale the rounded batch).
func TestInputDType(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	mlp := models.MLP(rng, 4, 3, 2)
	cnn := models.CNN(rng)
	dropFirst := nn.NewSequential(nn.NewDropout(0.5, rng), nn.NewLinear(4, 2, rng))
	reluFirst := nn.NewSequential(nn.ReLU(), nn.NewLinear(4, 2, rng))
	nested := nn.NewSequential(mlp, nn.ReLU())
	for _, c := range []struct {
		name string
		net  nn.Module
		low  dtype.DType
		want dtype.DType
	}{
		{"mlp/f16", mlp, dtype.F16, dtype.F16},
		{"mlp/bf16", mlp, dtype.BF16, dtype.BF16},
		{"mlp/off", mlp, dtype.F32, dtype.F32},
		{"cnn/f16", cnn, dtype.F16, dtype.F16},
		{"nested/bf16", nested, dtype.BF16, dtype.BF16},
		{"dropout-first/f16", dropFirst, dtype.F16, dtype.F32},
		{"relu-first/f16", reluFirst, dtype.F16, dtype.F32},
		{"empty/f16", nn.NewSequential(), dtype.F16, dtype.F32},
	} {
		if got := InputDType(c.net, c.low); got != c.want {
			t.Errorf("%s: InputDType = %v, want %v", c.name, got, c.want)
		}
	}
}
