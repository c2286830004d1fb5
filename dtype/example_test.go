package dtype_test

import (
	"fmt"

	"github.com/mixprec/mixprec/dtype"
)

// Store float32 values as binary16 and bfloat16 and read them back: each
// comes back rounded to the nearest value the format holds.
func Example() {
	src := []float32{1, 0.1, 65520, 1e-8, -3.14159}
	h := make([]uint16, len(src))
	back := make([]float32, len(src))
	for _, d := range []dtype.DType{dtype.F16, dtype.BF16} {
		dtype.Encode(d, h, src)
		dtype.Decode(d, back, h)
		fmt.Printf("%-4v %04x %v\n", d, h, back)
	}
	fmt.Println(dtype.Round(dtype.F16, 65519), dtype.F16.MaxFinite())
	// Output:
	// f16  [3c00 2e66 7c00 0000 c248] [1 0.099975586 +Inf 0 -3.140625]
	// bf16 [3f80 3dcd 4780 322c c049] [1 0.100097656 65536 1.0011718e-08 -3.140625]
	// 65504 65504
}
