package nn

import (
	"fmt"
	"slices"
	"strings"
)

// An Option sets one of the settings PyTorch gives a layer by keyword, with
// a default: a convolution's or a pooling's stride and padding, a layer's
// bias. A constructor says which it takes and panics, naming itself, on
// another, so that nn.NewConv2d(3, 16, 3, rng, nn.Padding(1),
// nn.Bias(false)) reads as PyTorch's Conv2d(3, 16, 3, padding=1,
// bias=False) where a list of ints and a bool did not.
type Option func(*layerConfig)

// layerConfig holds what the options said, and which they said.
type layerConfig struct {
	stride, padding int
	bias            bool
	given           []string // the options' names, in order
}

// Stride is a convolution's or a pooling's step over the input, n >= 1 in
// both dimensions: 1 by default for a convolution, the kernel's size for a
// pooling.
func Stride(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("nn.Stride(%d): want a stride >= 1", n))
	}
	return func(c *layerConfig) { c.stride, c.given = n, append(c.given, "Stride") }
}

// Padding is the zeros added on every side of a convolution's or a
// pooling's input, n >= 0; 0 by default.
func Padding(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("nn.Padding(%d): want padding >= 0", n))
	}
	return func(c *layerConfig) { c.padding, c.given = n, append(c.given, "Padding") }
}

// Bias says whether a layer has a bias term; it has one by default.
func Bias(on bool) Option {
	return func(c *layerConfig) { c.bias, c.given = on, append(c.given, "Bias") }
}

// configure applies opts over def for the constructor op, which takes the
// options named in takes.
func configure(op string, def layerConfig, takes []string, opts []Option) layerConfig {
	c := def
	for _, o := range opts {
		o(&c)
	}
	for _, name := range c.given {
		if !slices.Contains(takes, name) {
			panic(fmt.Sprintf("%s: option %s does not apply; it takes %s", op, name, strings.Join(takes, ", ")))
		}
	}
	return c
}
