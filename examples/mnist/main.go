// Command mnist trains a classifier on MNIST (or Fashion-MNIST) with
// mixprec, in FP32 or automatic mixed precision, and reports accuracy,
// speed and peak memory.
//
//	go run ./examples/mnist -epochs 3 -amp f16 -json
//
// The training loop below is the one a user writes: one graph per step,
// autocast on the graph, a gradient scaler around backward and the
// optimiser step, and an explicit Release.
//
// Each model trains with the recipe beside it in package models (batch
// size, optimiser, learning rate, schedule) unless a flag says otherwise.
// A run whose loss becomes NaN or infinite stops, prints its summary (with
// -json, null for every number that is not finite), names the step on
// standard error and exits with status 3; a bad flag exits with 2, any
// other failure with 1, and -h with 0.
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU opens
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	_ "github.com/mixprec/mixprec/device/cpu" // the CPU backend
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/runstate"
)

func main() {
	os.Exit(cli.Exit(os.Stderr, "mnist", run(os.Args[1:], os.Stdout, os.Stderr)))
}

// mnistModels are the models that take one MNIST image, flat or not.
func mnistModels() []models.Spec {
	var fit []models.Spec
	for _, s := range models.Specs() {
		if slices.Equal(s.Input, []int{784}) || slices.Equal(s.Input, []int{1, 28, 28}) {
			fit = append(fit, s)
		}
	}
	return fit
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("mnist", "Trains a classifier on MNIST (or Fashion-MNIST) in FP32 or mixed precision and\n"+
		"reports accuracy, speed and peak memory. Each model trains with its own recipe\n"+
		"(batch, optimiser, learning rate and schedule) unless a flag says otherwise.")
	var f cli.Flags
	f.Register(fs, mnistModels(), []string{"sgd", "adam", "adamw"}, "about the square root of the number of layers")
	dataset := "mnist"
	fs.Var(cli.NewChoice(&dataset, "mnist", "fashion"), "dataset", "mnist, or fashion for Fashion-MNIST")
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

	// Under -dist nccl, each rank of a machine takes its own GPU.
	if err := dist.BindDevice(); err != nil {
		return err
	}
	dev, note, err := cli.OpenDevice(f.Device)
	if err != nil {
		return err
	}
	if w := cli.DeviceWarning(dev); w != "" {
		fmt.Fprintf(stderr, "%s: %s: %s\n", "mnist", dev.Name(), w)
	}
	// Data parallelism: one process per rank under mpirun. Every rank
	// trains on its shard of each batch; rank 0 alone prints and saves.
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
	trainSet, testSet, err := load(dataset, f.Data)
	if err != nil {
		return err
	}
	if comm != nil {
		// Ranks that differ in any setting, or in their data, would fail
		// late and obscurely, or train silently wrong: all stop now,
		// with rank 0 naming the setting and the ranks.
		settings := f.Settings()
		settings["-dataset"], settings["data"] = dataset, train.Fingerprint(trainSet)
		if err := distributed.AgreeSettings(comm, dev, settings); err != nil {
			return train.Together(comm, err, stderr, "mnist")
		}
	}
	rng := rand.New(rand.NewPCG(f.Seed, 0x6d6e697374))
	net := spec.Build(rng)
	if len(spec.Input) == 1 { // an MLP: feed (N, 784) rather than (N, 1, 28, 28)
		trainSet, testSet = trainSet.Reshape(784), testSet.Reshape(784)
	}
	nn.To(net, dev)
	defer nn.Release(net)
	var dp *distributed.DataParallel
	if comm != nil {
		if dp, err = distributed.New(comm, train.Entries(net)); err != nil { // every rank starts from rank 0's weights
			return train.Together(comm, err, stderr, "mnist")
		}
	}
	opt, err := train.NewOptimizer(f.Optimizer, net.Params(), f.LR, recipe)
	if err != nil {
		return err
	}
	defer optim.Release(opt)

	lowType, useAMP := f.AMP.DType(), f.AMP.On()
	// The batch in the dtype of the op it feeds: F16 or BF16 for a first
	// Linear or convolution under autocast (the same bits as its own cast,
	// and the loader rounds it; see datasets.Bits).
	inputType := train.InputDType(net, lowType)
	segments := f.Checkpoint.Segments(nn.DefaultSegments(len(net.Layers))) // 0: off
	forward := func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
		if segments == 0 {
			return net.Forward(g, x)
		}
		return nn.CheckpointSequential(g, net.Layers, segments, x)
	}
	// The loop reads no gradient between Backward and Unscale, so the weight
	// gradients may be unscaled as the GEMM stores them.
	scaler := amp.NewGradScaler(amp.For(lowType), amp.UnscaleAsStored(true))
	if st.Eval != "" {
		return evaluate(stdout, f, dataset, dev, net, testSet, st.Eval)
	}
	var shard []datasets.Option
	if ranks > 1 {
		shard = []datasets.Option{datasets.Shard(rank, ranks)}
	}
	perEpoch := datasets.NumBatches(trainSet, f.Batch, shard...)
	total := train.TotalSteps(perEpoch, f.Epochs, f.MaxSteps)
	// What a checkpoint must share with the run that resumes it: the rest
	// of the run's state is in the checkpoint itself.
	saver, err := train.NewSaver("mnist", st, runstate.Run{Model: net, Optimizer: opt.(optim.Stateful), Scaler: scaler, Config: map[string]string{
		"program": "mnist", "dataset": dataset, "model": f.Model, "amp": f.AMP.String(), "batch": fmt.Sprint(f.Batch),
		"seed": fmt.Sprint(f.Seed), "optim": f.Optimizer, "lr": fmt.Sprint(f.LR), "epochs": fmt.Sprint(f.Epochs),
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
			return train.Together(comm, err, stderr, "mnist")
		}
	}
	// -profile, -trace, -metrics and -tensorboard: rec.Prof is nil without
	// the first two, and then costs the loop nothing.
	rec, err := train.NewRecorder(pf, dev, profile.RunInfo{Label: train.Label(f.AMP, f.Checkpoint), Program: "mnist",
		Model: f.Model, AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(), Batch: f.Batch, Seed: f.Seed})
	if err != nil {
		return err
	}
	defer rec.Close()
	prof := rec.Prof

	log := func(format string, a ...any) {
		if !f.JSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	log("%s: %s, %d parameters, %s on %s, batch %d, amp %s, checkpointing %s", dataset, f.Model, nn.CountParams(net), f.Optimizer, dev.Name(), f.Batch, f.AMP, f.Checkpoint)
	if note != "" {
		log("(CUDA not used: %s)", note)
	}
	if useAMP && !scaler.IsEnabled() {
		log("(%s)", scaler.Note())
	}
	if st.Resume != "" {
		log("resuming from step %d (epoch %d, batch %d) of %s", pos.Step, pos.Epoch+1, pos.Batch, st.Resume)
	}

	batchOpts := func(epoch int) []datasets.Option {
		// The loader's worker rounds each batch to inputType while the
		// previous step runs.
		opts := append([]datasets.Option{datasets.Shuffle(f.Seed), datasets.Epoch(epoch), prof.Loader(), datasets.Bits(inputType)}, shard...)
		if recipe.Shift > 0 {
			// Fill the uncovered strip with the normalised black background.
			mean, std := float32(datasets.MNISTMean), float32(datasets.MNISTStd)
			if dataset == "fashion" {
				mean, std = datasets.FashionMNISTMean, datasets.FashionMNISTStd
			}
			opts = append(opts, datasets.Augment(datasets.RandomShift(recipe.Shift, -mean/std)))
		}
		return opts
	}
	schedule := train.NewSchedule(recipe, f.LR, perEpoch, total)
	dev.ResetPeak()
	steps, samples, trainTime, lastLoss := pos.Step, 0, 0.0, 0.0
	var peak device.MemStats // over training steps only, not evaluation
	var acc float64
	var diverged *cli.Diverged
	var interrupted *cli.Interrupted // a signal: stop, report, and exit with its status
	wall := time.Now()
	done := func() bool { return f.MaxSteps > 0 && steps >= f.MaxSteps }
	for epoch := pos.Epoch; epoch < f.Epochs; epoch++ {
		nn.SetTraining(net, true)
		bar := cli.NewProgress(stderr, fmt.Sprintf("epoch %d/%d", epoch+1, f.Epochs), perEpoch)
		start := time.Now()
		sum, n := 0.0, 0
		opts := batchOpts(epoch)
		if epoch == pos.Epoch && pos.Batch > 0 { // resumed mid-epoch: the sums so far come with it
			sum, n = pos.Sums["loss"], pos.Counts["loss"]
			opts = append(opts, datasets.From(pos.Batch))
		}
		for b := range prof.Steps(datasets.Batches(trainSet, f.Batch, opts...)) { // prof times the wait for each batch
			if done() {
				break
			}
			optim.Apply(opt, schedule, steps)
			g := autograd.NewGraph(dev, prof.Graph()) // and each op of the step
			if dp != nil {
				dp.Attach(g) // average gradients over the ranks while backward runs
			}
			if useAMP {
				amp.Autocast(g, lowType)
			}
			var x *autograd.Var
			// The batch is read where the loader put it, with no copy (on
			// the CPU): the loader refills it only after g is released.
			if inputType != dtype.F32 {
				x = g.InputBitsView(b.X16) // rounded by the loader: no F32 copy
			} else {
				x = g.InputView(b.X)
			}
			loss := nn.CrossEntropy(g, forward(g, x), b.Y)
			g.Backward(scaler.Scale(g, loss))
			if dp != nil {
				if err := prof.Phase(profile.Comm, dp.SyncGrads); err != nil { // the rest of the average, before the scaler looks for Inf/NaN
					return err
				}
			}
			// Unscaling apart from Step, as gradient clipping would, lets
			// the profile time the two apart.
			if err := prof.Phase(profile.Unscale, func() error { return scaler.Unscale(opt) }); err != nil {
				return err
			}
			if err := prof.Phase(profile.Optim, func() error { _, err := scaler.Step(opt); return err }); err != nil {
				return err
			}
			if err := scaler.Update(); err != nil {
				return err
			}
			for _, w := range scaler.Warnings() {
				fmt.Fprintf(stderr, "mnist: %v\n", w)
			}
			opt.ZeroGrad()
			l := float64(loss.Value.Item())
			g.Release()

			sum += l
			n++
			steps++
			samples += len(b.Y) * ranks
			rec.Step(steps, epoch+1, l, opt.LR(), scaler, len(b.Y)*ranks) // -metrics
			if math.IsNaN(l) || math.IsInf(l, 0) {
				// Steps on NaN weights teach nothing: stop and report. An
				// overflow the scaler skips shows in the gradients, not here:
				// the loss is computed in F32 from the unscaled forward pass.
				diverged = &cli.Diverged{Step: steps, Epoch: epoch + 1, Loss: l}
				break
			}
			bar.Update(n, fmt.Sprintf("loss %.4f", sum/float64(n)))
			pos = runstate.Position{Step: steps, Epoch: epoch, Batch: b.Index + 1,
				Sums: map[string]float64{"loss": sum}, Counts: map[string]int{"loss": n}}
			if err := saver.AfterStep(pos); err != nil {
				if !errors.As(err, &interrupted) {
					bar.Done()
					return err
				}
				break
			}
		}
		trainTime += time.Since(start).Seconds()
		bar.Done()
		lastLoss = sum / float64(max(n, 1))
		if comm != nil { // report the loss over every rank's samples, not rank 0's alone
			v := []float32{float32(sum), float32(n)}
			if err := distributed.AllReduceHost(comm, dev, v, device.Sum); err != nil {
				return err
			}
			lastLoss = float64(v[0]) / float64(max(v[1], 1))
		}
		peak = train.MaxPeak(peak, dev.MemStats())
		if diverged != nil || interrupted != nil {
			// A diverged model's accuracy is not worth measuring, and a
			// stopped run is not to be kept waiting for one.
			acc = math.NaN()
			break
		}
		acc = train.Evaluate(dev, net, testSet, 1000, useAMP, lowType)
		rec.Eval(steps, epoch+1, acc)
		dev.ResetPeak()
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s", epoch+1, lastLoss,
			100*acc, float64(samples)/max(trainTime, 1e-9))
		if done() {
			break
		}
	}
	if diverged == nil && interrupted == nil { // an interrupted run saved its checkpoint already
		if err := saver.Finish(pos); err != nil {
			return err
		}
	}
	s := cli.Summary{Model: f.Model, Data: dataset, Device: dev.Name(), AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(),
		Epochs: f.Epochs, Steps: steps, TrainLoss: cli.Float(lastLoss), TestAccuracy: cli.Float(acc),
		SamplesPerSec: cli.Float(float64(samples) / max(trainTime, 1e-9)), MsPerStep: cli.Float(1000 * trainTime / float64(max(steps, 1))),
		WallSeconds: cli.Float(time.Since(wall).Seconds()), SkippedSteps: scaler.Skipped(), FinalScale: cli.Float(scaler.LossScale()),
		PeakBytes: cli.Peaks(peak), Seed: f.Seed, Batch: f.Batch, LR: cli.Float(f.LR), Optimizer: f.Optimizer, DeviceFallback: note}
	if ranks > 1 {
		s.WorldSize = ranks
	}
	if diverged != nil {
		s.Diverged, s.DivergedStep = true, diverged.Step
	}
	s.Interrupted = interrupted != nil
	if err := rec.Finish(stderr); err != nil { // the profile's table, the trace and metrics files
		return err
	}
	if f.JSON {
		if err := cli.PrintJSON(stdout, rec.Summary(s)); err != nil {
			return err
		}
	} else {
		if scaler.IsEnabled() {
			log("loss scale %g, %d of %d steps skipped", s.FinalScale, s.SkippedSteps, steps)
		}
		log("peak memory: %s", device.FormatBytes(s.PeakBytes.Total))
	}
	if interrupted != nil {
		return interrupted // main names the signal and the checkpoint, and exits with the signal's status
	}
	if diverged != nil {
		return diverged // main says where, on stderr, and exits non-zero
	}
	return nil
}

