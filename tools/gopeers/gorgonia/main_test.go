package main

import (
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/tools/gopeers/peer"
	G "gorgonia.org/gorgonia"
)

// TestStepMatchesPyTorch checks that the graph's loss is the batch's mean
// cross-entropy and that Gorgonia's Momentum solver, at a constant rate,
// makes torch.optim.SGD's updates, so that the peer trains the recipe.
func TestStepMatchesPyTorch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := peer.RandomSet(rng, 5)
	w := newWeights(rng, 784, 10)
	n, err := newNet(w, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.vm.Close()
	rw, rb := peer.Float64s(w.ws[0].Data().([]float32)), peer.Float64s(w.bs[0].Data().([]float32))
	bw, bb := make([]float64, 7840), make([]float64, 10)
	const lr, momentum = 0.05, 0.9
	s := G.NewMomentum(G.WithLearnRate(lr), G.WithMomentum(momentum))
	idx := []int{0, 1, 2, 3, 4}
	for step := range 3 {
		got, err := n.step(d, idx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := peer.ReferenceStep(rw, rb, bw, bb, d, idx, lr, momentum, step == 0)
		if !peer.Near(float32(got), want) {
			t.Errorf("step %d: loss %v, want %v", step, got, want)
		}
		for i, v := range w.ws[0].Data().([]float32) {
			if !peer.Near(v, rw[i]) {
				t.Fatalf("step %d: weight %d = %v, want %v", step, i, v, rw[i])
			}
		}
		for i, v := range w.bs[0].Data().([]float32) {
			if !peer.Near(v, rb[i]) {
				t.Fatalf("step %d: bias %d = %v, want %v", step, i, v, rb[i])
			}
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
	full, err := newNet(w, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	defer full.vm.Close()
	part, err := newNet(w, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	defer part.vm.Close()
	rw, rb := peer.Float64s(w.ws[0].Data().([]float32)), peer.Float64s(w.bs[0].Data().([]float32))
	bw, bb := make([]float64, 7840), make([]float64, 10)
	s := G.NewMomentum(G.WithLearnRate(0.1), G.WithMomentum(0.9))
	for step, c := range []struct {
		n   *net
		idx []int
	}{{full, []int{0, 1, 2, 3}}, {part, []int{4, 5, 6}}, {full, []int{3, 2, 1, 0}}} {
		got, err := c.n.step(d, c.idx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := peer.ReferenceStep(rw, rb, bw, bb, d, c.idx, 0.1, 0.9, step == 0)
		if !peer.Near(float32(got), want) {
			t.Errorf("step %d (batch %d): loss %v, want %v", step, len(c.idx), got, want)
		}
	}
	for i, v := range w.ws[0].Data().([]float32) {
		if !peer.Near(v, rw[i]) {
			t.Fatalf("weight %d = %v after steps on both graphs, want %v", i, v, rw[i])
		}
	}
}

// TestLearns trains the full MLP on a small separable problem (each class
// a distinct pattern plus noise) and expects it to classify held-out
// samples well: the peer's figures come from a network that learns.
func TestLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	train, test := peer.Separable(rng, 512, 1000)
	w := newWeights(rng, 784, 256, 128, 10)
	n, err := newNet(w, 64, true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.vm.Close()
	eval, err := newNet(w, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	defer eval.vm.Close()
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
