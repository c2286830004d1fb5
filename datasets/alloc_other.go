//go:build !linux

package datasets

import "unsafe"

// adviseHuge does nothing where madvise's huge pages are not at hand.
func adviseHuge(p unsafe.Pointer, n uintptr) {}
