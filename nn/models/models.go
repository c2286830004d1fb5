// Package models builds the networks mixprec's examples and tools train:
// multilayer perceptrons for MNIST, the PyTorch-examples MNIST CNN and a
// ResNet-20 for CIFAR-10. Each is an ordinary nn.Module.
package models

import (
	"fmt"
	"math/rand/v2"
	"strings"

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
// model whose activations dominate its memory, for checkpointing.
func DeepMLP(rng *rand.Rand, in, width, depth, out int, p float32) *nn.Sequential {
	var layers []nn.Module
	prev := in
	for range depth {
		layers = append(layers, nn.NewLinear(prev, width, rng), nn.ReLU(), nn.NewDropout(p, rng))
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
