package optim_test

import (
	"fmt"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// Minimise (w - 3)² with SGD and momentum.
func Example() {
	dev := cpu.New()
	w := autograd.NewParam("w", tensor.Host{Shape: []int{1}, Data: []float32{0}})
	w.To(dev)
	opt := optim.NewSGD([]*autograd.Var{w}, optim.LR(0.1), optim.Momentum(0.5))
	three := tensor.Host{Shape: []int{1}, Data: []float32{3}}
	for range 50 {
		g := autograd.NewGraph(dev)
		d := g.Sub(w, g.Input(three))
		g.Backward(g.Sum(g.Mul(d, d)))
		opt.Step()
		opt.ZeroGrad()
		g.Release()
	}
	fmt.Printf("%.3f\n", w.Value.Item())
	// Output: 3.000
}
