package device

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// testDev is a Device with nothing but a name: Own only asks a device who
// it is.
type testDev struct {
	Device
	name string
}

func (d *testDev) Name() string { return d.name }

// testBuf is a backend's buffer type: the header and an owner.
type testBuf struct {
	BufferHeader
	dev *testDev
}

func (b *testBuf) Device() Device { return b.dev }

// otherBuf is another backend's buffer type.
type otherBuf struct {
	BufferHeader
	dev *testDev
}

func (b *otherBuf) Device() Device { return b.dev }

// panicText runs f and returns what it panicked with, "" when it did not.
func panicText(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// TestOwn checks the operand check every kernel makes: a live buffer of
// the device comes back as the backend's type, and anything else panics
// with a message naming the backend, the op and the fault.
func TestOwn(t *testing.T) {
	dev, twin, gpu := &testDev{name: "cpu"}, &testDev{name: "cpu"}, &testDev{name: "cuda:0"}
	var acct Accountant
	mine := &testBuf{BufferHeader: NewBufferHeader(dtype.F16, 10, Temp), dev: dev}
	acct.Alloc(&mine.BufferHeader)
	if got := Own[testBuf](dev, mine, "cpu", "Fill"); got != mine {
		t.Errorf("Own of a live buffer returned %p, want %p", got, mine)
	}
	freed := &testBuf{BufferHeader: NewBufferHeader(dtype.F32, 3, Grad), dev: dev}
	acct.Alloc(&freed.BufferHeader)
	acct.Free(&freed.BufferHeader)
	for _, c := range []struct {
		name string
		b    Buffer
		want string
	}{
		{"nil", nil, "cpu: Fill: nil buffer"},
		{"typed nil", (*testBuf)(nil), "cpu: Fill: nil buffer"},
		{"other backend", &otherBuf{dev: gpu}, "cpu: Fill: buffer of device cuda:0 given to cpu"},
		{"other device", &testBuf{dev: twin}, "cpu: Fill: buffer belongs to another cpu device"},
		{"other device by name", &testBuf{dev: gpu}, "cpu: Fill: buffer belongs to cuda:0, not cpu"},
		{"freed", freed, "cpu: Fill: buffer used after Free"},
	} {
		got := panicText(func() { Own[testBuf](dev, c.b, "cpu", "Fill") })
		if !strings.Contains(got, c.want) {
			t.Errorf("Own of a %s buffer panicked with %q, want %q", c.name, got, c.want)
		}
	}
}

// TestHeaderAccounting checks that the header and the figures move
// together: Alloc adds the buffer's bytes under its dtype and category,
// Recategorize moves them, Free takes them out and marks the buffer.
func TestHeaderAccounting(t *testing.T) {
	var a Accountant
	h := NewBufferHeader(dtype.BF16, 7, Activation)
	if h.DType() != dtype.BF16 || h.Len() != 7 || h.Category() != Activation || h.Bytes() != 14 || h.Freed() {
		t.Fatalf("new header: %v %d %v %d bytes freed=%v; want bf16 7 activation 14 bytes freed=false", h.DType(), h.Len(), h.Category(), h.Bytes(), h.Freed())
	}
	a.Alloc(&h)
	if s := a.Stats(); s.Live.Total != 14 || s.Live.Category(Activation) != 14 || s.Live.DType(dtype.BF16) != 14 || s.Allocs != 1 {
		t.Errorf("after Alloc: live %+v, allocs %d; want 14 bytes of bf16 activation, 1 alloc", s.Live, s.Allocs)
	}
	a.Recategorize(&h, Temp)
	if s := a.Stats(); h.Category() != Temp || s.Live.Category(Activation) != 0 || s.Live.Category(Temp) != 14 {
		t.Errorf("after Recategorize: category %v, live %+v; want temp holding 14 bytes", h.Category(), s.Live)
	}
	a.Free(&h)
	if s := a.Stats(); !h.Freed() || s.Live.Total != 0 || s.Peak.Total != 14 {
		t.Errorf("after Free: freed=%v, live %d, peak %d; want true, 0, 14", h.Freed(), s.Live.Total, s.Peak.Total)
	}
}

// TestOwnF32 checks the operand checks of the kernels that take F32
// buffers: dtype and length, naming the operand, and nil operands left
// nil where a kernel allows them.
func TestOwnF32(t *testing.T) {
	dev := &testDev{name: "cpu"}
	buf := func(dt dtype.DType, n int) *testBuf {
		return &testBuf{BufferHeader: NewBufferHeader(dt, n, Optim), dev: dev}
	}
	p, g, half, short := buf(dtype.F32, 4), buf(dtype.F32, 4), buf(dtype.F16, 4), buf(dtype.F32, 3)
	if got := OwnF32[testBuf](dev, g, "cpu", "SGD", 1, 4); got != g {
		t.Errorf("OwnF32 of a good operand returned %p, want %p", got, g)
	}
	got := OwnF32s[testBuf](dev, "cpu", "BatchNorm", p, nil, g)
	if len(got) != 3 || got[0] != p || got[1] != nil || got[2] != g {
		t.Errorf("OwnF32s(p, nil, g) = %v, want [p nil g]", got)
	}
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"f16", func() { OwnF32[testBuf](dev, half, "cpu", "SGD", 1, 4) }, "cpu: SGD: operand 1 is f16, want f32"},
		{"short", func() { OwnF32[testBuf](dev, short, "cpu", "Adam", 2, 4) }, "cpu: Adam: operand 2 has 3 elements, operand 0 has 4"},
		{"nil", func() { OwnF32[testBuf](dev, nil, "cpu", "Adam", 3, 4) }, "cpu: Adam: nil buffer"},
		{"s f16", func() { OwnF32s[testBuf](dev, "cpu", "Moments", p, half) }, "cpu: Moments: operand 1 is f16, want f32"},
		{"s short", func() { OwnF32s[testBuf](dev, "cpu", "BatchNorm", nil, p, g, short) }, "cpu: BatchNorm: operand 3 has 3 elements, operand 1 has 4"},
	} {
		if got := panicText(c.f); !strings.Contains(got, c.want) {
			t.Errorf("%s: panicked with %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n        int64
		near, up string
	}{
		{0, "0 B", "0 B"},
		{1023, "1023 B", "1023 B"},
		{1024, "1.0 KiB", "1.0 KiB"},
		{1025, "1.0 KiB", "1.1 KiB"},
		{68_270_000, "65.1 MiB", "65.2 MiB"},
		{1<<20 - 1, "1.0 MiB", "1.0 MiB"},
		{3 << 29, "1.5 GiB", "1.5 GiB"},
		{-1536, "-1.5 KiB", "-1.5 KiB"},
	} {
		if got := FormatBytes(c.n); got != c.near {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.near)
		}
		if got := FormatBytesUp(c.n); got != c.up {
			t.Errorf("FormatBytesUp(%d) = %q, want %q", c.n, got, c.up)
		}
	}
}
