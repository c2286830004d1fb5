package autograd_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestMaxPoolKeepsPositions checks what max-pooling keeps for backward:
// the position of each window's maximum (F16, two bytes per output, counted
// as an activation), not its input, which backward no longer reads; and
// that without a recording graph it keeps nothing.
func TestMaxPoolKeepsPositions(t *testing.T) {
	cases := []struct {
		name              string
		k, stride, pad    int
		n, c, h, w        int
		grad              bool
		wantActivationPer int // bytes per output
	}{
		{"2x2", 2, 2, 0, 2, 3, 8, 6, true, 2},
		{"3x3s2p1", 3, 2, 1, 1, 2, 7, 7, true, 2},
		{"no-grad", 2, 2, 0, 2, 3, 8, 6, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := cpu.New() // a device of its own, so its accounting is this test's
			rng := rand.New(rand.NewPCG(5, 5))
			xt := tensor.FromHost(dev, dtype.F32, device.Temp, tensor.UniformHost(rng, -1, 1, c.n, c.c, c.h, c.w))
			defer xt.Release()
			g := autograd.NewGraph(dev)
			defer g.Release()
			x := g.Leaf(xt, c.grad)
			y := g.MaxPool2d(x, c.k, c.stride, c.pad)
			got := dev.MemStats().Live.ByCategory[device.Activation]
			want := int64(c.wantActivationPer * y.Value.Numel())
			if got != want {
				t.Errorf("activation bytes after MaxPool2d%v: got %d, want %d (%d outputs)", x.Shape(), got, want, y.Value.Numel())
			}
			if xt.Category() != device.Temp {
				t.Errorf("input category after MaxPool2d: got %v, want %v (not kept for backward)", xt.Category(), device.Temp)
			}
		})
	}
}

// TestConvReproducible checks that a convolution, max-pooling and batch
// norm step gives the same bits whatever the number of goroutines the CPU
// backend and its GEMM split the work over, in every dtype: the chunks,
// the GEMM's blocking and the batch-norm sums depend on the shapes alone.
func TestConvReproducible(t *testing.T) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			var first [][]float32
			for _, procs := range []int{1, 2, 3} {
				old := runtime.GOMAXPROCS(procs)
				got := convStep(t, dt)
				runtime.GOMAXPROCS(old)
				if first == nil {
					first = got
					continue
				}
				for k := range got {
					for i := range got[k] {
						if math.Float32bits(got[k][i]) != math.Float32bits(first[k][i]) {
							t.Fatalf("GOMAXPROCS=%d: output %d [%d] = %v, with 1: %v", procs, k, i, got[k][i], first[k][i])
						}
					}
				}
			}
		})
	}
}

// convStep runs Conv2d (stride 1, padding 1, bias), BatchNorm, MaxPool2d
// and a second Conv2d (stride 2, no bias) forward and backward on a fresh
// CPU device and returns the output and every gradient.
func convStep(t *testing.T, dt dtype.DType) [][]float32 {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(7, 7))
	mk := func(shape ...int) *tensor.Tensor {
		return tensor.FromHost(dev, dt, device.Temp, tensor.UniformHost(rng, -1, 1, shape...))
	}
	x, w1, b1, w2 := mk(6, 8, 18, 18), mk(16, 8, 3, 3), mk(16), mk(8, 16, 3, 3)
	gamma := tensor.FromHost(dev, dtype.F32, device.Temp, tensor.UniformHost(rng, 0.5, 1.5, 16))
	beta := tensor.FromHost(dev, dtype.F32, device.Temp, tensor.UniformHost(rng, -1, 1, 16))
	g := autograd.NewGraph(dev)
	defer g.Release()
	vs := []*autograd.Var{g.Leaf(x, true), g.Leaf(w1, true), g.Leaf(b1, true), g.Leaf(w2, true), g.Leaf(gamma, true), g.Leaf(beta, true)}
	h := g.Conv2d(vs[0], vs[1], vs[2], 1, 1)
	h = g.BatchNorm(h, vs[4], vs[5], autograd.BatchNormParams{Training: true, Momentum: 0.1, Eps: 1e-5})
	h = g.MaxPool2d(h, 2, 2, 0)
	y := g.Conv2d(h, vs[3], nil, 2, 1)
	g.Backward(g.Sum(g.Mul(y, y)))
	out := [][]float32{y.Value.ToHost()}
	for _, v := range vs {
		out = append(out, v.Grad.ToHost())
	}
	return out
}

