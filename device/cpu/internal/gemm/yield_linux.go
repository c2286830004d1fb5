package gemm

import "syscall"

// osYield gives the core to another runnable thread, if any (sched_yield).
// It goes through syscall.Syscall, not RawSyscall, so that the runtime may
// hand this goroutine's P to other goroutines while the thread waits.
func osYield() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
