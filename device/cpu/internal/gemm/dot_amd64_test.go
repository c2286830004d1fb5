//go:build !purego

package gemm

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestBF16DotWired checks that a CPU reporting AVX512_BF16 multiplies two
// bfloat16 operands with the VDPBF16PS kernels unless told not to.
func TestBF16DotWired(t *testing.T) {
	if !cpu.X86.HasAVX512BF16 || active != avx512Impl {
		t.Skipf("no AVX512_BF16 on this CPU (active implementation %s)", active.name)
	}
	bf := Operand{U16: []uint16{0}, BF16: true, LD: 1}
	for _, on := range []bool{true, false} {
		prev := bf16Dot
		bf16Dot = on
		got := implFor(&bf, &bf)
		bf16Dot = prev
		want := avx512DotImpl
		if !on {
			want = avx512Impl
		}
		if got != want {
			t.Errorf("bf16Dot=%v: BF16 x BF16 runs on %s, want %s", on, got.name, want.name)
		}
	}
}
