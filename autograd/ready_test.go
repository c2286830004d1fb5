package autograd_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/tensor"
)

// TestOnGradReady checks that each parameter is reported once, with its
// final gradient in place when it is reported: early for a plain two-layer
// net and for a weight read twice, and at the end of backward with a
// checkpointed segment.
func TestOnGradReady(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(3, 3))
	param := func(name string, shape ...int) *autograd.Var {
		p := autograd.NewParam(name, tensor.NormalHost(rng, 0, 0.5, shape...))
		p.To(dev)
		return p
	}
	w1, b1, w2, b2 := param("w1", 4, 6), param("b1", 4), param("w2", 3, 4), param("b2", 3)
	x := tensor.NormalHost(rng, 0, 1, 5, 6)
	for _, mode := range []string{"plain", "tied", "checkpoint"} {
		t.Run(mode, func(t *testing.T) {
			for _, p := range []*autograd.Var{w1, b1, w2, b2} {
				p.FreeGrad()
			}
			g := autograd.NewGraph(dev)
			defer g.Release()
			var order []string
			seen := map[string][]float32{}
			w1Had := map[string]bool{} // whether w1's gradient existed when each was reported
			g.OnGradReady(func(p *autograd.Var) {
				order = append(order, p.Name)
				seen[p.Name] = p.Grad.ToHost()
				w1Had[p.Name] = w1.Grad != nil
			})
			layer2 := func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var {
				return []*autograd.Var{g.Linear(g.ReLU(in[0]), w2, b2)}
			}
			h := g.Linear(g.Input(x), w1, b1)
			var y *autograd.Var
			switch mode {
			case "plain":
				y = layer2(g, []*autograd.Var{h})[0]
			case "tied": // w2 read twice: ready only after both uses
				y = g.Add(layer2(g, []*autograd.Var{h})[0], g.Linear(g.ReLU(h), w2, nil))
			case "checkpoint":
				y = g.Checkpoint(layer2, h)[0]
			}
			g.Backward(g.Mean(g.Mul(y, y)))
			slices.Sort(order)
			if want := []string{"b1", "b2", "w1", "w2"}; !slices.Equal(order, want) {
				t.Fatalf("reported %v, want each parameter once: %v", order, want)
			}
			for _, p := range []*autograd.Var{w1, b1, w2, b2} {
				if !slices.Equal(seen[p.Name], p.Grad.ToHost()) {
					t.Errorf("%s was reported before its gradient was final", p.Name)
				}
			}
			// Without a checkpoint the second layer is reported while
			// backward has yet to reach the first: that is the overlap.
			// With one, everything waits for the end.
			if early := !w1Had["w2"] && !w1Had["b2"]; early != (mode != "checkpoint") {
				t.Errorf("w2 and b2 reported before w1's gradient existed: %v", early)
			}
		})
	}
}