// convBenchCases are the convolutions the step benchmarks spend their time
// in: the MNIST CNN's two layers and a ResNet-20 stage-1 layer.
var convBenchCases = []struct {
	name                 string
	n, c, h, oc, k, s, p int
	bias                 bool
}{
	{"cnn1/128x1x28-32", 128, 1, 28, 32, 3, 1, 0, true},
	{"cnn2/128x32x26-64", 128, 32, 26, 64, 3, 1, 0, true},
	{"resnet/128x16x32-16", 128, 16, 32, 16, 3, 1, 1, false},
}

// BenchmarkConv2d times one convolution's forward and backward pass.
func BenchmarkConv2d(b *testing.B) {
	for _, c := range convBenchCases {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			b.Run(c.name+"/"+dt.String(), func(b *testing.B) {
				benchConv(b, c.n, c.c, c.h, c.oc, c.k, c.s, c.p, c.bias, dt)
			})
		}
	}
}

// benchConv times Conv2d forward and backward on one shape.
func benchConv(b *testing.B, n, ch, h, oc, k, s, p int, hasBias bool, dt dtype.DType) {
	benchConvOn(b, cpu.New(), n, ch, h, oc, k, s, p, hasBias, dt)
}

// benchConvOn is benchConv on dev.
func benchConvOn(b *testing.B, dev device.Device, n, ch, h, oc, k, s, p int, hasBias bool, dt dtype.DType) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := tensor.FromHost(dev, dt, device.Temp, tensor.UniformHost(rng, -1, 1, n, ch, h, h))
	w := tensor.FromHost(dev, dt, device.Param, tensor.UniformHost(rng, -1, 1, oc, ch, k, k))
	oh := (h+2*p-k)/s + 1
	dy := tensor.FromHost(dev, dt, device.Temp, tensor.UniformHost(rng, -1, 1, n, oc, oh, oh))
	var bias *tensor.Tensor
	if hasBias {
		bias = tensor.FromHost(dev, dt, device.Param, tensor.UniformHost(rng, -1, 1, oc))
	}
	step := func() {
		g := autograd.NewGraph(dev)
		xv, wv := g.Leaf(x, true), g.Leaf(w, true)
		var bv *autograd.Var
		if bias != nil {
			bv = g.Leaf(bias, true)
		}
		y := g.Conv2d(xv, wv, bv, s, p)
		g.BackwardFrom([]*autograd.Var{y}, []*tensor.Tensor{dy.Clone(device.Temp)})
		xv.Grad.Release()
		wv.Grad.Release()
		if bv != nil {
			bv.Grad.Release()
		}
		g.Release()
	}
	step() // fill the device's buffer cache, as a training loop's first step does
	for b.Loop() {
		step()
	}
}

// BenchmarkMaxPool2d times the MNIST CNN's 2x2 max-pooling, forward and
// backward.
func BenchmarkMaxPool2d(b *testing.B) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		b.Run(dt.String(), func(b *testing.B) {
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(1, 3))
			x := tensor.FromHost(dev, dt, device.Temp, tensor.UniformHost(rng, -1, 1, 128, 64, 24, 24))
			dy := tensor.FromHost(dev, dt, device.Temp, tensor.UniformHost(rng, -1, 1, 128, 64, 12, 12))
			step := func() {
				g := autograd.NewGraph(dev)
				xv := g.Leaf(x, true)
				y := g.MaxPool2d(xv, 2, 2, 0)
				g.BackwardFrom([]*autograd.Var{y}, []*tensor.Tensor{dy.Clone(device.Temp)})
				xv.Grad.Release()
				g.Release()
			}
			step()
			for b.Loop() {
				step()
			}
		})
	}
}
