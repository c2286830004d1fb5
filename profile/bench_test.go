package profile_test

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/tensor"
)

// processCPU is the CPU time the process has used: steadier than the wall
// clock on a machine whose other work takes cores away.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMLPStep times a training step of the MNIST MLP (784-256-128-10,
// batch 128, SGD with momentum) with profiling off (a nil profiler, as the
// programs hold without -profile), on (-profile) and tracing (-trace):
// what profiling costs a step.
func BenchmarkMLPStep(b *testing.B) {
	for _, mode := range []string{"off", "on", "trace"} {
		b.Run(mode, func(b *testing.B) {
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(1, 1))
			net := nn.NewSequential(nn.NewLinear(784, 256, rng), nn.ReLU(), nn.NewLinear(256, 128, rng), nn.ReLU(), nn.NewLinear(128, 10, rng))
			nn.To(net, dev)
			defer nn.Release(net)
			opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
			defer optim.Release(opt)
			x := tensor.NormalHost(rng, 0, 1, 128, 784)
			y := make([]int32, 128)
			for i := range y {
				y[i] = int32(rng.IntN(10))
			}
			var p *profile.Profiler
			switch mode {
			case "on":
				p = profile.New(dev)
			case "trace":
				p = profile.New(dev, profile.Trace(1<<30)) // every step, as long as the benchmark runs
			}
			step := func() {
				p.StepStart()
				g := autograd.NewGraph(dev, p.Graph())
				loss := nn.CrossEntropy(g, net.Forward(g, g.Input(x)), y)
				g.Backward(loss)
				p.Phase(profile.Optim, func() error { opt.Step(); return nil })
				opt.ZeroGrad()
				g.Release()
				p.StepEnd()
			}
			step() // allocate gradients and optimiser state
			cpu0 := processCPU()
			for b.Loop() {
				step()
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "samples/s")
			if d := processCPU() - cpu0; d > 0 {
				b.ReportMetric(float64(d.Microseconds())/float64(b.N), "cpu-µs/op")
			}
		})
	}
}

// BenchmarkEvents is the profiler's own cost for a step of the MLP's
// events (a data wait, 7 forward ops, 7 backward functions, unscale and
// the optimiser) with no work between them: what -profile adds to a step.
func BenchmarkEvents(b *testing.B) {
	p := profile.New(cpu.New())
	fwd := []autograd.Op{autograd.OpLinear, autograd.OpReLU, autograd.OpLinear, autograd.OpReLU, autograd.OpLinear, autograd.OpCrossEntropy, autograd.OpScale}
	nop := func() error { return nil }
	for b.Loop() {
		p.StepStart()
		p.Begin(profile.Data)
		p.End(profile.Data)
		for _, op := range fwd {
			p.OpEnd(op, autograd.Forward)
		}
		for i := len(fwd) - 1; i >= 0; i-- {
			p.OpStart(fwd[i], autograd.Backward)
			p.OpEnd(fwd[i], autograd.Backward)
		}
		p.Phase(profile.Unscale, nop)
		p.Phase(profile.Optim, nop)
		p.StepEnd()
	}
}
