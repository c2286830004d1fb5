package testdev_test

import (
	"fmt"

	"github.com/mixprec/mixprec/internal/testdev"
)

// In a test, testdev.Each(t, func(t *testing.T, dev device.Device) { ... })
// runs the body once per device; Devices lists them, the CPU first.
func ExampleDevices() {
	fmt.Println(testdev.Devices()[0].Name())
	// Output: cpu
}
