package gemm_test

import (
	"fmt"

	"github.com/mixprec/mixprec/device/cpu/internal/gemm"
)

// A linear layer's forward pass, y = x·Wᵀ, with float32 activations and
// bfloat16 weights: W is stored out x in, so op(B) is its transpose.
func Example() {
	x := []float32{ // 2 x 3: a batch of two inputs
		1, 2, 3,
		4, 5, 6,
	}
	w := []uint16{ // 2 x 3 in bfloat16: 1, 0, -1 and 0.5, 0.5, 0.5
		0x3f80, 0x0000, 0xbf80,
		0x3f00, 0x3f00, 0x3f00,
	}
	y := make([]float32, 2*2)
	gemm.Gemm(false, true, 2, 2, 3, 1,
		gemm.Operand{F32: x, LD: 3},
		gemm.Operand{U16: w, BF16: true, LD: 3},
		0, y, 2)
	fmt.Println(y[:2])
	fmt.Println(y[2:])
	// Output:
	// [-2 3]
	// [-2 7.5]
}
