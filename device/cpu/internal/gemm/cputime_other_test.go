//go:build !linux

package gemm

import "testing"

// cpuMeter reports nothing where getrusage is not available.
type cpuMeter struct{}

func startCPU() cpuMeter { return cpuMeter{} }

func (cpuMeter) report(*testing.B, float64) {}
