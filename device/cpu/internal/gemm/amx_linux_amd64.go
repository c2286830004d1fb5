//go:build !purego

package gemm

import "syscall"

// amxPermit asks Linux for this process's use of the AMX tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, Linux 5.16 and later) and
// reports whether it was given. The kernel enables the state per process
// and allocates each thread's save area on its first tile instruction; it
// refuses where the CPU or the hypervisor does not expose the state, and an
// older kernel does not know the request, so either way the product
// widens instead.
func amxPermit() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
