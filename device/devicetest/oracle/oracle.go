// Package oracle is mixprec's independent reference: a plain float64
// forward of every op (the elementwise ones, and matmul, linear,
// convolution, pooling, batch and layer normalisation, softmax and
// log-softmax, cross-entropy, reductions, embedding, attention), written
// from the ops' mathematical definitions and apart from device's op table
// and every backend. The conformance suite (devicetest) compares each
// backend's kernels with it, and autograd's gradient checks compare each
// op's backward pass with finite differences of it, so a wrong formula in
// the code under test cannot agree with itself.
//
// Everything here is float64 and sequential, with no tuning: it is meant
// to be read and believed. It imports nothing but the standard library;
// the one shared definition it repeats is dropout's counter-based mask
// (device.Uniform), which it reimplements from its specification.
package oracle

import (
	"fmt"
	"slices"
)

// Array is an n-dimensional array of float64 in row-major order. A
// scalar has an empty Shape and one element.
type Array struct {
	Shape []int
	Data  []float64
}

// New returns a zero Array of the given shape.
func New(shape ...int) Array {
	return Array{Shape: slices.Clone(shape), Data: make([]float64, Numel(shape))}
}

// FromF32 returns an Array holding v (float32 values, as a device stores
// them) with the given shape; it panics when the sizes differ.
func FromF32(v []float32, shape ...int) Array {
	if len(v) != Numel(shape) {
		panic(fmt.Sprintf("oracle.FromF32: %d values for shape %v", len(v), shape))
	}
	a := New(shape...)
	for i, x := range v {
		a.Data[i] = float64(x)
	}
	return a
}

// Numel is the number of elements of shape.
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// Clone returns a deep copy of a.
func (a Array) Clone() Array {
	return Array{Shape: slices.Clone(a.Shape), Data: slices.Clone(a.Data)}
}

// Reshape returns a with a new shape of the same size, sharing its data.
func (a Array) Reshape(shape ...int) Array {
	if Numel(shape) != len(a.Data) {
		panic(fmt.Sprintf("oracle.Reshape: %v into %v", a.Shape, shape))
	}
	return Array{Shape: slices.Clone(shape), Data: a.Data}
}

// Map returns f applied to every element of a.
func (a Array) Map(f func(float64) float64) Array {
	out := New(a.Shape...)
	for i, x := range a.Data {
		out.Data[i] = f(x)
	}
	return out
}

// Dot is Σ a_i·b_i, the projection a gradient check differentiates.
func Dot(a, b Array) float64 {
	if len(a.Data) != len(b.Data) {
		panic(fmt.Sprintf("oracle.Dot: %v and %v", a.Shape, b.Shape))
	}
	var s float64
	for i := range a.Data {
		s += a.Data[i] * b.Data[i]
	}
	return s
}

// need panics naming op unless cond holds: the oracle's own checks of its
// callers' shapes.
func need(cond bool, op string, format string, args ...any) {
	if !cond {
		panic("oracle." + op + ": " + fmt.Sprintf(format, args...))
	}
}
