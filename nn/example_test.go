package nn_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/tensor"
)

func Example() {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 2))
	model := nn.NewSequential(nn.NewLinear(4, 8, rng), nn.ReLU(), nn.NewLinear(8, 3, rng))
	nn.To(model, dev)
	g := autograd.NewGraph(dev)
	x := g.Input(tensor.UniformHost(rng, -1, 1, 2, 4))
	loss := nn.CrossEntropy(g, model.Forward(g, x), []int32{0, 2})
	g.Backward(loss)
	for _, p := range nn.State(model) {
		fmt.Println(p.Name, p.Var.Shape(), p.Var.Grad.Shape())
	}
	g.Release()
	// Output:
	// 0.weight [8 4] [8 4]
	// 0.bias [8] [8]
	// 2.weight [3 8] [3 8]
	// 2.bias [3] [3]
}

// Options name what PyTorch takes by keyword: this is PyTorch's
// nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False).
func ExampleNewConv2d() {
	rng := rand.New(rand.NewPCG(1, 2))
	fmt.Println(nn.NewConv2d(3, 16, 3, rng, nn.Stride(2), nn.Padding(1), nn.Bias(false)))
	fmt.Println(nn.MaxPool2d(2))
	// Output:
	// Conv2d(3, 16, kernel=3, stride=2, padding=1, bias=false)
	// MaxPool2d(2, stride=2, padding=0)
}
