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
