package cpu

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestViewHost: a buffer from ViewHost reads and writes its caller's
// memory, is accounted while it lives, and leaves that memory to its
// owner when freed: the cache does not take it, so no later buffer shares
// it.
func TestViewHost(t *testing.T) {
	d := New()
	const n = 1000
	host := make([]float32, n)
	bits := make([]uint16, n)
	for i := range host {
		host[i] = float32(i%13) - 6
	}
	dtype.Encode(dtype.F16, bits, host)
	want := append([]float32(nil), host...) // the F32 case's Fill changes host
	for _, c := range []struct {
		dt   dtype.DType
		f32  []float32
		bits []uint16
		at   unsafe.Pointer
	}{
		{dtype.F32, host, nil, unsafe.Pointer(&host[0])},
		{dtype.F16, nil, bits, unsafe.Pointer(&bits[0])},
	} {
		before := d.MemStats()
		b := d.ViewHost(c.dt, c.f32, c.bits, device.Temp)
		if b.DType() != c.dt || b.Len() != n {
			t.Fatalf("ViewHost(%v): dtype %v, length %d; want %v, %d", c.dt, b.DType(), b.Len(), c.dt, n)
		}
		if s := d.MemStats(); s.Live.Total != before.Live.Total+int64(n*c.dt.Size()) {
			t.Errorf("ViewHost(%v): live %d, want %d more than %d", c.dt, s.Live.Total, n*c.dt.Size(), before.Live.Total)
		}
		got := make([]float32, n)
		d.CopyToHost(got, b)
		for i, v := range got {
			if v != want[i] {
				t.Fatalf("ViewHost(%v) reads [%d] = %v, want %v", c.dt, i, v, want[i])
			}
		}
		d.Fill(b, 2.5) // a kernel's write lands in the caller's memory
		if c.dt == dtype.F32 && host[n-1] != 2.5 || c.dt == dtype.F16 && bits[n-1] != 0x4100 {
			t.Errorf("ViewHost(%v): a Fill of 2.5 did not reach the host memory", c.dt)
		}
		d.Free(b)
		if s := d.MemStats(); s.Live.Total != before.Live.Total || s.Reserved != before.Reserved {
			t.Errorf("after Free of a view: live %d, reserved %d; want %d and %d as before", s.Live.Total, s.Reserved, before.Live.Total, before.Reserved)
		}
		fresh := d.Alloc(c.dt, n, device.Temp)
		fb := d.buf(fresh, "test")
		var at unsafe.Pointer
		if c.dt == dtype.F32 {
			at = unsafe.Pointer(&fb.f32[0])
		} else {
			at = unsafe.Pointer(&fb.u16[0])
		}
		if at == c.at {
			t.Errorf("Alloc(%v) after freeing a view returned the viewed host memory", c.dt)
		}
		d.Free(fresh)
	}
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"f32 with bits", func() { d.ViewHost(dtype.F32, nil, bits, device.Temp) }},
		{"f16 with floats", func() { d.ViewHost(dtype.F16, host, nil, device.Temp) }},
		{"both", func() { d.ViewHost(dtype.BF16, host, bits, device.Temp) }},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "cpu: ViewHost") {
					t.Errorf("%s: panic %v, want one naming cpu: ViewHost", c.name, r)
				}
			}()
			c.f()
		}()
	}
}
