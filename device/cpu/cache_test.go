package cpu

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestCacheAcrossDTypes checks that freed storage serves the next buffer
// of the same size in bytes whatever its dtype (an F32 block of n words
// holds 2n 16-bit values), that it holds what is written through the new
// dtype, and that Reserved counts the cached bytes until EmptyCache.
func TestCacheAcrossDTypes(t *testing.T) {
	d := New()
	const n = 1000
	a := d.Alloc(dtype.F32, n, device.Temp)
	d.Free(a)
	if s := d.MemStats(); s.Reserved != 4*n || s.Live.Total != 0 {
		t.Fatalf("after Free: Reserved %d, Live %d; want %d cached and 0 live", s.Reserved, s.Live.Total, 4*n)
	}
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16, dtype.F32} {
		m := 4 * n / dt.Size()
		want := make([]float32, m)
		for i := range want {
			want[i] = dtype.Round(dt, float32(i%97)-48.5)
		}
		b := d.Alloc(dt, m, device.Temp)
		if s := d.MemStats(); s.Reserved != 4*n {
			t.Errorf("Alloc(%v, %d): Reserved %d, want %d (the cached block reused)", dt, m, s.Reserved, 4*n)
		}
		d.CopyFromHost(b, want)
		got := make([]float32, m)
		d.CopyToHost(got, b)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%v buffer in a reused block: [%d] = %v, want %v", dt, i, got[i], want[i])
			}
		}
		d.Free(b)
	}
	d.EmptyCache()
	if s := d.MemStats(); s.Reserved != 0 {
		t.Errorf("after EmptyCache: Reserved %d, want 0", s.Reserved)
	}
}
