package main

import (
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/tools/gopeers/peer"
	G "gorgonia.org/gorgonia"
)

// openNet is newNet for a test, which closes it when it ends.
func openNet(t *testing.T, w *weights, batch int, train bool) *net {
	t.Helper()
	n, err := newNet(w, batch, train)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.vm.Close() })
	return n
}

// layer0 is the first layer's weights and bias, as the reference takes them.
func (w *weights) layer0() (ws, bs []float32) {
	return w.ws[0].Data().([]float32), w.bs[0].Data().([]float32)
}

// TestStepMatchesPyTorch checks that the graph's loss is the batch's mean
// cross-entropy and that Gorgonia's Momentum solver, at a constant rate,
// makes torch.optim.SGD's updates, so that the peer trains the recipe.
func TestStepMatchesPyTorch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := peer.RandomSet(rng, 5)
	w := newWeights(rng, 784, 10)
	n := openNet(t, w, 5, true)
	ref := peer.NewReference(w.layer0())
	const lr, momentum = 0.05, 0.9
	s := G.NewMomentum(G.WithLearnRate(lr), G.WithMomentum(momentum))
	idx := []int{0, 1, 2, 3, 4}
	for step := range 3 {
		got, err := n.step(d, idx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := ref.Step(d, idx, lr, momentum)
		if !peer.Near(float32(got), want) {
			t.Errorf("step %d: loss %v, want %v", step, got, want)
		}
		if diff := ref.Differs(w.layer0()); diff != "" {
			t.Fatalf("step %d: %s", step, diff)
		}
	}
}

// TestGraphsShareWeights checks that a step of the partial-batch graph
// moves the weights the full-batch and evaluation graphs compute with, and
// that the solver's momentum carries across them.
func TestGraphsShareWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := peer.RandomSet(rng, 7)
	w := newWeights(rng, 784, 10)
	full, part := openNet(t, w, 4, true), openNet(t, w, 3, true)
	ref := peer.NewReference(w.layer0())
	s := G.NewMomentum(G.WithLearnRate(0.1), G.WithMomentum(0.9))
	for step, c := range []struct {
		n   *net
		idx []int
	}{{full, []int{0, 1, 2, 3}}, {part, []int{4, 5, 6}}, {full, []int{3, 2, 1, 0}}} {
		got, err := c.n.step(d, c.idx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := ref.Step(d, c.idx, 0.1, 0.9)
		if !peer.Near(float32(got), want) {
			t.Errorf("step %d (batch %d): loss %v, want %v", step, len(c.idx), got, want)
		}
	}
	if diff := ref.Differs(w.layer0()); diff != "" {
		t.Fatalf("after steps on both graphs: %s", diff)
	}
}

// TestLearns trains the full MLP on a small separable problem (each class
// a distinct pattern plus noise) and expects it to classify held-out
// samples well: the peer's figures come from a network that learns.
func TestLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	train, test := peer.Separable(rng, 512, 1000)
	w := newWeights(rng, 784, 256, 128, 10)
	n, eval := openNet(t, w, 64, true), openNet(t, w, 1000, false)
	s := G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.9))
	idx := make([]int, 64)
	for step := range 40 {
		for i := range idx {
			idx[i] = (step*64 + i) % train.N
		}
		if _, err := n.step(train, idx, s); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := eval.accuracy(test)
	if err != nil {
		t.Fatal(err)
	}
	if acc < 0.9 {
		t.Errorf("accuracy after 40 steps = %.3f, want >= 0.9 (chance is 0.1)", acc)
	}
}
