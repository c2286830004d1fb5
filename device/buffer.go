package device

import (
	"fmt"

	"github.com/mixprec/mixprec/dtype"
)

// BufferHeader is the part of a Buffer every backend keeps alike: its
// dtype, its length, the category it is accounted under, and whether it has
// been freed. A backend's buffer type embeds it, which gives the type
// Buffer's DType, Len and Category, and adds its storage and Device. The
// header changes only through the backend's Accountant (Recategorize,
// Free), so the figures and the buffers always agree.
type BufferHeader struct {
	dt    dtype.DType
	n     int
	cat   Category
	freed bool
}

// NewBufferHeader returns the header of a new buffer of n elements of dt in
// category c.
func NewBufferHeader(dt dtype.DType, n int, c Category) BufferHeader {
	return BufferHeader{dt: dt, n: n, cat: c}
}

// DType is the element type.
func (h *BufferHeader) DType() dtype.DType { return h.dt }

// Len is the number of elements.
func (h *BufferHeader) Len() int { return h.n }

// Category is what the buffer is accounted as.
func (h *BufferHeader) Category() Category { return h.cat }

// Bytes is the size of the elements, what the accounting counts (a
// backend may hold more, rounded up to its allocation sizes).
func (h *BufferHeader) Bytes() int64 { return Bytes(h.dt, h.n) }

// Freed reports whether the buffer has been freed.
func (h *BufferHeader) Freed() bool { return h.freed }

// Alloc records the bytes of a new buffer with header h.
func (a *Accountant) Alloc(h *BufferHeader) { a.Add(h.dt, h.cat, h.Bytes()) }

// Free takes h's bytes out of the figures and marks it freed. The caller
// has checked that it was live (Own).
func (a *Accountant) Free(h *BufferHeader) {
	h.freed = true
	a.Sub(h.dt, h.cat, h.Bytes())
}

// Recategorize moves h's bytes to category c.
func (a *Accountant) Recategorize(h *BufferHeader, c Category) {
	a.Move(h.dt, h.cat, c, h.Bytes())
	h.cat = c
}

// Own returns b as the backend's buffer type P after checking that it is
// one, that owner allocated it, and that it has not been freed: the check
// every kernel makes of every operand. Otherwise it panics with a message
// naming the backend, the op and what is wrong, since the caller passed a
// buffer the kernel cannot use. backend prefixes the message ("cpu").
func Own[T any, P interface {
	*T
	Buffer
	Freed() bool
}](owner Device, b Buffer, backend, op string) P {
	p, ok := b.(P)
	if !ok {
		if b == nil {
			panic(fmt.Sprintf("%s: %s: nil buffer", backend, op))
		}
		panic(fmt.Sprintf("%s: %s: buffer of device %s given to %s", backend, op, b.Device().Name(), owner.Name()))
	}
	if p == nil {
		panic(fmt.Sprintf("%s: %s: nil buffer", backend, op))
	}
	if d := p.Device(); d != owner {
		if d.Name() == owner.Name() {
			panic(fmt.Sprintf("%s: %s: buffer belongs to another %s device", backend, op, d.Name()))
		}
		panic(fmt.Sprintf("%s: %s: buffer belongs to %s, not %s", backend, op, d.Name(), owner.Name()))
	}
	if p.Freed() {
		panic(fmt.Sprintf("%s: %s: buffer used after Free", backend, op))
	}
	return p
}

// OwnF32 is Own for operand i of a kernel that takes F32 buffers (an
// optimiser's step): b must also be F32 and, unless n < 0, hold n elements,
// operand 0's length. It allocates nothing, which a step per parameter per
// training step needs.
func OwnF32[T any, P interface {
	*T
	Buffer
	Freed() bool
}](owner Device, b Buffer, backend, op string, i, n int) P {
	p := Own[T, P](owner, b, backend, op)
	if p.DType() != dtype.F32 {
		panic(fmt.Sprintf("%s: %s: operand %d is %v, want f32", backend, op, i, p.DType()))
	}
	if n >= 0 && p.Len() != n {
		panic(fmt.Sprintf("%s: %s: operand %d has %d elements, operand 0 has %d", backend, op, i, p.Len(), n))
	}
	return p
}

// OwnF32s checks the operands of a kernel whose buffers are all F32 of one
// length (normalisation statistics and parameters): each one that is not
// nil as OwnF32 does, against the first one's length. A nil operand stays
// nil in the result.
func OwnF32s[T any, P interface {
	*T
	Buffer
	Freed() bool
}](owner Device, backend, op string, bufs ...Buffer) []P {
	out := make([]P, len(bufs))
	first := -1
	for i, b := range bufs {
		if b == nil {
			continue
		}
		if first < 0 {
			out[i] = OwnF32[T, P](owner, b, backend, op, i, -1)
			first = i
			continue
		}
		p := OwnF32[T, P](owner, b, backend, op, i, -1)
		if n := out[first].Len(); p.Len() != n {
			panic(fmt.Sprintf("%s: %s: operand %d has %d elements, operand %d has %d", backend, op, i, p.Len(), first, n))
		}
		out[i] = p
	}
	return out
}
