// Package models builds the networks mixprec's examples and tools train:
// multilayer perceptrons for MNIST, the PyTorch-examples MNIST CNN and a
// ResNet-20 for CIFAR-10. Each is an ordinary nn.Module.
package models

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/nn"
)

// MLP chains Linear layers of the given sizes with ReLU between them (none
// after the last): MLP(rng, 784, 256, 128, 10) is the MNIST workload.
func MLP(rng *rand.Rand, sizes ...int) *nn.Sequential {
	if len(sizes) < 2 {
		panic(fmt.Sprintf("models.MLP: need at least two sizes, got %v", sizes))
	}
	var layers []nn.Module
	for i := 0; i+1 < len(sizes); i++ {
		layers = append(layers, nn.NewLinear(sizes[i], sizes[i+1], rng))
		if i+2 < len(sizes) {
			layers = append(layers, nn.ReLU())
		}
	}
	return nn.NewSequential(layers...)
}

// DeepMLP is depth hidden layers of the given width, each Linear, ReLU and
// Dropout(p), between an input of size in and a classifier of size out: a
// model whose activations dominate its memory, for checkpointing. Hidden
// weights use He initialisation (uniform, gain √2), without which sixteen
// ReLU layers at PyTorch's default scale shrink the signal by about 6x each.
func DeepMLP(rng *rand.Rand, in, width, depth, out int, p float32) *nn.Sequential {
	var layers []nn.Module
	prev := in
	for range depth {
		l := nn.NewLinear(prev, width, rng)
		l.W = autograd.NewParam("weight", nn.HeUniform(rng, prev, width, prev))
		layers = append(layers, l, nn.ReLU(), nn.NewDropout(p, rng))
		prev = width
	}
	layers = append(layers, nn.NewLinear(prev, out, rng))
	return nn.NewSequential(layers...)
}

// Spec describes a named model: the input one sample has, the number of
// classes, the batch size its workload uses, how to build it, and the recipe
// that trains it.
type Spec struct {
	Name    string
	Input   []int // shape of one sample
	Classes int
	Batch   int // the workload's default batch size
	Build   func(rng *rand.Rand) *nn.Sequential
	Train   Recipe
}

// Schedule names a learning-rate schedule; the programs build it with
// package optim, which this package cannot import (they share a layer).
type Schedule uint8

const (
	// Constant keeps the learning rate fixed.
	Constant Schedule = iota
	// OneCycle is Smith's one-cycle policy peaking at the learning rate a
	// quarter of the way through training (torch's OneCycleLR).
	OneCycle
	// Cosine warms up linearly for an epoch (at most a tenth of the run)
	// and then decays to zero along a half cosine.
	Cosine
)

// Recipe is how the example programs train a model unless a flag says
// otherwise: settings that train it well in a few epochs, kept beside the
// model so that every program uses the same ones.
type Recipe struct {
	Epochs      int
	Optimizer   string  // "sgd", "adam" or "adamw"
	LR          float64 // the base (for OneCycle, the peak) learning rate
	Momentum    float32 // SGD's momentum
	Nesterov    bool    // SGD with Nesterov momentum
	WeightDecay float64 // the optimiser's decay
	Schedule    Schedule
	Shift       int // random translation by up to this many pixels; 0: none
}

// adamwDecay is AdamW's default decay (PyTorch's), spelled out so that a
// recipe states every setting it trains with.
const adamwDecay = 1e-2

