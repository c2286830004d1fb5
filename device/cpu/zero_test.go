package cpu

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestZeroOnFree frees buffers of each dtype and reads their storage
// through slices kept from before: zeros with the option, the old values
// without, and a buffer allocated again from the cache starts from zeros.
func TestZeroOnFree(t *testing.T) {
	for _, zero := range []bool{false, true} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			d := NewWithOptions(Options{ZeroOnFree: zero})
			const n = 37 // an odd count of 16-bit values leaves half a word in the block
			b := d.Alloc(dt, n, device.Temp).(*Buffer)
			vals := make([]float32, n)
			for i := range vals {
				vals[i] = float32(i + 1)
			}
			d.CopyFromHost(b, vals)
			block := b.words()
			d.Free(b)
			nonzero := 0
			for _, w := range block {
				if w != 0 {
					nonzero++
				}
			}
			if zero && nonzero != 0 || !zero && nonzero == 0 {
				t.Errorf("ZeroOnFree %v, %v: %d of the freed block's %d words are not zero", zero, dt, nonzero, len(block))
			}
			if zero {
				again := d.Alloc(dt, n, device.Temp)
				got := make([]float32, n)
				d.CopyToHost(got, again)
				for i, v := range got {
					if v != 0 {
						t.Fatalf("%v: reused buffer[%d] = %v, want 0", dt, i, v)
					}
				}
				d.Free(again)
			}
		}
	}
}

func TestOptionsFromEnv(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want bool
	}{{"1", true}, {"true", true}, {"0", false}, {"", false}, {"nonsense", false}} {
		t.Setenv("MIXPREC_CPU_ZERO_ON_FREE", tt.env)
		if got := OptionsFromEnv().ZeroOnFree; got != tt.want {
			t.Errorf("MIXPREC_CPU_ZERO_ON_FREE=%q: ZeroOnFree %v, want %v", tt.env, got, tt.want)
		}
	}
}
