package optim_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// plainDevice hides the CPU backend's fused step-and-cast kernels, so the
// optimisers take their plain path and autocast converts its weight copies
// again every step.
type plainDevice struct{ device.Device }

// countingDevice counts the conversions of parameters to other dtypes.
type countingDevice struct {
	*cpu.Device
	casts int
}

func (d *countingDevice) Copy(dst device.Buffer, dstOff int, src device.Buffer, srcOff, n int) {
	if src.Category() == device.Param && dst.DType() != src.DType() {
		d.casts++
	}
	d.Device.Copy(dst, dstOff, src, srcOff, n)
}

// train runs steps of a two-layer perceptron under a low-precision policy
// on dev and returns the final parameters' bits. It calls after, if given,
// after each step.
func train(t *testing.T, dev device.Device, low dtype.DType, newOpt func([]*autograd.Var) optim.Optimizer, steps int, after func(step int)) [][]uint32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	param := func(name string, shape ...int) *autograd.Var {
		return autograd.ParamOf(name, tensor.Uniform(dev, dtype.F32, device.Param, rng, -0.3, 0.3, shape...))
	}
	params := []*autograd.Var{param("w1", 40, 30), param("b1", 40), param("w2", 10, 40), param("b2", 10)}
	opt := newOpt(params)
	defer optim.Release(opt)
	x := tensor.UniformHost(rng, -1, 1, 24, 30)
	labels := make([]int32, 24)
	for i := range labels {
		labels[i] = int32(rng.IntN(10))
	}
	for s := range steps {
		g := autograd.NewGraph(dev, autograd.WithPolicy(lowPolicy{low}))
		h := g.ReLU(g.Linear(g.Input(x), params[0], params[1]))
		g.Backward(g.CrossEntropy(g.Linear(h, params[2], params[3]), labels))
		opt.Step()
		opt.ZeroGrad()
		g.Release()
		if after != nil {
			after(s)
		}
	}
	out := make([][]uint32, len(params))
	for i, p := range params {
		for _, v := range p.Value.ToHost() {
			out[i] = append(out[i], math.Float32bits(v))
		}
		p.Value.Release()
	}
	return out
}

// lowPolicy runs Linear in a low dtype, as autocast does, and everything
// else as Promote does.
type lowPolicy struct{ low dtype.DType }

func (p lowPolicy) ComputeType(op autograd.Op, in ...dtype.DType) dtype.DType {
	if op == autograd.OpLinear {
		return p.low
	}
	return autograd.Promote(in...)
}

var optimisers = map[string]func([]*autograd.Var) optim.Optimizer{
	"sgd-momentum": func(p []*autograd.Var) optim.Optimizer {
		return optim.NewSGD(p, optim.LR(0.05), optim.Momentum(0.9), optim.WeightDecay(1e-4))
	},
	"adamw": func(p []*autograd.Var) optim.Optimizer { return optim.NewAdamW(p, optim.LR(3e-3)) },
}

// TestFusedCastTrainsBitForBit checks that training with the fused
// step-and-cast kernels, where the optimiser writes autocast's weight
// copies, gives the same parameters bit for bit as converting the copies
// again at every step.
func TestFusedCastTrainsBitForBit(t *testing.T) {
	for name, newOpt := range optimisers {
		for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
			t.Run(fmt.Sprintf("%s/%v", name, low), func(t *testing.T) {
				fused := train(t, cpu.New(), low, newOpt, 6, nil)
				plain := train(t, plainDevice{cpu.New()}, low, newOpt, 6, nil)
				for i := range fused {
					for j := range fused[i] {
						if fused[i][j] != plain[i][j] {
							t.Fatalf("param %d element %d: %#x with the fused kernels, %#x converting again", i, j, fused[i][j], plain[i][j])
						}
					}
				}
			})
		}
	}
}

// TestFusedCastSkipsConversions checks that, after the first step, a
// training step converts no weight: the optimiser's fused kernels kept the
// copies current. Without them each of the two weights is converted every
// step; the biases are promoted to the low dtype as well.
func TestFusedCastSkipsConversions(t *testing.T) {
	for name, newOpt := range optimisers {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				fused bool
				want  int // conversions per step after the first
			}{{true, 0}, {false, 4}} {
				dev := &countingDevice{Device: cpu.New()}
				var d device.Device = dev
				if !c.fused {
					d = plainDevice{dev}
				}
				var perStep []int
				train(t, d, dtype.F16, newOpt, 4, func(int) {
					perStep = append(perStep, dev.casts)
					dev.casts = 0
				})
				for s, n := range perStep[1:] {
					if n != c.want {
						t.Errorf("fused=%v: step %d converted %d weights, want %d (per step: %v)", c.fused, s+2, n, c.want, perStep)
					}
				}
			}
		})
	}
}
