//go:build !purego

package gemm

import "golang.org/x/sys/cpu"

// peakLoop is an FMA throughput loop: run(n) does n iterations of flops each.
type peakLoop struct {
	name  string
	flops int
	run   func(n int)
}

// peakLoops returns the loops this CPU can run, narrowest first.
func peakLoops() []peakLoop {
	var l []peakLoop
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		l = append(l, peakLoop{"avx2", 12 * 8 * 2, fmaPeakAVX2})
	}
	if cpu.X86.HasAVX512F {
		l = append(l, peakLoop{"avx512", 16 * 16 * 2, fmaPeakAVX512})
	}
	return l
}
