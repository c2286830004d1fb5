// Package models builds the networks mixprec's examples and tools train:
// multilayer perceptrons for MNIST, the PyTorch-examples MNIST CNN and a
// ResNet-20 for CIFAR-10. Each is an ordinary nn.Module.
package models

import (
	"fmt"
	"math/rand/v2"

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
