// Package tensor is mixprec's n-dimensional array: a shape, a dtype and a
// buffer on a device. Tensors are contiguous and row-major; arithmetic on
// them lives in package autograd, which records it for differentiation.
//
// A tensor owns its buffer and frees it on Release, except a view made by
// Reshape, which shares its parent's buffer and never frees it. A released
// tensor keeps its shape and dtype, which the bookkeeping of a backward pass
// still reads (autograd frees results early; see Graph.Free).
package tensor

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Tensor is a contiguous row-major array on a device.
type Tensor struct {
	shape []int
	buf   device.Buffer
	dev   device.Device
	dt    dtype.DType // buf's, kept after Release
	view  bool
	base  *Tensor // for a view, the tensor that owns the buffer
	// viewed is set (atomically: graphs on several goroutines may reshape
	// one parameter) once a view of the tensor has been made; see Viewed.
	viewed atomic.Bool

	// Copies in other dtypes that CachedCast keeps, and the count of
	// in-place writes that Modified recorded; see castcache.go.
	casts   []cachedCast
	version uint64
}

// New allocates a tensor whose contents are undefined.
func New(dev device.Device, dt dtype.DType, c device.Category, shape ...int) *Tensor {
	return (*Arena)(nil).New(dev, dt, c, shape...)
}

// Zeros allocates a tensor of zeros.
func Zeros(dev device.Device, dt dtype.DType, c device.Category, shape ...int) *Tensor {
	return Full(dev, dt, c, 0, shape...)
}

// Full allocates a tensor with every element v (rounded to dt).
func Full(dev device.Device, dt dtype.DType, c device.Category, v float32, shape ...int) *Tensor {
	t := New(dev, dt, c, shape...)
	dev.Fill(t.buf, v)
	return t
}

// FromSlice copies data (rounded to dt) into a new tensor of the given shape.
func FromSlice(dev device.Device, dt dtype.DType, c device.Category, data []float32, shape ...int) *Tensor {
	if n := Numel(shape); n != len(data) {
		panic(fmt.Sprintf("tensor.FromSlice: %d values for shape %v (%d elements)", len(data), shape, n))
	}
	t := New(dev, dt, c, shape...)
	dev.CopyFromHost(t.buf, data)
	return t
}

// FromHost copies a host array into a new tensor.
func FromHost(dev device.Device, dt dtype.DType, c device.Category, h Host) *Tensor {
	return FromSlice(dev, dt, c, h.Data, h.Shape...)
}

// FromBits copies a host array of 16-bit patterns into a new tensor of its
// dtype, with no conversion.
func FromBits(dev device.Device, c device.Category, h Host16) *Tensor {
	h.check("FromBits")
	t := New(dev, h.DType, c, h.Shape...)
	dev.CopyBitsFromHost(t.buf, h.Bits)
	return t
}

// Uniform returns a tensor of values drawn uniformly from [lo, hi) with rng.
func Uniform(dev device.Device, dt dtype.DType, c device.Category, rng *rand.Rand, lo, hi float32, shape ...int) *Tensor {
	return FromSlice(dev, dt, c, UniformHost(rng, lo, hi, shape...).Data, shape...)
}

// Normal returns a tensor of values drawn from N(mean, std²) with rng.
func Normal(dev device.Device, dt dtype.DType, c device.Category, rng *rand.Rand, mean, std float32, shape ...int) *Tensor {
	return FromSlice(dev, dt, c, NormalHost(rng, mean, std, shape...).Data, shape...)
}

// UniformHost is Uniform in host memory.
func UniformHost(rng *rand.Rand, lo, hi float32, shape ...int) Host {
	h := NewHost(shape...)
	for i := range h.Data {
		h.Data[i] = lo + float32(rng.Float64())*(hi-lo)
	}
	return h
}

// NormalHost is Normal in host memory.
func NormalHost(rng *rand.Rand, mean, std float32, shape ...int) Host {
	h := NewHost(shape...)
	for i := range h.Data {
		h.Data[i] = mean + std*float32(rng.NormFloat64())
	}
	return h
}

// Shape returns the dimensions. The caller must not modify the slice.
func (t *Tensor) Shape() []int { return t.shape }

// Dim returns dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	if i < 0 {
		i += len(t.shape)
	}
	return t.shape[i]
}

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Numel is the number of elements.
func (t *Tensor) Numel() int { return Numel(t.shape) }

// DType is the element type. Like Shape, it stays readable after Release.
func (t *Tensor) DType() dtype.DType { return t.dt }

// Device is where the tensor lives.
func (t *Tensor) Device() device.Device { return t.dev }

// Buffer is the tensor's storage, for kernels.
func (t *Tensor) Buffer() device.Buffer { return t.live("Buffer") }

// Category is what the tensor's memory is accounted as.
func (t *Tensor) Category() device.Category { return t.live("Category").Category() }

// SetCategory re-accounts the tensor's memory (a view's, its owner's).
func (t *Tensor) SetCategory(c device.Category) {
	if t.view {
		t.base.SetCategory(c)
		return
	}
	t.dev.SetCategory(t.live("SetCategory"), c)
}

// IsView reports whether t shares another tensor's buffer.
func (t *Tensor) IsView() bool { return t.view }

