//go:build !purego

package gemm

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestBF16DotWired checks that a CPU reporting AVX512_BF16 multiplies two
// bfloat16 operands with the VDPBF16PS kernels when told to, or by default
// where they are measured to pay, and with the widening ones when told not
// to or where they do not.
func TestBF16DotWired(t *testing.T) {
	if !cpu.X86.HasAVX512BF16 || active != avx512Impl {
		t.Skipf("no AVX512_BF16 on this CPU (active implementation %s)", active.name)
	}
	pays := avx512DotImpl.pays()
	t.Logf("VDPBF16PS pays on this CPU: %v", pays)
	// The decision is made once: asking again gives the same answer.
	if again := avx512DotImpl.pays(); again != pays {
		t.Errorf("pays() = %v, then %v", pays, again)
	}
	bf := Operand{U16: []uint16{0}, BF16: true, LD: 1}
	for _, tt := range []struct {
		mode dotMode
		dot  bool
	}{{dotOn, true}, {dotOff, false}, {dotAuto, pays}} {
		prev := bf16Dot
		bf16Dot = tt.mode
		got := implFor(&bf, &bf)
		bf16Dot = prev
		want := avx512Impl
		if tt.dot {
			want = avx512DotImpl
		}
		if got != want {
			t.Errorf("mode %d: BF16 x BF16 runs on %s, want %s", tt.mode, got.name, want.name)
		}
	}
}