// load reads the chosen data set from the data directory; Fashion-MNIST
// also from where Debian's package installs it.
func load(name, dataFlag string) (train, test *datasets.Dataset, err error) {
	root := datasets.Root(dataFlag)
	if name == "fashion" {
		return loadFashion([]string{filepath.Join(root, "fashion-mnist"), datasets.SystemFashionMNISTDir})
	}
	// Missing or corrupt files: say which command fetches them, not which
	// Go function.
	hint := fmt.Sprintf("fetch MNIST with `make data` in the mixprec repository or `go run ./cmd/mixprec fetch mnist -data %s`, or point -data at a directory whose mnist/ holds the files", root)
	return datasets.LoadMNIST(filepath.Join(root, "mnist"), datasets.FetchHint(hint))
}

// loadFashion loads Fashion-MNIST from the first of dirs that exists; when
// none does, the error names every one, since any could be where the user
// meant the files to be.
func loadFashion(dirs []string) (train, test *datasets.Dataset, err error) {
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return datasets.LoadFashionMNIST(d)
		}
	}
	return nil, nil, fmt.Errorf("no Fashion-MNIST directory: tried %s; install the Debian package dataset-fashion-mnist (it fills %s) or copy the four files into %s",
		strings.Join(dirs, ", "), datasets.SystemFashionMNISTDir, dirs[0])
}

// evaluate loads weights from path into net and reports their test
// accuracy, with -json in a summary of what evaluating measured.
func evaluate(stdout io.Writer, f cli.Flags, dataset string, dev device.Device, net nn.Module, testSet *datasets.Dataset, path string) error {
	if err := train.LoadEval(path, net); err != nil {
		return err
	}
	s := train.EvalSummary(dev, net, testSet, 1000, f.AMP.On(), f.AMP.DType())
	if !f.JSON {
		fmt.Fprintf(stdout, "%s: %s from %s: test accuracy %.2f%%\n", dataset, f.Model, path, 100*s.TestAccuracy)
		return nil
	}
	s.Model, s.Data, s.Device, s.AMP, s.Checkpoint, s.Seed, s.Optimizer = f.Model, dataset, dev.Name(), f.AMP.String(), f.Checkpoint.String(), f.Seed, f.Optimizer
	return cli.PrintJSON(stdout, s)
}
