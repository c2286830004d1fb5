package main

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/mixprec/mixprec/tools/gopeers/peer"
)

func newBackend(t *testing.T) backends.Backend {
	t.Helper()
	b, err := backends.NewWithConfig(simplego.BackendName)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// values reads a variable of ctx as float32s.
func values(t *testing.T, ctx *context.Context, scope, name string) []float32 {
	t.Helper()
	v := ctx.GetVariableByScopeAndName(scope, name)
	if v == nil {
		t.Fatalf("no variable %s/%s", scope, name)
	}
	x, err := v.Value()
	if err != nil {
		t.Fatal(err)
	}
	f, err := tensors.CopyFlatData[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkAgainst compares the single layer's weights and biases in ctx with
// the reference's.
func checkAgainst(t *testing.T, ctx *context.Context, what string, ref *peer.Reference) {
	t.Helper()
	if diff := ref.Differs(values(t, ctx, "/linear0", "weights"), values(t, ctx, "/linear0", "biases")); diff != "" {
		t.Fatalf("%s: %s", what, diff)
	}
}

// TestStepMatchesPyTorch checks that a training step computes the batch's
// mean cross-entropy and that sgdMomentum makes torch.optim.SGD's updates,
// including across the graphs of two batch sizes, so that the peer trains
// the recipe.
func TestStepMatchesPyTorch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := peer.RandomSet(rng, 9)
	m := newMLP(rng, 784, 10)
	ref := peer.NewReference(m.ws[0], m.bs[0])
	const lr, momentum = 0.05, 0.9
	ctx := context.New()
	tr := train.NewTrainer(newBackend(t), ctx, m.logits, losses.SparseCategoricalCrossEntropyLogits,
		&sgdMomentum{lr: lr, momentum: momentum}, nil, nil)
	x, y := make([]float32, 5*784), make([]int32, 5)
	for k, idx := range [][]int{{0, 1, 2, 3, 4}, {5, 6, 7}, {4, 3, 2, 1, 0}} {
		got, err := step(tr, d, idx, x, y)
		if err != nil {
			t.Fatal(err)
		}
		want := ref.Step(d, idx, lr, momentum)
		if !peer.Near(float32(got), want) {
			t.Errorf("step %d: loss %v, want %v", k, got, want)
		}
		checkAgainst(t, ctx, fmt.Sprintf("step %d", k), ref)
	}
}

// TestWarmUpResets checks that warmUp leaves the model as initialised and
// the momentum at zero: the next step is the first step of PyTorch's run.
func TestWarmUpResets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := peer.RandomSet(rng, 7) // batch 4: a full batch of 4 and a partial one of 3
	m := newMLP(rng, 784, 10)
	ctx := context.New()
	const lr, momentum = 0.1, 0.9
	tr := train.NewTrainer(newBackend(t), ctx, m.logits, losses.SparseCategoricalCrossEntropyLogits,
		&sgdMomentum{lr: lr, momentum: momentum}, nil, nil)
	if err := warmUp(tr, ctx, m, d, 4); err != nil {
		t.Fatal(err)
	}
	ref := peer.NewReference(m.ws[0], m.bs[0])
	checkAgainst(t, ctx, "after warm-up", ref)
	idx := []int{6, 5, 4, 3}
	x, y := make([]float32, 4*784), make([]int32, 4)
	if _, err := step(tr, d, idx, x, y); err != nil {
		t.Fatal(err)
	}
	ref.Step(d, idx, lr, momentum)
	checkAgainst(t, ctx, "first step after warm-up", ref)
}

// TestLearns trains the full MLP on a small separable problem (each class
// a distinct pattern plus noise) and expects it to classify held-out
// samples well: the peer's figures come from a network that learns.
func TestLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	trainSet, testSet := peer.Separable(rng, 512, 1000)
	m := newMLP(rng, 784, 256, 128, 10)
	ctx := context.New()
	backend := newBackend(t)
	tr := train.NewTrainer(backend, ctx, m.logits, losses.SparseCategoricalCrossEntropyLogits,
		&sgdMomentum{lr: 0.05, momentum: 0.9}, nil, nil)
	idx := make([]int, 64)
	x, y := make([]float32, 64*784), make([]int32, 64)
	for s := range 40 {
		for i := range idx {
			idx[i] = (s*64 + i) % trainSet.N
		}
		if _, err := step(tr, trainSet, idx, x, y); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := accuracy(backend, ctx, m, testSet)
	if err != nil {
		t.Fatal(err)
	}
	if acc < 0.9 {
		t.Errorf("accuracy after 40 steps = %.3f, want >= 0.9 (chance is 0.1)", acc)
	}
}
