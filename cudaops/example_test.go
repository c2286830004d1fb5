package cudaops_test

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"

	_ "github.com/mixprec/mixprec/cudaops" // links the CUDA backend in
	_ "github.com/mixprec/mixprec/device/cpu"
)

// A program links the backend in with a blank import and asks the device
// registry for it; without a GPU it gets an error saying why and falls back
// to the CPU, which computes the same result.
func Example() {
	dev, err := device.Open("cuda")
	if err != nil {
		dev, _ = device.Open("cpu") // what device.Default does
	}
	x := dev.Alloc(dtype.F16, 3, device.Temp)
	defer dev.Free(x)
	dev.Fill(x, 0.1) // rounded to the nearest F16
	out := make([]float32, 3)
	dev.CopyToHost(out, x)
	fmt.Println(out)
	// Output: [0.099975586 0.099975586 0.099975586]
}
