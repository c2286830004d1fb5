package tensor

import (
	"fmt"

	"github.com/mixprec/mixprec/dtype"
)

// Host is a row-major float32 array in ordinary Go memory: what data loaders
// produce and what a graph's Input copies onto a device.
type Host struct {
	Shape []int
	Data  []float32
}

// Host16 is a row-major array of 16-bit patterns in ordinary Go memory, F16
// or BF16 as DType says: a batch that a data loader has already rounded to
// the dtype it will be used in (see autograd.Graph.InputBits).
type Host16 struct {
	Shape []int
	DType dtype.DType
	Bits  []uint16
}

// check panics, naming fn, unless h's patterns fill its shape and its
// dtype is 16-bit.
func (h Host16) check(fn string) {
	if n := Numel(h.Shape); n != len(h.Bits) {
		panic(fmt.Sprintf("tensor.%s: %d values for shape %v (%d elements)", fn, len(h.Bits), h.Shape, n))
	}
	if h.DType != dtype.F16 && h.DType != dtype.BF16 {
		panic(fmt.Sprintf("tensor.%s: 16-bit patterns of dtype %v; want F16 or BF16", fn, h.DType))
	}
}

// check panics, naming fn, unless h's values fill its shape.
func (h Host) check(fn string) {
	if n := Numel(h.Shape); n != len(h.Data) {
		panic(fmt.Sprintf("tensor.%s: %d values for shape %v (%d elements)", fn, len(h.Data), h.Shape, n))
	}
}

// NewHost allocates a zeroed Host array of the given shape.
func NewHost(shape ...int) Host {
	return Host{Shape: append([]int(nil), shape...), Data: make([]float32, Numel(shape))}
}

// Numel is the number of elements of a tensor of this shape (1 for a scalar).
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic("tensor: negative dimension in shape " + fmtShape(shape))
		}
		n *= d
	}
	return n
}

// fmtShape formats a shape for a panic message from a copy, so that the
// shapes callers pass (often in arrays on their stack) do not escape to the
// heap on the paths that do not panic.
func fmtShape(s []int) string {
	c := make([]int, len(s))
	copy(c, s)
	return fmt.Sprint(c)
}
