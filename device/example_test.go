package device_test

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	_ "github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
)

// A backend is opened by name; buffers are allocated with a category, and
// MemStats reports where the bytes went.
func Example() {
	dev, err := device.Open("cpu")
	if err != nil {
		panic(err)
	}
	a := dev.Alloc(dtype.F16, 1024, device.Activation)
	b := dev.Alloc(dtype.F32, 256, device.Param)
	dev.Fill(a, 1.5)
	s := dev.MemStats()
	fmt.Println(s.Live.Category(device.Activation), s.Live.Category(device.Param), s.Live.Total)
	dev.Free(a)
	dev.Free(b)
	fmt.Println(dev.MemStats().Live.Total, dev.MemStats().Peak.Total)
	// Output:
	// 2048 1024 3072
	// 0 3072
}
