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
//
// Exit statuses are examples/mnist's: 3 when the loss became NaN or
// infinite (after the summary), 2 for a bad flag, 1 for any other failure.
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/mixprec/mixprec/amp"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU is present
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	_ "github.com/mixprec/mixprec/device/cpu" // the CPU backend
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/runstate"
)

func main() {
	os.Exit(cli.Exit(os.Stderr, "cifar", run(os.Args[1:], os.Stdout, os.Stderr)))
}

func run(args []string, stdout, stderr io.Writer) error {
	resnet, err := models.Lookup("resnet20")
	if err != nil {
		return err
	}
	fs := cli.NewFlagSet("cifar", "Trains a ResNet-20 on CIFAR-10 (the binary version, in DATA/cifar10) with SGD,\n"+
		"Nesterov momentum, weight decay and a cosine schedule, in FP32 or mixed precision,\n"+
		"and reports accuracy, speed and peak memory.")
	var f cli.Flags
	f.Register(fs, []models.Spec{resnet}, []string{"sgd-nesterov", "sgd"}, "one segment per residual stage, and the stem and head")
	synthetic := fs.Bool("synthetic", false, "train on random data of CIFAR-10's shapes (speed and memory measurements only)")
	var workers int
	cli.IntVar(fs, &workers, "workers", 2, 1, 0, "background workers preparing and augmenting batches")
	var wd float64
	cli.FloatVar(fs, &wd, "wd", resnet.Train.WeightDecay, "weight decay", true, "weight decay")
	var st cli.StateFlags
	st.Register(fs)
	var dist cli.DistFlags
	dist.Register(fs)
	var pf cli.ProfileFlags
	pf.Register(fs)
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := st.Check(); err != nil {
		return err
	}
	if err := pf.Check(); err != nil {
		return err
	}
	if st.Eval != "" && pf.Any() {
		return cli.Usagef("-eval only evaluates: -profile, -trace, -metrics and -tensorboard are about training")
	}
	spec := f.Resolve(fs)
	recipe := spec.Train
	recipe.WeightDecay = wd
	tag := ""
	if *synthetic {
		tag = "[synthetic data] "
	}
	log := func(format string, a ...any) {
		if !f.JSON {
			fmt.Fprintf(stdout, tag+format+"\n", a...)
		}
	}

	// Under -dist nccl, each rank of a machine takes its own GPU.
	if err := dist.BindDevice(); err != nil {
		return err
	}
	dev, note, err := cli.OpenDevice(f.Device)
	if err != nil {
		return err
	}
	if w := cli.DeviceWarning(dev); w != "" {
		fmt.Fprintf(stderr, "%s: %s: %s\n", "cifar", dev.Name(), w)
	}
	// Data parallelism: one process per rank under mpirun (see examples/mnist).
	comm, closeDist, err := dist.Open(dev) // nil without -dist
	if err != nil {
		return err
	}
	defer closeDist()
	rank, ranks := 0, 1
	if comm != nil {
		rank, ranks = comm.Rank(), comm.Size()
		if rank != 0 {
			stdout, stderr = io.Discard, io.Discard
			st.Save, st.SaveEvery = "", 0
			pf = cli.ProfileFlags{} // rank 0 profiles and writes for the run
		}
	}
	// Every batch is full (DropLast), so a batch larger than the training
	// set would train on nothing.
	tooBig := func(n int) error {
		return cli.Usagef("-batch %d: the training set holds only %d samples, and short batches are dropped", f.Batch, n)
	}
	var trainSet, testSet *datasets.Dataset
	if *synthetic {
		n := 50000
		if f.Batch > n {
			return tooBig(n)
		}
		if f.MaxSteps > 0 && f.MaxSteps < n/f.Batch+1 {
			n = min(n, f.MaxSteps*f.Batch) // generate only what the run will use
		}
		trainSet = datasets.Synthetic(n, []int{3, 32, 32}, 10, f.Seed)
		// Accuracy on random labels means nothing; a small test set keeps
		// the measurement about training.
		testSet = datasets.Synthetic(1000, []int{3, 32, 32}, 10, f.Seed+1)
	} else if trainSet, testSet, err = datasets.LoadCIFAR10(filepath.Join(datasets.Root(f.Data), "cifar10")); err != nil {
		return fmt.Errorf("%w; or run with -synthetic to measure speed and memory on random data", err)
	}
	if comm != nil { // see examples/mnist
		settings := f.Settings()
		settings["-synthetic"], settings["-wd"], settings["data"] = fmt.Sprint(*synthetic), fmt.Sprint(wd), train.Fingerprint(trainSet)
		if err := distributed.AgreeSettings(comm, dev, settings); err != nil {
			return train.Together(comm, err, stderr, "cifar")
		}
	}
	shard := []datasets.Option{datasets.DropLast()}
	if ranks > 1 {
		shard = append(shard, datasets.Shard(rank, ranks))
	}
	perEpoch := datasets.NumBatches(trainSet, f.Batch, shard...)
	if perEpoch == 0 {
		return tooBig(trainSet.Len())
	}

	rng := rand.New(rand.NewPCG(f.Seed, 0x63696661))
	net := spec.Build(rng)
	nn.To(net, dev)
	defer nn.Release(net)
	var dp *distributed.DataParallel
	if comm != nil {
		if dp, err = distributed.New(comm, train.Entries(net)); err != nil {
			return train.Together(comm, err, stderr, "cifar")
		}
	}
	opt, err := train.NewOptimizer(f.Optimizer, net.Params(), f.LR, recipe)
	if err != nil {
		return err
	}
	defer optim.Release(opt)
	total := train.TotalSteps(perEpoch, f.Epochs, f.MaxSteps)
	schedule := train.NewSchedule(recipe, f.LR, perEpoch, total)

	// The loop reads no gradient between Backward and Unscale, so the weight
	// gradients may be unscaled as the GEMM stores them.
	scaler := amp.NewGradScaler(amp.For(f.AMP.DType()), amp.UnscaleAsStored(true))
	step := train.Step{Dev: dev, Net: net, Opt: opt, Scaler: scaler, Low: f.AMP.DType(),
		Segments: f.Checkpoint.Segments(len(net.Layers))} // auto: one segment per stage
	if dp != nil {
		step.Attach, step.Sync = dp.Attach, dp.SyncGrads
	}
	data := "cifar10"
	if *synthetic {
		data = "synthetic"
	}
	if st.Eval != "" {
		if err := train.LoadEval(st.Eval, net); err != nil {
			return err
		}
		s := train.EvalSummary(dev, net, testSet, 500, f.AMP.On(), f.AMP.DType())
		log("%s from %s: test accuracy %.2f%%", spec.Name, st.Eval, 100*s.TestAccuracy)
		if f.JSON {
			s.Model, s.Data, s.Device, s.AMP, s.Checkpoint, s.Seed, s.Optimizer = f.Model, data, dev.Name(), f.AMP.String(), f.Checkpoint.String(), f.Seed, f.Optimizer
			return cli.PrintJSON(stdout, s)
		}
		return nil
	}
	saver, err := train.NewSaver("cifar", st, runstate.Run{Model: net, Optimizer: opt.(optim.Stateful), Scaler: scaler, Config: map[string]string{
		"program": "cifar", "data": data, "model": f.Model, "amp": f.AMP.String(), "batch": fmt.Sprint(f.Batch),
		"seed": fmt.Sprint(f.Seed), "optim": f.Optimizer, "lr": fmt.Sprint(f.LR), "wd": fmt.Sprint(wd), "epochs": fmt.Sprint(f.Epochs),
		"max_steps": fmt.Sprint(f.MaxSteps), "checkpoint": f.Checkpoint.String(), "ranks": fmt.Sprint(ranks)},
		Extent: runstate.Extent{Epochs: f.Epochs, PerEpoch: perEpoch, Steps: total}}, stderr)
	if err != nil {
		return err
	}
	defer saver.Close()
	pos, err := saver.Resume()
	if err != nil {
		return err
	}
	if comm != nil { // every rank must go on from the same step
		if err := distributed.AgreeSettings(comm, dev, map[string]string{"-resume": train.Resumed(st, pos)}); err != nil {
			return train.Together(comm, err, stderr, "cifar")
		}
	}
	rec, err := train.NewRecorder(pf, dev, profile.RunInfo{Label: train.Label(f.AMP, f.Checkpoint), Program: "cifar",
		Model: f.Model, AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(), Batch: f.Batch, Seed: f.Seed})
	if err != nil {
		return err
	}
	defer rec.Close()
	step.Prof = rec.Prof

	log("cifar10: %s, %d parameters, %s lr %g cosine, wd %g, batch %d, on %s, amp %s, checkpointing %s",
		spec.Name, nn.CountParams(net), f.Optimizer, f.LR, wd, f.Batch, dev.Name(), f.AMP, f.Checkpoint)
	if note != "" {
		log("(CUDA not used: %s)", note)
	}
	if f.AMP.On() && !scaler.IsEnabled() {
		log("(%s)", scaler.Note())
	}
	if st.Resume != "" {
		log("resuming from step %d (epoch %d, batch %d) of %s", pos.Step, pos.Epoch+1, pos.Batch, st.Resume)
	}

	dev.ResetPeak()
	var peak device.MemStats
	var diverged *cli.Diverged
	var interrupted *cli.Interrupted // a signal: stop, report, and exit with its status
	steps, trainTime, lastLoss, acc := pos.Step, 0.0, 0.0, 0.0
	done := 0 // steps taken by this process, for the speed figures
	wall := time.Now()
	for epoch := pos.Epoch; epoch < f.Epochs && steps < total; epoch++ {
		nn.SetTraining(net, true)
		bar := cli.NewProgress(stderr, fmt.Sprintf("%sepoch %d/%d", tag, epoch+1, f.Epochs), perEpoch)
		start := time.Now()
		sum, n := 0.0, 0
		opts := append([]datasets.Option{datasets.Shuffle(f.Seed), datasets.Epoch(epoch),
			datasets.Workers(workers), datasets.Augment(datasets.RandomCropFlip(4)), rec.Prof.Loader()}, shard...)
		if epoch == pos.Epoch && pos.Batch > 0 { // resumed mid-epoch: the sums so far come with it
			sum, n = pos.Sums["loss"], pos.Counts["loss"]
			opts = append(opts, datasets.From(pos.Batch))
		}
		for b := range rec.Prof.Steps(datasets.Batches(trainSet, f.Batch, opts...)) {
			optim.Apply(opt, schedule, steps)
			l, err := step.Run(b.X, b.Y)
			if err != nil {
				return err
			}
			for _, w := range scaler.Warnings() {
				fmt.Fprintf(stderr, "cifar: %v\n", w)
			}
			sum += l
			n++
			steps++
			done++
			rec.Step(steps, epoch+1, l, opt.LR(), scaler, len(b.Y)*ranks)
			if math.IsNaN(l) || math.IsInf(l, 0) {
				diverged = &cli.Diverged{Step: steps, Epoch: epoch + 1, Loss: l} // see examples/mnist
				break
			}
			bar.Update(n, fmt.Sprintf("loss %.4f lr %.4f", sum/float64(n), opt.LR()))
			pos = runstate.Position{Step: steps, Epoch: epoch, Batch: b.Index + 1,
				Sums: map[string]float64{"loss": sum}, Counts: map[string]int{"loss": n}}
			if err := saver.AfterStep(pos); err != nil {
				if !errors.As(err, &interrupted) {
					bar.Done()
					return err
				}
				break
			}
			if steps >= total {
				break
			}
		}
		trainTime += time.Since(start).Seconds()
		bar.Done()
		lastLoss = sum / float64(max(n, 1))
		if comm != nil { // the loss over every rank's samples
			v := []float32{float32(sum), float32(n)}
			if err := distributed.AllReduceHost(comm, dev, v, device.Sum); err != nil {
				return err
			}
			lastLoss = float64(v[0]) / float64(max(v[1], 1))
		}
		peak = train.MaxPeak(peak, dev.MemStats())
		if diverged != nil || interrupted != nil { // see examples/mnist
			acc = math.NaN()
			break
		}
		acc = train.Evaluate(dev, net, testSet, 500, f.AMP.On(), f.AMP.DType())
		rec.Eval(steps, epoch+1, acc)
		dev.ResetPeak()
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s, %.1f ms/step", epoch+1, lastLoss,
			100*acc, float64(done*f.Batch)/max(trainTime, 1e-9), 1000*trainTime/float64(max(done, 1)))
	}
	if diverged == nil && interrupted == nil { // an interrupted run saved its checkpoint already
		if err := saver.Finish(pos); err != nil {
			return err
		}
	}
	s := cli.Summary{Model: f.Model, Data: data, Device: dev.Name(), AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(),
		Epochs: f.Epochs, Steps: steps, TrainLoss: cli.Float(lastLoss), TestAccuracy: cli.Float(acc),
		SamplesPerSec: cli.Float(float64(done*f.Batch*ranks) / max(trainTime, 1e-9)), MsPerStep: cli.Float(1000 * trainTime / float64(max(done, 1))),
		WallSeconds: cli.Float(time.Since(wall).Seconds()), SkippedSteps: scaler.Skipped(), FinalScale: cli.Float(scaler.LossScale()),
		PeakBytes: cli.Peaks(peak), Seed: f.Seed, Batch: f.Batch, LR: cli.Float(f.LR), Optimizer: f.Optimizer, DeviceFallback: note}
	if ranks > 1 {
		s.WorldSize = ranks
	}
	if diverged != nil {
		s.Diverged, s.DivergedStep = true, diverged.Step
	}
	s.Interrupted = interrupted != nil
	if err := rec.Finish(stderr); err != nil {
		return err
	}
	if f.JSON {
		if err := cli.PrintJSON(stdout, rec.Summary(s)); err != nil {
			return err
		}
	} else {
		log("peak memory: %s (activations %s)", device.FormatBytes(s.PeakBytes.Total), device.FormatBytes(s.PeakBytes.Activation))
	}
	if interrupted != nil {
		return interrupted // main names the signal and the checkpoint, and exits with the signal's status
	}
	if diverged != nil {
		return diverged
	}
	return nil
}
