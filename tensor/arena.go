package tensor

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Arena makes tensors whose structs and shapes come from chunks it takes
// from Go a few dozen at a time. A training step makes dozens of small
// tensors; through an Arena they cost a Go allocation per chunk instead of
// two each. Nothing an Arena hands out is ever handed out again, so its
// tensors behave exactly as any other: a stale pointer to a released one
// still finds it released, and a chunk lives for as long as any tensor in
// it is reachable.
//
// The zero value is ready to use, and a nil *Arena allocates each tensor
// on its own, which is what the package's functions do. An Arena is not
// safe for concurrent use; its owner (an autograd graph) serialises access.
type Arena struct {
	ts   []Tensor // structs not yet handed out
	ints []int    // shape storage not yet handed out
	nts  int      // the length of the last chunk of structs
	nint int      // and of shape storage
}

// Chunks start small, for the many short graphs of tests and evaluation,
// and double up to a limit, for a training step's hundreds of tensors.
const (
	firstTensors = 32
	maxTensors   = 512
	firstInts    = 128
	maxInts      = 2048
)

// tensor returns a zero Tensor struct from the current chunk.
func (a *Arena) tensor() *Tensor {
	if a == nil {
		return new(Tensor)
	}
	if len(a.ts) == 0 {
		a.nts = grow(a.nts, firstTensors, maxTensors)
		a.ts = make([]Tensor, a.nts)
	}
	t := &a.ts[0]
	a.ts = a.ts[1:]
	return t
}

// Shape returns a copy of dims in the arena's storage, for shapes and
// strides that live as long as the arena's tensors. Its capacity is its
// length, so an append to it never writes over the next one.
func (a *Arena) Shape(dims ...int) []int {
	n := len(dims)
	if a == nil || n > maxInts/4 {
		return append([]int(nil), dims...)
	}
	if len(a.ints) < n {
		a.nint = grow(a.nint, firstInts, maxInts)
		a.ints = make([]int, a.nint)
	}
	s := a.ints[:n:n]
	a.ints = a.ints[n:]
	copy(s, dims)
	return s
}

func grow(last, first, limit int) int {
	if last == 0 {
		return first
	}
	return min(2*last, limit)
}

// New is the package's New with the struct and the shape from the arena.
func (a *Arena) New(dev device.Device, dt dtype.DType, c device.Category, shape ...int) *Tensor {
	n := Numel(shape)
	t := a.tensor()
	*t = Tensor{shape: a.Shape(shape...), buf: dev.Alloc(dt, n, c), dev: dev, dt: dt}
	return t
}

// FromHost is the package's FromHost with the struct and the shape from
// the arena.
func (a *Arena) FromHost(dev device.Device, dt dtype.DType, c device.Category, h Host) *Tensor {
	if n := Numel(h.Shape); n != len(h.Data) {
		panic(fmt.Sprintf("tensor.FromHost: %d values for shape %v (%d elements)", len(h.Data), h.Shape, n))
	}
	t := a.New(dev, dt, c, h.Shape...)
	dev.CopyFromHost(t.buf, h.Data)
	return t
}

// FromBits is the package's FromBits with the struct and the shape from
// the arena.
func (a *Arena) FromBits(dev device.Device, c device.Category, h Host16) *Tensor {
	h.check("FromBits")
	t := a.New(dev, h.DType, c, h.Shape...)
	dev.CopyBitsFromHost(t.buf, h.Bits)
	return t
}

// View returns an F32 tensor of h's values that reads h.Data where it is,
// with no copy, on a backend whose memory is the host's
// (device.HostViewer, the CPU), and is FromHost on any other. The tensor
// and h share their memory until it is released: a change to either shows
// in the other, as with PyTorch's torch.from_numpy.
func (a *Arena) View(dev device.Device, c device.Category, h Host) *Tensor {
	h.check("View")
	hv, ok := dev.(device.HostViewer)
	if !ok {
		return a.FromHost(dev, dtype.F32, c, h)
	}
	t := a.tensor()
	*t = Tensor{shape: a.Shape(h.Shape...), buf: hv.ViewHost(dtype.F32, h.Data, nil, c), dev: dev, dt: dtype.F32}
	return t
}

// ViewBits is View for 16-bit patterns: FromBits without the copy where
// the backend allows it.
func (a *Arena) ViewBits(dev device.Device, c device.Category, h Host16) *Tensor {
	h.check("ViewBits")
	hv, ok := dev.(device.HostViewer)
	if !ok {
		return a.FromBits(dev, c, h)
	}
	t := a.tensor()
	*t = Tensor{shape: a.Shape(h.Shape...), buf: hv.ViewHost(h.DType, nil, h.Bits, c), dev: dev, dt: h.DType}
	return t
}

// Move is t.Move with the new struct and shape from the arena.
func (a *Arena) Move(t *Tensor, shape ...int) *Tensor {
	if t.view {
		panic(fmt.Sprintf("tensor.Move: %v is a view", t.shape))
	}
	s := a.Shape(shape...)
	inferInPlace(t.Numel(), s, shape, "Move", t.shape)
	out := a.tensor()
	*out = Tensor{shape: s, buf: t.live("Move"), dev: t.dev, dt: t.dt}
	t.buf = nil
	if t.casts != nil { // a parameter's copies go with its values (gradients have none)
		castMu.Lock()
		out.casts, out.version, t.casts = t.casts, t.version, nil
		castMu.Unlock()
	}
	return out
}

// Reshape is t.Reshape with the view's struct and shape from the arena.
func (a *Arena) Reshape(t *Tensor, shape ...int) *Tensor {
	s := a.Shape(shape...)
	inferInPlace(t.Numel(), s, shape, "Reshape", t.shape)
	base := t
	if t.view {
		base = t.base
	}
	out := a.tensor()
	*out = Tensor{shape: s, buf: t.live("Reshape"), dev: t.dev, dt: t.dt, view: true, base: base}
	if !base.viewed.Load() { // a parameter's views need not write its cache line each step
		base.viewed.Store(true)
	}
	return out
}
