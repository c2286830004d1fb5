package models_test

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// processCPU is the user+system CPU time this process has used. With
// -cpu 1 the benchmark's CPU time per step is its work alone, which a
// machine shared with other jobs does not inflate as it does wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTrainStep times one training step (forward, backward, optimiser)
// of each model at its workload's batch size, in FP32 and under F16 and
// BF16 autocast, and reports samples/s.
func BenchmarkTrainStep(b *testing.B) {
	for _, name := range []string{"mlp", "cnn", "resnet20"} {
		spec, err := models.Lookup(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, dt := range dtype.All {
			b.Run(name+"/"+dt.String(), func(b *testing.B) {
				dev := cpu.New()
				rng := rand.New(rand.NewPCG(1, 1))
				net := spec.Build(rng)
				nn.To(net, dev)
				defer nn.Release(net)
				opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
				defer optim.Release(opt)
				scaler := amp.NewGradScaler(amp.For(dt))
				x := tensor.NormalHost(rng, 0, 1, append([]int{spec.Batch}, spec.Input...)...)
				y := make([]int32, spec.Batch)
				for i := range y {
					y[i] = int32(rng.IntN(spec.Classes))
				}
				step := func() {
					g := autograd.NewGraph(dev)
					if dt != dtype.F32 {
						amp.Autocast(g, dt)
					}
					loss := nn.CrossEntropy(g, net.Forward(g, g.Input(x)), y)
					g.Backward(scaler.Scale(g, loss))
					scaler.Step(opt)
					scaler.Update()
					opt.ZeroGrad()
					g.Release()
				}
				step() // allocate gradients and optimiser state
				b.ResetTimer()
				cpu0 := processCPU()
				for b.Loop() {
					step()
				}
				b.ReportMetric(float64(spec.Batch*b.N)/b.Elapsed().Seconds(), "samples/s")
				if d := processCPU() - cpu0; d > 0 {
					b.ReportMetric(float64(d.Microseconds())/float64(b.N), "cpu-µs/op")
				}
			})
		}
	}
}

// BenchmarkGPTStep times one training iteration of the character GPT at
// nanoGPT's CPU recipe (4 layers, 4 heads, 128 wide, 12 windows of 64;
// AdamW with decay groups, gradients clipped to norm 1), in FP32 and under
// F16 and BF16 autocast, and reports tokens/s.
func BenchmarkGPTStep(b *testing.B) {
	cfg := models.GPTConfig{Vocab: 81, Block: 64, Layers: 4, Heads: 4, Embd: 128}
	const batch = 12
	for _, dt := range dtype.All {
		b.Run(dt.String(), func(b *testing.B) {
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(1, 1))
			m := models.NewGPT(cfg, rng)
			nn.To(m, dev)
			defer nn.Release(m)
			opt := optim.NewAdamWGroups(optim.DecayGroups(m.Params(), 0.1), optim.LR(1e-3), optim.Betas(0.9, 0.99))
			defer optim.Release(opt)
			scaler := amp.NewGradScaler(amp.For(dt))
			x, y := make([]int32, batch*cfg.Block), make([]int32, batch*cfg.Block)
			for i := range x {
				x[i], y[i] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
			}
			step := func() {
				g := autograd.NewGraph(dev)
				if dt != dtype.F32 {
					amp.Autocast(g, dt)
				}
				loss := m.Loss(g, m.Forward(g, g.InputIDs(x, batch, cfg.Block)), y)
				g.Backward(scaler.Scale(g, loss))
				scaler.Unscale(opt)
				optim.ClipGradNorm(opt.Params(), 1)
				scaler.Step(opt)
				scaler.Update()
				opt.ZeroGrad()
				g.Release()
			}
			step()
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			b.ReportMetric(float64(batch*cfg.Block*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