var specs = []Spec{
	{Name: "mlp", Input: []int{784}, Classes: 10, Batch: 128,
		Build: func(rng *rand.Rand) *nn.Sequential { return MLP(rng, 784, 256, 128, 10) },
		Train: Recipe{Epochs: 1, Optimizer: "sgd", LR: 0.05, Momentum: 0.9}}, // the PyTorch peer's workload
	{Name: "wide", Input: []int{784}, Classes: 10, Batch: 512,
		Build: func(rng *rand.Rand) *nn.Sequential { return MLP(rng, 784, 4096, 4096, 10) },
		Train: Recipe{Epochs: 1, Optimizer: "sgd", LR: 0.02, Momentum: 0.9}},
	{Name: "deepmlp", Input: []int{784}, Classes: 10, Batch: 256,
		Build: func(rng *rand.Rand) *nn.Sequential { return DeepMLP(rng, 784, 1024, 16, 10, 0.1) },
		Train: Recipe{Epochs: 1, Optimizer: "adamw", LR: 1e-3, WeightDecay: adamwDecay}},
	{Name: "cnn", Input: []int{1, 28, 28}, Classes: 10, Batch: 128, Build: CNN,
		Train: Recipe{Epochs: 1, Optimizer: "adamw", LR: 3e-3, WeightDecay: adamwDecay, Schedule: OneCycle, Shift: 1}},
	// He et al.'s CIFAR-10 recipe, with a cosine schedule for their steps.
	{Name: "resnet20", Input: []int{3, 32, 32}, Classes: 10, Batch: 128,
		Build: func(rng *rand.Rand) *nn.Sequential { return ResNet20(rng, 10) },
		Train: Recipe{Epochs: 30, Optimizer: "sgd", LR: 0.1, Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4, Schedule: Cosine}},
}

// Lookup returns the model named name: "mlp" (784-256-128-10), "wide"
// (784-4096-4096-10, activations dominate), "deepmlp" (16 hidden layers of
// 1024 with ReLU and dropout), and the convolutional ones.
func Lookup(name string) (Spec, error) {
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("unknown model %q (have %s)", name, strings.Join(Names(), ", "))
}

// Specs returns every model Lookup knows, in the order Names lists them.
func Specs() []Spec { return slices.Clone(specs) }

// Names lists the models Lookup knows.
func Names() []string {
	var n []string
	for _, s := range specs {
		n = append(n, s.Name)
	}
	return n
}

// CNN is the network of PyTorch's MNIST example: two 3x3 convolutions (32
// and 64 channels) with ReLU, 2x2 max pooling, dropout 0.25, a 9216-128
// linear layer with ReLU, dropout 0.5 and a 128-10 classifier, on
// (N, 1, 28, 28) inputs.
func CNN(rng *rand.Rand) *nn.Sequential {
	return nn.NewSequential(
		nn.NewConv2d(1, 32, 3, rng), nn.ReLU(),
		nn.NewConv2d(32, 64, 3, rng), nn.ReLU(),
		nn.MaxPool2d(2), nn.NewDropout(0.25, rng), nn.Flatten(),
		nn.NewLinear(9216, 128, rng), nn.ReLU(), nn.NewDropout(0.5, rng),
		nn.NewLinear(128, 10, rng))
}

// ResNet20 is the CIFAR-10 ResNet of He et al. (2016) with n = 3: a 3x3
// stem of 16 channels, three stages of three BasicBlocks at 16, 32 and 64
// channels (the last two starting with stride 2, with 1x1 projection
// shortcuts), global average pooling and a linear classifier, on
// (N, 3, 32, 32) inputs. Its top level is [stem, stage 1, stage 2, stage 3,
// head], so checkpointing it in five segments checkpoints each stage.
func ResNet20(rng *rand.Rand, classes int) *nn.Sequential {
	stage := func(in, out, stride int) *nn.Sequential {
		return nn.NewSequential(nn.NewBasicBlock(in, out, stride, rng), nn.NewBasicBlock(out, out, 1, rng), nn.NewBasicBlock(out, out, 1, rng))
	}
	return nn.NewSequential(
		nn.NewSequential(nn.NewConv2d(3, 16, 3, rng, nn.Padding(1), nn.Bias(false)), nn.NewBatchNorm2d(16), nn.ReLU()),
		stage(16, 16, 1), stage(16, 32, 2), stage(32, 64, 2),
		nn.NewSequential(nn.GlobalAvgPool(), nn.NewLinear(64, classes, rng)))
}
