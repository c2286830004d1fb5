package memplan_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// A training script fits its step into 60% of the memory it takes
// without recomputation: measure once, plan, apply, and hold the steps to
// the plan. (Which units the plan recomputes depends on how long each
// took in the dry step, so this prints what does not.)
func Example() {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 2))
	model := models.DeepMLP(rng, 784, 256, 8, 10, 0.1)
	nn.To(model, dev)
	defer nn.Release(model)
	opt := optim.NewSGD(model.Params(), optim.LR(0.01), optim.Momentum(0.9))
	defer optim.Release(opt)
	x := tensor.NormalHost(rng, 0, 1, 2048, 784)
	y := make([]int32, 2048)
	loss := func(g *autograd.Graph) *autograd.Var {
		return nn.CrossEntropy(g, model.Forward(g, g.Input(x)), y)
	}

	profile, err := memplan.Measure(memplan.Config{Dev: dev, Model: model, Loss: loss, Optim: opt})
	if err != nil {
		fmt.Println(err)
		return
	}
	budget, _ := memplan.ParseBudget("0.6x")
	bytes, _ := budget.Resolve(dev, profile)
	plan, err := profile.Plan(bytes)
	if err != nil {
		fmt.Println(err) // names the smallest budget that fits
		return
	}
	// fmt.Println(plan) prints the plan as a table.
	plan.Apply(model)

	monitor := memplan.NewMonitor(dev, plan)
	for range 3 {
		g := autograd.NewGraph(dev, plan.Options()...)
		g.Backward(loss(g))
		opt.Step()
		opt.ZeroGrad()
		g.Release()
		if err := monitor.Step(); err != nil {
			fmt.Println(err) // stop and save
			return
		}
	}
	fmt.Println("recomputes something:", len(plan.Spans) > 0)
	fmt.Println("fits the budget:", monitor.Peak() <= bytes)
	fmt.Printf("prediction error: %.1f%%\n", 100*monitor.PredictionError())
	// Output:
	// recomputes something: true
	// fits the budget: true
	// prediction error: 0.0%
}
