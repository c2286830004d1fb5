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

// TestCPUByFamily runs each group's runner on the CPU backend, which
// hands it the device's memory and that group of kernels alone, so a check
// that calls a kernel of another group fails (its panic is reported as the
// case's failure): each runner tests what a backend brought up to that
// group has.
func TestCPUByFamily(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite a second time")
	}
	d := cpu.New()
	t.Run("Memory", func(t *testing.T) { devicetest.RunMemory(t, d) })
	t.Run("Elementwise", func(t *testing.T) { devicetest.RunElementwise(t, d) })
	t.Run("LinAlg", func(t *testing.T) { devicetest.RunLinAlg(t, d) })
	t.Run("Loss", func(t *testing.T) { devicetest.RunLoss(t, d) })
	t.Run("Optim", func(t *testing.T) { devicetest.RunOptim(t, d) })
	t.Run("ConvPool", func(t *testing.T) { devicetest.RunConvPool(t, d) })
	t.Run("Norm", func(t *testing.T) { devicetest.RunNorm(t, d) })
	t.Run("Transformer", func(t *testing.T) { devicetest.RunTransformer(t, d) })
}
