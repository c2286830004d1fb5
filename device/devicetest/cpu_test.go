package devicetest_test

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/device/devicetest"
)

// TestCPU runs the conformance suite on the CPU backend, the oracle every
// other backend is compared with.
func TestCPU(t *testing.T) {
	devicetest.Run(t, func() device.Device { return cpu.New() })
}

// partial is a backend brought up a group at a time: the CPU's memory and
// only the kernel groups set; the others are nil, and calling one of
// their kernels panics.
type partial struct {
	device.Memory
	device.ElementwiseKernels
	device.LinAlgKernels
	device.LossKernels
	device.ConvPoolKernels
	device.NormKernels
	device.OptimKernels
}

func (partial) Name() string { return "cpu, partly" }

// TestCPUByFamily runs each group's function on a device that has the
// CPU's memory and that group of kernels alone, so a check that calls a
// kernel of another group fails (its panic is reported as the case's
// failure): each function tests what a backend brought up to that group
// has.
func TestCPUByFamily(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite a second time")
	}
	d := cpu.New()
	families := []struct {
		name string
		run  func(*testing.T, device.Device)
		dev  device.Device
	}{
		// The memory checks compare a buffer's Device() with the device
		// that allocated it, which only the CPU device itself is.
		{"Memory", devicetest.RunMemory, d},
		{"Elementwise", devicetest.RunElementwise, partial{Memory: d, ElementwiseKernels: d}},
		{"LinAlg", devicetest.RunLinAlg, partial{Memory: d, LinAlgKernels: d}},
		{"Loss", devicetest.RunLoss, partial{Memory: d, LossKernels: d}},
		{"Optim", devicetest.RunOptim, partial{Memory: d, OptimKernels: d}},
		{"ConvPool", devicetest.RunConvPool, partial{Memory: d, ConvPoolKernels: d}},
		{"Norm", devicetest.RunNorm, partial{Memory: d, NormKernels: d}},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { f.run(t, f.dev) })
	}
}
