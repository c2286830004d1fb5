//go:build !linux

package gemm

// osYield does nothing where sched_yield is not at hand: the pollers then
// yield only to goroutines, for at most spin at a time.
func osYield() {}