// Viewed reports whether a view of t (or of the tensor t is a view of) has
// ever been made. A view does not keep its owner's buffer alive, so a
// caller that frees a tensor before its natural end (autograd's Graph.Free)
// must leave one that was viewed: the view may still be read.
func (t *Tensor) Viewed() bool { return t.owner().viewed.Load() }

// Released reports whether Release has been called.
func (t *Tensor) Released() bool { return t.buf == nil }

func (t *Tensor) live(op string) device.Buffer {
	if t.buf == nil {
		panic(fmt.Sprintf("tensor.%s: tensor %v used after Release", op, t.shape))
	}
	return t.buf
}

// ToHost copies the values to host memory as float32.
func (t *Tensor) ToHost() []float32 {
	out := make([]float32, t.Numel())
	t.dev.CopyToHost(out, t.live("ToHost"))
	return out
}

// Host copies the tensor to a host array.
func (t *Tensor) Host() Host { return Host{Shape: slices.Clone(t.shape), Data: t.ToHost()} }

// Item returns the value of a one-element tensor.
func (t *Tensor) Item() float32 {
	if t.Numel() != 1 {
		panic(fmt.Sprintf("tensor.Item: tensor of shape %v has %d elements", t.shape, t.Numel()))
	}
	return t.ToHost()[0]
}

// Cast returns a new tensor with t's values converted to dt.
func (t *Tensor) Cast(dt dtype.DType, c device.Category) *Tensor {
	out := New(t.dev, dt, c, t.shape...)
	t.dev.Copy(out.buf, 0, t.live("Cast"), 0, t.Numel())
	return out
}

// Clone returns a copy of t with the same dtype.
func (t *Tensor) Clone(c device.Category) *Tensor { return t.Cast(t.DType(), c) }

// CopyFrom copies src's values into t, converting dtype; shapes must have the
// same number of elements.
func (t *Tensor) CopyFrom(src *Tensor) {
	if src.Numel() != t.Numel() {
		panic(fmt.Sprintf("tensor.CopyFrom: source %v into destination %v", src.shape, t.shape))
	}
	SameDevice("CopyFrom", t, src)
	t.dev.Copy(t.live("CopyFrom"), 0, src.live("CopyFrom"), 0, t.Numel())
	t.Modified()
}

// Reshape returns a view of t with a new shape of the same size. One
// dimension may be -1, meaning whatever makes the sizes agree.
func (t *Tensor) Reshape(shape ...int) *Tensor { return (*Arena)(nil).Reshape(t, shape...) }

// Move returns a tensor with a new shape that takes over t's buffer; t is
// left released without freeing it. It is how a gradient changes shape
// without a copy. t must not be a view.
func (t *Tensor) Move(shape ...int) *Tensor { return (*Arena)(nil).Move(t, shape...) }

// InferShape resolves a -1 in shape so that it has n elements, panicking
// with the op's name and the original shape when that is impossible.
func InferShape(n int, shape []int, op string, from []int) []int {
	s := slices.Clone(shape)
	inferInPlace(n, s, shape, op, from)
	return s
}

// inferInPlace is InferShape on s, a copy of shape that it resolves in place.
func inferInPlace(n int, s, shape []int, op string, from []int) {
	neg, known := -1, 1
	for i, d := range s {
		switch {
		case d == -1 && neg < 0:
			neg = i
		case d < 0:
			panic(fmt.Sprintf("tensor.%s: bad shape %s for %s", op, fmtShape(shape), fmtShape(from)))
		default:
			known *= d
		}
	}
	if neg >= 0 && known > 0 && n%known == 0 {
		s[neg] = n / known
		known *= s[neg]
	}
	if known != n || (neg >= 0 && s[neg] < 0) {
		panic(fmt.Sprintf("tensor.%s: cannot reshape %s (%d elements) to %s", op, fmtShape(from), n, fmtShape(shape)))
	}
}

// Release frees the tensor's buffer (a view frees nothing). Releasing twice
// is harmless; any other use after Release panics.
func (t *Tensor) Release() {
	if t.buf == nil {
		return
	}
	if !t.view {
		t.releaseCasts()
		t.dev.Free(t.buf)
	}
	t.buf = nil
}

// String describes the tensor: shape, dtype, device and, for small tensors,
// the values.
func (t *Tensor) String() string {
	if t.buf == nil {
		return fmt.Sprintf("Tensor(%v, released)", t.shape)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Tensor(%v, %v, %s", t.shape, t.DType(), t.dev.Name())
	if n := t.Numel(); n <= 16 {
		fmt.Fprintf(&b, ", %v", t.ToHost())
	}
	b.WriteByte(')')
	return b.String()
}

// SameShape panics, naming op and the shapes, unless a and b have equal shapes.
func SameShape(op string, a, b *Tensor) {
	if !slices.Equal(a.shape, b.shape) {
		panic(fmt.Sprintf("%s: shape mismatch %v vs %v", op, a.shape, b.shape))
	}
}

// SameDevice panics, naming op, unless every tensor is on the same device.
func SameDevice(op string, ts ...*Tensor) {
	for _, x := range ts[1:] {
		if x.dev != ts[0].dev {
			panic(fmt.Sprintf("%s: tensors on different devices (%s and %s)", op, ts[0].dev.Name(), x.dev.Name()))
		}
	}
}
