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
