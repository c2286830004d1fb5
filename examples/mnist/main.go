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
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mixprec/mixprec/amp"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU opens
	"github.com/mixprec/mixprec/datasets"
	_ "github.com/mixprec/mixprec/device/cpu" // the CPU backend
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/runstate"
)

func main() {
	os.Exit(cli.Exit(os.Stderr, "mnist", cli.Catch(func() error { return run(os.Args[1:], os.Stdout, os.Stderr) })))
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

// evalBatch is the test set's batch size.
const evalBatch = 1000

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	spec, err := o.parse(args, stdout)
	if err != nil {
		return err
	}
	env, err := train.Open("mnist", &o.TrainFlags, stdout, stderr) // the device, and the ranks under -dist
	if err != nil {
		return err
	}
	defer env.Close()
	trainSet, testSet, err := load(o.dataset, o.Data)
	if err != nil {
		return err
	}
	if err := env.Agree(o.settings(), trainSet); err != nil { // under -dist, every rank's flags and data alike
		return err
	}

	net := spec.Build(rand.New(rand.NewPCG(o.Seed, 0x6d6e697374)))
	if len(spec.Input) == 1 { // an MLP: feed (N, 784) rather than (N, 1, 28, 28)
		trainSet, testSet = trainSet.Reshape(784), testSet.Reshape(784)
	}
	nn.To(net, env.Dev)
	defer nn.Release(net)
	if o.State.Eval != "" {
		return env.EvalOnly(&o.Flags, o.State.Eval, net, testSet, evalBatch, o.dataset)
	}
	opt, err := train.NewOptimizer(o.Optimizer, net.Params(), o.LR, spec.Train)
	if err != nil {
		return err
	}
	defer optim.Release(opt)
	// The step reads no gradient between Backward and Unscale, so the
	// weight gradients may be unscaled as the GEMM stores them, unless
	// -accum adds up several backward passes' first.
	scaler := amp.NewGradScaler(amp.For(o.AMP.DType()), amp.UnscaleAsStored(o.Accum == 1))
	step := &train.Step{Dev: env.Dev, Net: net, Opt: opt, Scaler: scaler, Low: o.AMP.DType(),
		Accum: o.Accum, Segments: o.Checkpoint.Segments(nn.DefaultSegments(len(net.Layers)))} // 0: no checkpointing
	if err := env.Parallel(step); err != nil { // under -dist: rank 0's weights, gradients averaged
		return err
	}
	loop := &train.Loop{Env: env, Flags: &o.Flags, Recipe: spec.Train, Step: step, Train: trainSet, Test: testSet,
		Load: o.batches(spec.Train, step), EvalBatch: evalBatch, Data: o.dataset}

	env.Log("%s: %s, %d parameters, %s on %s, batch %s, amp %s, checkpointing %s", o.dataset, o.Model, nn.CountParams(net),
		o.Optimizer, env.Dev.Name(), o.BatchText(), o.AMP, o.Checkpoint)
	env.LogNotes(o.AMP, scaler)
	defer loop.Close()
	// Resumed with -resume: a checkpoint's configuration must be this run's;
	// the rest of the run's state is in the checkpoint itself.
	pos, err := loop.Start(o.State, o.Profile, runstate.Run{Model: net, Optimizer: opt.(optim.Stateful), Scaler: scaler,
		Config: train.Config("mnist", &o.Flags, env.Ranks, map[string]string{"dataset": o.dataset})})
	if err != nil {
		return err
	}
	res, err := loop.Run(pos)
	if err != nil {
		return err
	}
	return loop.Report(res)
}

// options are the program's flags.
type options struct {
	cli.TrainFlags
	dataset string
}

// parse parses args into o and returns the chosen model's spec.
func (o *options) parse(args []string, stdout io.Writer) (models.Spec, error) {
	fs := cli.NewFlagSet("mnist", "Trains a classifier on MNIST (or Fashion-MNIST) in FP32 or mixed precision and\n"+
		"reports accuracy, speed and peak memory. Each model trains with its own recipe\n"+
		"(batch, optimiser, learning rate and schedule) unless a flag says otherwise.")
	o.Register(fs, mnistModels(), []string{"sgd", "adam", "adamw"}, "about the square root of the number of layers")
	o.dataset = "mnist"
	fs.Var(cli.NewChoice(&o.dataset, "mnist", "fashion"), "dataset", "mnist, or fashion for Fashion-MNIST")
	return o.TrainFlags.Parse(fs, args, stdout)
}

// settings are the flags every rank of a data-parallel run must share.
func (o *options) settings() map[string]string {
	s := o.Settings()
	s["-dataset"] = o.dataset
	return s
}

// batches are the loader's options for every epoch: shuffled, each batch
// rounded (by the loader's worker, while the previous step runs) to the
// dtype the model's first layer takes, and shifted at random when the
// recipe says so.
func (o *options) batches(r models.Recipe, step *train.Step) []datasets.Option {
	opts := []datasets.Option{datasets.Shuffle(o.Seed), datasets.Bits(step.InputDType())}
	if r.Shift > 0 {
		// Fill the uncovered strip with the normalised black background.
		mean, std := float32(datasets.MNISTMean), float32(datasets.MNISTStd)
		if o.dataset == "fashion" {
			mean, std = datasets.FashionMNISTMean, datasets.FashionMNISTStd
		}
		opts = append(opts, datasets.Augment(datasets.RandomShift(r.Shift, -mean/std)))
	}
	return opts
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
