// Command cifar trains a ResNet-20 on CIFAR-10 with mixprec, in FP32 or
// automatic mixed precision, optionally with gradient checkpointing per
// residual stage, and reports accuracy, speed and peak memory.
//
//	go run ./examples/cifar -data DIR -epochs 30 -amp f16
//
// CIFAR-10 (the binary version) must be in DIR/cifar10; without it the
// program says where to get it and exits. -synthetic trains on random data
// of the right shapes instead, for speed and memory measurements only: every
// line it prints and its JSON say so.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU is present
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
			fmt.Fprintln(os.Stderr, "cifar:", err)
		}
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cifar", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f cli.Flags
	f.Register(fs, cli.Flags{Model: "resnet20", Epochs: 30, Batch: 128, LR: 0.1})
	synthetic := fs.Bool("synthetic", false, "train on random data of CIFAR-10's shapes (speed and memory measurements only)")
	workers := fs.Int("workers", 2, "background workers preparing and augmenting batches")
	wd := fs.Float64("wd", 5e-4, "weight decay")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Model != "resnet20" {
		return fmt.Errorf("-model %q: want resnet20", f.Model)
	}
	if f.Optimizer != "" && f.Optimizer != "sgd" {
		return fmt.Errorf("-optim %q: the CIFAR recipe is SGD with Nesterov momentum", f.Optimizer)
	}
	tag := ""
	if *synthetic {
		tag = "[synthetic data] "
	}
	log := func(format string, a ...any) {
		if !f.JSON {
			fmt.Fprintf(stdout, tag+format+"\n", a...)
		}
	}

	dev, note, err := cli.OpenDevice(f.Device)
	if err != nil {
		return err
	}
	var trainSet, testSet *datasets.Dataset
	if *synthetic {
		n := 50000
		if f.MaxSteps > 0 {
			n = min(n, f.MaxSteps*f.Batch) // generate only what the run will use
		}
		trainSet = datasets.Synthetic(n, []int{3, 32, 32}, 10, f.Seed)
		// Accuracy on random labels means nothing; a small test set keeps
		// the measurement about training.
		testSet = datasets.Synthetic(1000, []int{3, 32, 32}, 10, f.Seed+1)
	} else if trainSet, testSet, err = datasets.LoadCIFAR10(filepath.Join(datasets.Root(f.Data), "cifar10")); err != nil {
		return fmt.Errorf("%w; or run with -synthetic to measure speed and memory on random data", err)
	}

	rng := rand.New(rand.NewPCG(f.Seed, 0x63696661))
	net := models.ResNet20(rng, 10)
	nn.To(net, dev)
	defer nn.Release(net)
	opt := optim.NewSGD(net.Params(), optim.LR(float32(f.LR)), optim.Momentum(0.9), optim.Nesterov(), optim.WeightDecay(float32(*wd)))
	defer optim.Release(opt)
	perEpoch := datasets.NumBatches(trainSet, f.Batch, datasets.DropLast())
	total := perEpoch * f.Epochs
	if f.MaxSteps > 0 {
		total = min(total, f.MaxSteps)
	}
	schedule := optim.Cosine(float32(f.LR), 0, min(perEpoch, total/10), total)

	lowType, useAMP, _ := f.AMPType()
	scaler := amp.NewGradScaler(amp.For(lowType))
	segments, _ := f.Segments()
	if segments == -1 {
		segments = len(net.Layers) // auto: one segment per residual stage (and the stem and head)
	}
	forward := func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
		if segments == 0 {
			return net.Forward(g, x)
		}
		return nn.CheckpointSequential(g, net.Layers, segments, x)
	}

	log("cifar10: resnet20, %d parameters, SGD nesterov lr %g cosine, on %s, amp %s, checkpointing %s", nn.CountParams(net), f.LR, dev.Name(), f.AMP, f.Checkpoint)
	if note != "" {
		log("(CUDA not used: %s)", note)
	}
	if useAMP && !scaler.IsEnabled() {
		log("(%s)", scaler.Note())
	}

	dev.ResetPeak()
	var peak device.MemStats
	steps, trainTime, lastLoss, acc := 0, 0.0, 0.0, 0.0
	wall := time.Now()
	for epoch := range f.Epochs {
		nn.SetTraining(net, true)
		bar := cli.NewProgress(stderr, fmt.Sprintf("%sepoch %d/%d", tag, epoch+1, f.Epochs), perEpoch)
		start := time.Now()
		sum, n := 0.0, 0
		batches := datasets.Batches(trainSet, f.Batch, datasets.Shuffle(f.Seed), datasets.Epoch(epoch), datasets.DropLast(),
			datasets.Workers(*workers), datasets.Augment(datasets.RandomCropFlip(4)))
		for b := range batches {
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
			bar.Update(n, fmt.Sprintf("loss %.4f lr %.4f", sum/float64(n), opt.LR()))
			if steps >= total {
				break
			}
		}
		trainTime += time.Since(start).Seconds()
		bar.Done()
		lastLoss = sum / float64(max(n, 1))
		peak = train.MaxPeak(peak, dev.MemStats())
		acc = train.Evaluate(dev, net, testSet, 500, useAMP, lowType)
		dev.ResetPeak()
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s, %.1f ms/step", epoch+1, lastLoss,
			100*acc, float64(steps*f.Batch)/trainTime, 1000*trainTime/float64(steps))
		if steps >= total {
			break
		}
	}
	data := "cifar10"
	if *synthetic {
		data = "synthetic"
	}
	s := cli.Summary{Model: f.Model, Data: data, Device: dev.Name(), AMP: f.AMP, Checkpoint: f.Checkpoint,
		Epochs: f.Epochs, Steps: steps, TrainLoss: lastLoss, TestAccuracy: acc,
		SamplesPerSec: float64(steps*f.Batch) / trainTime, MsPerStep: 1000 * trainTime / float64(max(steps, 1)),
		WallSeconds: time.Since(wall).Seconds(), SkippedSteps: scaler.Skipped(), FinalScale: float64(scaler.LossScale()),
		PeakBytes: cli.Peaks(peak), Seed: f.Seed, Batch: f.Batch, LR: f.LR, Optimizer: "sgd-nesterov", DeviceFallback: note}
	if f.JSON {
		return cli.PrintJSON(stdout, s)
	}
	log("peak memory: %s (activations %s)", device.FormatBytes(s.PeakBytes.Total), device.FormatBytes(s.PeakBytes.Activation))
	return nil
}
