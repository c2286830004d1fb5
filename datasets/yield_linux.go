package datasets

import "syscall"

// osYield gives the core to another runnable thread, if any (sched_yield).
func osYield() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
