package datasets

import (
	"syscall"
	"unsafe"
)

// madvHugepage is MADV_HUGEPAGE, which the syscall package lacks.
const madvHugepage = 14

// adviseHuge asks for huge pages for the whole huge pages inside the n
// bytes at p (madvise MADV_HUGEPAGE). It must come before the memory is
// first written: a page already faulted in stays small until the kernel's
// background collapsing gets to it. Where transparent huge pages are off,
// or always on, it changes nothing; its error is of no consequence and is
// ignored.
func adviseHuge(p unsafe.Pointer, n uintptr) {
	lo := (uintptr(p) + hugePage - 1) &^ (hugePage - 1)
	hi := (uintptr(p) + n) &^ (hugePage - 1)
	if hi > lo {
		syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, madvHugepage)
	}
}
