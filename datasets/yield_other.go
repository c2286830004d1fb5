//go:build !linux

package datasets

// osYield has no portable form; the runtime.Gosched beside it suffices.
func osYield() {}
