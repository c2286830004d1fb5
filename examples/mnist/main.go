// Command mnist trains a classifier on MNIST (or Fashion-MNIST) with
// mixprec, in FP32 or automatic mixed precision, and reports accuracy,
// speed and peak memory.
//
//	go run ./examples/mnist -epochs 3 -amp f16 -json
//
// The training loop below is the one a user writes: one graph per step,
// autocast on the graph, a gradient scaler around backward and the
// optimiser step, and an explicit Release.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU opens
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	_ "github.com/mixprec/mixprec/device/cpu" // the CPU backend
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mnist:", err)
		}
		os.Exit(1)
	}
}

// model is a network and how to train it by default.
type model struct {
	net      *nn.Sequential
	flatten  bool // feed (N, 784) rather than (N, 1, 28, 28)
	optim    string
	lr       float64
	momentum float32
	oneCycle bool // one-cycle learning-rate schedule peaking at lr
	shift    int  // random translation by up to this many pixels (images only)
}

// build makes the named network with the optimiser settings that train it
// well in a few epochs.
func build(name string, rng *rand.Rand) (model, error) {
	spec, err := models.Lookup(name)
	if err != nil {
		return model{}, fmt.Errorf("-model: %w", err)
	}
	m := model{net: spec.Build(rng), flatten: len(spec.Input) == 1}
	switch name {
	case "mlp":
		m.optim, m.lr, m.momentum = "sgd", 0.05, 0.9 // the PyTorch peer's workload
	case "wide":
		m.optim, m.lr, m.momentum = "sgd", 0.02, 0.9
	case "cnn":
		m.optim, m.lr, m.oneCycle, m.shift = "adamw", 3e-3, true, 2
	default:
		m.optim, m.lr = "adamw", 1e-3
	}
	return m, nil
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mnist", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f cli.Flags
	f.Register(fs, cli.Flags{Model: "mlp", Epochs: 1, Batch: 128})
	dataset := fs.String("dataset", "mnist", "mnist or fashion")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}

	dev, note, err := cli.OpenDevice(f.Device)
	if err != nil {
		return err
	}
	trainSet, testSet, err := load(*dataset, f.Data)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(f.Seed, 0x6d6e697374))
	m, err := build(f.Model, rng)
	if err != nil {
		return err
	}
	if m.flatten {
		trainSet, testSet = trainSet.Reshape(784), testSet.Reshape(784)
	}
	lr := m.lr
	if f.LR > 0 {
		lr = f.LR
	}
	optName := m.optim
	if f.Optimizer != "" {
		optName = f.Optimizer
	}
	nn.To(m.net, dev)
	defer nn.Release(m.net)
	params := m.net.Params()
	var opt optim.Optimizer
	switch optName {
	case "sgd":
		opt = optim.NewSGD(params, optim.LR(float32(lr)), optim.Momentum(m.momentum))
	case "adam":
		opt = optim.NewAdam(params, optim.LR(float32(lr)))
	case "adamw":
		opt = optim.NewAdamW(params, optim.LR(float32(lr)))
	default:
		return fmt.Errorf("-optim %q: want sgd, adam or adamw", optName)
	}
	defer optim.Release(opt)

	lowType, useAMP, _ := f.AMPType()
	segments, _ := f.Segments() // 0 off, -1 auto
	forward := func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
		if segments == 0 {
			return m.net.Forward(g, x)
		}
		return nn.CheckpointSequential(g, m.net.Layers, max(segments, 0), x)
	}
	scaler := amp.NewGradScaler(amp.For(lowType))

	log := func(format string, a ...any) {
		if !f.JSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	log("%s: %s, %d parameters, %s on %s, amp %s, checkpointing %s", *dataset, f.Model, nn.CountParams(m.net), optName, dev.Name(), f.AMP, f.Checkpoint)
	if note != "" {
		log("(CUDA not used: %s)", note)
	}
	if useAMP && !scaler.IsEnabled() {
		log("(%s)", scaler.Note())
	}

	batchOpts := func(epoch int) []datasets.Option {
		opts := []datasets.Option{datasets.Shuffle(f.Seed), datasets.Epoch(epoch)}
		if m.shift > 0 {
			// Fill the uncovered strip with the normalised black background.
			mean, std := float32(datasets.MNISTMean), float32(datasets.MNISTStd)
			if *dataset == "fashion" {
				mean, std = datasets.FashionMNISTMean, datasets.FashionMNISTStd
			}
			opts = append(opts, datasets.Augment(datasets.RandomShift(m.shift, -mean/std)))
		}
		return opts
	}
	perEpoch := datasets.NumBatches(trainSet, f.Batch)
	schedule := optim.Constant(float32(lr))
	if m.oneCycle {
		total := perEpoch * f.Epochs
		if f.MaxSteps > 0 {
			total = min(total, f.MaxSteps)
		}
		schedule = optim.OneCycle(float32(lr), total, 0.25, 25, 1e4)
	}
	dev.ResetPeak()
	steps, samples, trainTime, lastLoss := 0, 0, 0.0, 0.0
	var peak device.MemStats // over training steps only, not evaluation
	var acc float64
	wall := time.Now()
	for epoch := range f.Epochs {
		nn.SetTraining(m.net, true)
		bar := cli.NewProgress(stderr, fmt.Sprintf("epoch %d/%d", epoch+1, f.Epochs), perEpoch)
		start := time.Now()
		sum, n := 0.0, 0
		for b := range datasets.Batches(trainSet, f.Batch, batchOpts(epoch)...) {
			optim.Apply(opt, schedule, steps)
			g := autograd.NewGraph(dev)
			if useAMP {
				amp.Autocast(g, lowType)
			}
			loss := nn.CrossEntropy(g, forward(g, g.Input(b.X)), b.Y)
			g.Backward(scaler.Scale(g, loss))
			if _, err := scaler.Step(opt); err != nil {
				return err
			}
			if err := scaler.Update(); err != nil {
				return err
			}
			opt.ZeroGrad()
			l := float64(loss.Value.Item())
			g.Release()

			sum += l
			n++
			steps++
			samples += len(b.Y)
			bar.Update(n, fmt.Sprintf("loss %.4f", sum/float64(n)))
			if f.MaxSteps > 0 && steps >= f.MaxSteps {
				break
			}
		}
		trainTime += time.Since(start).Seconds()
		bar.Done()
		lastLoss = sum / float64(max(n, 1))
		peak = train.MaxPeak(peak, dev.MemStats())
		acc = train.Evaluate(dev, m.net, testSet, 1000, useAMP, lowType)
		dev.ResetPeak()
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s", epoch+1, lastLoss,
			100*acc, float64(samples)/trainTime)
		if f.MaxSteps > 0 && steps >= f.MaxSteps {
			break
		}
	}
	s := cli.Summary{Model: f.Model, Data: *dataset, Device: dev.Name(), AMP: f.AMP, Checkpoint: f.Checkpoint,
		Epochs: f.Epochs, Steps: steps, TrainLoss: lastLoss, TestAccuracy: acc,
		SamplesPerSec: float64(samples) / trainTime, MsPerStep: 1000 * trainTime / float64(max(steps, 1)), WallSeconds: time.Since(wall).Seconds(),
		SkippedSteps: scaler.Skipped(), FinalScale: float64(scaler.LossScale()),
		PeakBytes: cli.Peaks(peak), Seed: f.Seed, Batch: f.Batch, LR: lr, Optimizer: optName, DeviceFallback: note}
	if f.JSON {
		return cli.PrintJSON(stdout, s)
	}
	if scaler.IsEnabled() {
		log("loss scale %g, %d of %d steps skipped", s.FinalScale, s.SkippedSteps, steps)
	}
	log("peak memory: %s", device.FormatBytes(s.PeakBytes.Total))
	return nil
}

// load reads the chosen data set from the data directory.
func load(name, dataFlag string) (train, test *datasets.Dataset, err error) {
	root := datasets.Root(dataFlag)
	switch name {
	case "mnist":
		return datasets.LoadMNIST(root + "/mnist")
	case "fashion":
		dir := root + "/fashion-mnist"
		if _, err := os.Stat(dir); err != nil {
			dir = datasets.FashionMNISTDir()
		}
		return datasets.LoadFashionMNIST(dir)
	}
	return nil, nil, fmt.Errorf("-dataset %q: want mnist or fashion", name)
}
