//go:build !purego

package gemm

import (
	"testing"

	"golang.org/x/sys/cpu"
)

func init() {
	if cpu.X86.HasAVX512BF16 && avx512Impl.dot != nil && avx512Impl.dot != avx512DotImpl {
		host := *avx512Impl
		host.name = "avx512-with-bf16dot"
		host.dot = avx512DotImpl
		moreDots = append(moreDots, variant{avx512DotImpl.name, &host, true})
	}
}

// TestBF16DotWired checks that a CPU reporting AVX512_BF16 or AMX-BF16
// multiplies two bfloat16 operands with its dot kernels (AMX's where the OS
// allows them, else VDPBF16PS's) when told to, or by default where they are
// measured to pay, and with the widening ones when told not to or where
// they do not.
func TestBF16DotWired(t *testing.T) {
	if active != avx512Impl || avx512Impl.dot == nil {
		t.Skipf("no AVX512_BF16 or AMX-BF16 on this CPU (active implementation %s)", active.name)
	}
	dot := avx512Impl.dot
	if cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && amxPermit() && dot != amxImpl {
		t.Errorf("the OS allows AMX, but BF16 x BF16 would run on %s", dot.name)
	}
	pays := dot.pays == nil || dot.pays()
	t.Logf("%s pays on this CPU: %v", dot.name, pays)
	// The decision is made once: asking again gives the same answer.
	if again := dot.pays == nil || dot.pays(); again != pays {
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
			want = dot
		}
		if got != want {
			t.Errorf("mode %d: BF16 x BF16 runs on %s, want %s", tt.mode, got.name, want.name)
		}
	}
}
