// Package models builds the networks mixprec's examples and tools train:
// multilayer perceptrons for MNIST, the PyTorch-examples MNIST CNN and a
// ResNet-20 for CIFAR-10. Each is an ordinary nn.Module.
package models

import (
	"fmt"
	"math/rand/v2"
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
// classes, the batch size its workload uses, and how to build it.
type Spec struct {
	Name    string
	Input   []int // shape of one sample
	Classes int
	Batch   int // the workload's default batch size
	Build   func(rng *rand.Rand) *nn.Sequential
}

var specs = []Spec{
	{"mlp", []int{784}, 10, 128, func(rng *rand.Rand) *nn.Sequential { return MLP(rng, 784, 256, 128, 10) }},
	{"wide", []int{784}, 10, 512, func(rng *rand.Rand) *nn.Sequential { return MLP(rng, 784, 4096, 4096, 10) }},
	{"deepmlp", []int{784}, 10, 256, func(rng *rand.Rand) *nn.Sequential { return DeepMLP(rng, 784, 1024, 16, 10, 0.1) }},
	{"cnn", []int{1, 28, 28}, 10, 128, CNN},
	{"resnet20", []int{3, 32, 32}, 10, 128, func(rng *rand.Rand) *nn.Sequential { return ResNet20(rng, 10) }},
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
		nn.NewConv2d(1, 32, 3, 1, 0, true, rng), nn.ReLU(),
		nn.NewConv2d(32, 64, 3, 1, 0, true, rng), nn.ReLU(),
		nn.MaxPool2d(2, 2, 0), nn.NewDropout(0.25, rng), nn.Flatten(),
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
		nn.NewSequential(nn.NewConv2d(3, 16, 3, 1, 1, false, rng), nn.NewBatchNorm2d(16), nn.ReLU()),
		stage(16, 16, 1), stage(16, 32, 2), stage(32, 64, 2),
		nn.NewSequential(nn.GlobalAvgPool(), nn.NewLinear(64, classes, rng)))
}
