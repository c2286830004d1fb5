package amp_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
)

// stormRun trains the MNIST MLP in F16 for two epochs with scaler and
// returns its test accuracy; every step in [from, to) has an Inf put into
// a gradient before the scaler looks, as an overflow of the forward pass
// would, so the scaler skips it and backs off.
func stormRun(t *testing.T, trainSet, testSet *datasets.Dataset, scaler *amp.GradScaler, from, to int) float64 {
	t.Helper()
	spec, err := models.Lookup("mlp")
	if err != nil {
		t.Fatal(err)
	}
	dev := cpu.New()
	net := spec.Build(rand.New(rand.NewPCG(1, 0x6d6e697374)))
	nn.To(net, dev)
	defer nn.Release(net)
	opt, err := train.NewOptimizer(spec.Train.Optimizer, net.Params(), spec.Train.LR, spec.Train)
	if err != nil {
		t.Fatal(err)
	}
	defer optim.Release(opt)
	first := net.Params()[0]
	inf := make([]float32, first.Value.Numel())
	inf[0] = float32(math.Inf(1))
	steps := 0
	step := train.Step{Dev: dev, Net: net, Opt: opt, Scaler: scaler, Low: dtype.F16, Sync: func() error {
		if steps >= from && steps < to {
			dev.CopyFromHost(first.Grad.Buffer(), inf)
		}
		return nil
	}}
	for epoch := range 2 {
		for b := range datasets.Batches(trainSet, spec.Batch, datasets.Shuffle(1), datasets.Epoch(epoch)) {
			if _, err := step.Run(b.X, b.Y); err != nil {
				t.Fatal(err)
			}
			steps++
		}
	}
	return train.Evaluate(dev, net, testSet, 1000, true, dtype.F16)
}

// TestStormRecoveryMNIST trains the MNIST MLP (F16, two epochs of 469
// steps) through an overflow storm of 60 steps early in the first epoch,
// which backs the scale off to its floor: with the recovery from the floor
// the run ends within half a point of one without a storm; with growth at
// the usual interval only (the rule before the recovery), the scale stays
// at 2^-14 for the rest of the run and the accuracy shows it.
func TestStormRecoveryMNIST(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the MNIST MLP three times; skipped with -short")
	}
	var dir string
	for _, d := range []string{os.Getenv("MIXPREC_DATA"), filepath.Join("..", "data")} {
		if _, err := os.Stat(filepath.Join(d, "mnist", "train-images-idx3-ubyte.gz")); d != "" && err == nil {
			dir = filepath.Join(d, "mnist")
			break
		}
	}
	if dir == "" {
		t.Skip("MNIST is not in ../data/mnist or $MIXPREC_DATA/mnist; run make data")
	}
	trainSet, testSet, err := datasets.LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	trainSet, testSet = trainSet.Reshape(784), testSet.Reshape(784)
	const from, to = 100, 160
	clean := stormRun(t, trainSet, testSet, amp.NewGradScaler(), -1, -1)
	recovering := amp.NewGradScaler()
	stormed := stormRun(t, trainSet, testSet, recovering, from, to)
	floored := amp.NewGradScaler(amp.RecoveryInterval(2000)) // the usual interval only
	before := stormRun(t, trainSet, testSet, floored, from, to)
	t.Logf("test accuracy: %.4f without a storm; after a storm of %d steps %.4f with the recovery (final scale %v), %.4f without (final scale %v)",
		clean, to-from, stormed, recovering.LossScale(), before, floored.LossScale())
	if math.Abs(stormed-clean) > 0.005 {
		t.Errorf("accuracy after the storm %.4f, without one %.4f: more than half a point apart", stormed, clean)
	}
	if floored.LossScale() != amp.DefaultMinScale {
		t.Errorf("without the recovery the scale ended at %v; the storm was meant to leave it at the floor", floored.LossScale())
	}
}
