package gemm

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the user+system CPU time this process has used. The
// benchmarks report work per CPU second next to work per wall second: on a
// machine shared with other jobs the wall-clock rate drops whenever this
// process is descheduled, the CPU rate does not.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports GFLOP per CPU-second ("GFLOP/cpu-s") for a benchmark.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{processCPU()} }

func (c cpuMeter) report(b *testing.B, flops float64) {
	if d := processCPU() - c.start; d > 0 {
		b.ReportMetric(flops*float64(b.N)/d.Seconds()/1e9, "GFLOP/cpu-s")
	}
}
