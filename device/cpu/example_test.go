package cpu_test

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
)

// A GEMM with F16 operands accumulates in float32 and rounds once into its
// F16 destination, as a GPU's tensor cores do.
func Example() {
	dev := cpu.New()
	a := dev.Alloc(dtype.F16, 4, device.Temp) // (2, 2)
	b := dev.Alloc(dtype.F16, 4, device.Temp) // (2, 2)
	c := dev.Alloc(dtype.F16, 4, device.Temp)
	dev.CopyFromHost(a, []float32{1, 2, 3, 4})
	dev.CopyFromHost(b, []float32{0.5, 0, 0, 0.25})
	dev.Gemm(c, a, b, device.GemmParams{M: 2, N: 2, K: 2, Alpha: 1})
	out := make([]float32, 4)
	dev.CopyToHost(out, c)
	fmt.Println(out)
	// Output: [0.5 0.5 1.5 1]
}
