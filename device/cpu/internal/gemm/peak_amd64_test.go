//go:build !purego

package gemm

import "golang.org/x/sys/cpu"

// peakLoop is an FMA (or, with dot, VDPBF16PS) throughput loop: run(n) does
// n iterations of flops each.
type peakLoop struct {
	name  string
	flops int
	run   func(n int)
	dot   bool
}

// peakLoops returns the loops this CPU can run, narrowest first, the
// bfloat16 dot-product loops last (AMX's after VDPBF16PS's).
func peakLoops() []peakLoop {
	var l []peakLoop
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		l = append(l, peakLoop{"avx2", 12 * 8 * 2, fmaPeakAVX2, false})
	}
	if cpu.X86.HasAVX512F {
		l = append(l, peakLoop{"avx512", 16 * 16 * 2, fmaPeakAVX512, false})
	}
	if cpu.X86.HasAVX512BF16 {
		l = append(l, peakLoop{"avx512-bf16dot", 16 * 16 * 4, dotPeakAVX512, true})
	}
	if avx512Impl.dot == amxImpl {
		l = append(l, peakLoop{"amx-bf16", 4 * 16 * 16 * 32 * 2, amxPeak, true})
	}
	return l
}
