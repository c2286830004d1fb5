//go:build !linux

package gemm

// osYield does nothing where sched_yield is not at hand: a helper's polls
// then yield only to goroutines, and a caller's none, for at most spin at a
// time.
func osYield() {}
