package tensor_test

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

func Example() {
	dev := cpu.New()
	t := tensor.FromSlice(dev, dtype.F32, device.Temp, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	h := t.Cast(dtype.BF16, device.Temp)
	v := t.Reshape(3, -1) // a view: same memory, new shape
	fmt.Println(t, h.DType(), v.Shape())
	h.Release()
	t.Release()
	// Output: Tensor([2 3], f32, cpu, [1 2 3 4 5 6]) bf16 [3 2]
}
