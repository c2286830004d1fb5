package profile_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
)

// A training loop profiled: Steps times the wait for each batch, Graph
// each op, Phase the optimiser's step; Table (here only the summary's
// figures) says where the time went.
func Example() {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.NewSequential(nn.NewLinear(64, 32, rng), nn.ReLU(), nn.NewLinear(32, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	opt := optim.NewSGD(model.Params(), optim.LR(0.1))
	defer optim.Release(opt)
	train := datasets.Synthetic(512, []int{64}, 10, 1)

	prof := profile.New(dev)
	for b := range prof.Steps(datasets.Batches(train, 64)) {
		g := autograd.NewGraph(dev, prof.Graph())
		loss := nn.CrossEntropy(g, model.Forward(g, g.Input(b.X)), b.Y)
		g.Backward(loss)
		prof.Phase(profile.Optim, func() error { opt.Step(); return nil })
		opt.ZeroGrad()
		g.Release()
	}
	// prof.Table(os.Stderr) prints the table; its figures:
	s := prof.Summary()
	fmt.Println(s.Steps, "steps")
	fmt.Printf("shares add up to %.0f%%\n", s.ComputePct+s.DataPct+s.OverheadPct)
	for _, r := range prof.Rows() {
		if r.Name == "linear" && r.Phase == "forward" {
			fmt.Println("linear forward:", r.Calls, "calls")
		}
	}
	// Output:
	// 8 steps
	// shares add up to 100%
	// linear forward: 16 calls
}
