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
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/mixprec/mixprec/amp"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU is present
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
	os.Exit(cli.Exit(os.Stderr, "cifar", cli.Catch(func() error { return run(os.Args[1:], os.Stdout, os.Stderr) })))
}

// evalBatch is the test set's batch size.
const evalBatch = 500

func run(args []string, stdout, stderr io.Writer) error {
	var o options
	spec, err := o.parse(args, stdout)
	if err != nil {
		return err
	}
	env, err := train.Open("cifar", &o.TrainFlags, stdout, stderr) // the device, and the ranks under -dist
	if err != nil {
		return err
	}
	defer env.Close()
	if o.synthetic {
		env.Tag = "[synthetic data] "
	}
	trainSet, testSet, err := o.load()
	if err != nil {
		return err
	}
	if err := env.Agree(o.settings(), trainSet); err != nil { // under -dist, every rank's flags and data alike
		return err
	}

	net := spec.Build(rand.New(rand.NewPCG(o.Seed, 0x63696661)))
	nn.To(net, env.Dev)
	defer nn.Release(net)
	if o.State.Eval != "" {
		return env.EvalOnly(&o.Flags, o.State.Eval, net, testSet, evalBatch, o.data())
	}
	recipe := spec.Train
	recipe.WeightDecay = o.wd
	opt, err := train.NewOptimizer(o.Optimizer, net.Params(), o.LR, recipe)
	if err != nil {
		return err
	}
	defer optim.Release(opt)
	// The step reads no gradient between Backward and Unscale, so the
	// weight gradients may be unscaled as the GEMM stores them, unless
	// -accum adds up several backward passes' first.
	scaler := amp.NewGradScaler(amp.For(o.AMP.DType()), amp.UnscaleAsStored(o.Accum == 1))
	step := &train.Step{Dev: env.Dev, Net: net, Opt: opt, Scaler: scaler, Low: o.AMP.DType(),
		Accum: o.Accum, Segments: o.Checkpoint.Segments(len(net.Layers))} // auto: one segment per stage
	if err := env.Parallel(step); err != nil { // under -dist: rank 0's weights, gradients averaged
		return err
	}
	// Every batch is full (DropLast), with random crops and flips.
	loop := &train.Loop{Env: env, Flags: &o.Flags, Recipe: recipe, Step: step, Train: trainSet, Test: testSet,
		Load:      []datasets.Option{datasets.Shuffle(o.Seed), datasets.Workers(o.workers), datasets.Augment(datasets.RandomCropFlip(4)), datasets.DropLast()},
		EvalBatch: evalBatch, Data: o.data()}
	if loop.Extent().PerEpoch == 0 {
		return o.tooBig(trainSet.Len())
	}

	env.Log("cifar10: %s, %d parameters, %s lr %g cosine, wd %g, batch %s, on %s, amp %s, checkpointing %s",
		spec.Name, nn.CountParams(net), o.Optimizer, o.LR, o.wd, o.BatchText(), env.Dev.Name(), o.AMP, o.Checkpoint)
	env.LogNotes(o.AMP, scaler)
	defer loop.Close()
	// Resumed with -resume: a checkpoint's configuration must be this run's;
	// the rest of the run's state is in the checkpoint itself.
	pos, err := loop.Start(o.State, o.Profile, runstate.Run{Model: net, Optimizer: opt.(optim.Stateful), Scaler: scaler,
		Config: train.Config("cifar", &o.Flags, env.Ranks, map[string]string{"data": o.data(), "wd": fmt.Sprint(o.wd)})})
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
	synthetic bool
	workers   int
	wd        float64
}

// parse parses args into o and returns ResNet-20's spec.
func (o *options) parse(args []string, stdout io.Writer) (models.Spec, error) {
	resnet, err := models.Lookup("resnet20")
	if err != nil {
		return models.Spec{}, err
	}
	fs := cli.NewFlagSet("cifar", "Trains a ResNet-20 on CIFAR-10 (the binary version, in DATA/cifar10) with SGD,\n"+
		"Nesterov momentum, weight decay and a cosine schedule, in FP32 or mixed precision,\n"+
		"and reports accuracy, speed and peak memory.")
	o.Register(fs, []models.Spec{resnet}, []string{"sgd-nesterov", "sgd"}, "one segment per residual stage, and the stem and head")
	fs.BoolVar(&o.synthetic, "synthetic", false, "train on random data of CIFAR-10's shapes (speed and memory measurements only)")
	cli.IntVar(fs, &o.workers, "workers", 2, 1, 0, "background workers preparing and augmenting batches")
	cli.FloatVar(fs, &o.wd, "wd", resnet.Train.WeightDecay, "weight decay", true, "weight decay")
	return o.TrainFlags.Parse(fs, args, stdout)
}

// settings are the flags every rank of a data-parallel run must share.
func (o *options) settings() map[string]string {
	s := o.Settings()
	s["-synthetic"], s["-wd"] = fmt.Sprint(o.synthetic), fmt.Sprint(o.wd)
	return s
}

// data names the data the run trains on.
func (o *options) data() string {
	if o.synthetic {
		return "synthetic"
	}
	return "cifar10"
}

// tooBig refuses a batch larger than the training set of n samples, since
// short batches are dropped and the run would train on nothing.
func (o *options) tooBig(n int) error {
	return cli.Usagef("-batch %d: the training set holds only %d samples, and short batches are dropped", o.Batch, n)
}

// load reads CIFAR-10 from the data directory, or makes random data of its
// shapes with -synthetic.
func (o *options) load() (train, test *datasets.Dataset, err error) {
	if !o.synthetic {
		train, test, err = datasets.LoadCIFAR10(filepath.Join(datasets.Root(o.Data), "cifar10"))
		if err != nil {
			return nil, nil, fmt.Errorf("%w; or run with -synthetic to measure speed and memory on random data", err)
		}
		return train, test, nil
	}
	n := 50000
	if o.Batch > n {
		return nil, nil, o.tooBig(n)
	}
	if o.MaxSteps > 0 && o.MaxSteps < n/o.Batch+1 {
		n = min(n, o.MaxSteps*o.Batch) // generate only what the run will use
	}
	// Accuracy on random labels means nothing; a small test set keeps the
	// measurement about training.
	return datasets.Synthetic(n, []int{3, 32, 32}, 10, o.Seed), datasets.Synthetic(1000, []int{3, 32, 32}, 10, o.Seed+1), nil
}
