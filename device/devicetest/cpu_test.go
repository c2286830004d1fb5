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

// TestCPUByFamily runs each group's function on a device that has the
// CPU's memory and that group of kernels alone (an early backend, as in
// ExampleRunElementwise), so a check that calls a kernel of another group
// fails (its panic is reported as the case's failure): each function tests
// what a backend brought up to that group has.
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
		{"Elementwise", devicetest.RunElementwise, early{Memory: d, ElementwiseKernels: d}},
		{"LinAlg", devicetest.RunLinAlg, early{Memory: d, LinAlgKernels: d}},
		{"Loss", devicetest.RunLoss, early{Memory: d, LossKernels: d}},
		{"Optim", devicetest.RunOptim, early{Memory: d, OptimKernels: d}},
		{"ConvPool", devicetest.RunConvPool, early{Memory: d, ConvPoolKernels: d}},
		{"Norm", devicetest.RunNorm, early{Memory: d, NormKernels: d}},
		{"Transformer", devicetest.RunTransformer, early{Memory: d, TransformerKernels: d}},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { f.run(t, f.dev) })
	}
}
