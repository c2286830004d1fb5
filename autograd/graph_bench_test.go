package autograd_test

import (
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// BenchmarkTinyOps records, differentiates and releases a chain of 100
// elementwise ops on one-element tensors, so the time is the graph's own
// bookkeeping (allocation, tape, ownership) rather than arithmetic: what a
// per-op cost in the graph shows up in first.
func BenchmarkTinyOps(b *testing.B) {
	dev := cpu.New()
	w := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{0.5}, 1))
	x := tensor.Host{Shape: []int{1}, Data: []float32{1}}
	for b.Loop() {
		g := autograd.NewGraph(dev)
		y := g.Input(x)
		for range 100 {
			y = g.Mul(y, w)
		}
		g.Backward(g.Sum(y))
		w.FreeGrad()
		g.Release()
	}
}
