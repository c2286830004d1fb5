//go:build !purego

package dtype

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestAMD64Selection guards against the fast path silently dropping out: on a
// CPU with the features, the assembly must be listed (so the other tests check
// it) and selected.
func TestAMD64Selection(t *testing.T) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasF16C {
		t.Skip("CPU lacks AVX2 or F16C: only the generic converters run here")
	}
	names := make([]string, len(available))
	for i, c := range available {
		names[i] = c.name
	}
	want := avx2Converters.name
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL {
		want = avx512Converters.name
		if cpu.X86.HasAVX512BF16 {
			want = avx512BF16Converters.name
		}
	}
	if got := names[len(names)-1]; got != want {
		t.Errorf("selected converters = %q (available %q), want %q", got, names, want)
	}
}
