//go:build !amd64 || purego

package gemm

// peakLoop is an FMA (or, with dot, VDPBF16PS) throughput loop: run(n) does
// n iterations of flops each.
type peakLoop struct {
	name  string
	flops int
	run   func(n int)
	dot   bool
}

// peakLoops is empty: without assembly there is no peak loop to measure.
func peakLoops() []peakLoop { return nil }
