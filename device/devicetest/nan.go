package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// NaN propagation. A NaN of either sign that enters an activation, a
// maximum or minimum, or a pooling window comes out as a NaN, as in
// PyTorch: a diverging run must show NaN, not a plausible 0. Both signs are
// fed because they differ in practice: Go's math.NaN() has the sign bit
// clear (0x7fc00000), while the NaN x86 arithmetic produces (0*Inf,
// Inf-Inf) has it set (0xffc00000), and a kernel that zeroes every value
// with the sign bit set turns only the second into 0. A NaN result may be
// of either sign and carry any payload (a GPU's 16-bit conversions make it
// canonical).

// nanKinds are the NaNs fed: each sign alone, and both mixed in one input.
var nanKinds = []struct {
	name string
	bits []uint32 // the NaNs placed, in turn
}{
	{"+nan", []uint32{0x7fc00000}},
	{"-nan", []uint32{0xffc00000}},
	{"mixed", []uint32{0x7fc00000, 0xffc00000}},
}

// sprinkle overwrites about one element in every `every` of v with a NaN,
// taking the bit patterns of bits in turn, and the first element of a
// slice shorter than every, so that a length-1 input is a NaN. The other elements keep
// their values, so a kernel is seen handling NaN next to ordinary inputs
// (negative ones included) in every piece a backend splits v into.
func (e *env) sprinkle(v []float32, bits []uint32, every int) {
	k := 0
	for i := range v {
		if (len(v) < every && i == 0) || e.rng.IntN(every) == 0 {
			v[i] = math.Float32frombits(bits[k%len(bits)])
			k++
		}
	}
}

// testUnaryNaN: every unary op maps a NaN to a NaN and leaves the other
// elements as they would be without it.
func testUnaryNaN(t *testing.T, dev device.Device) {
	for _, c := range unaryCases(t) {
		for _, nk := range nanKinds {
			for _, ty := range unaryTypes {
				for _, n := range elemSizes {
					run(t, dev, fmt.Sprintf("nan/%s/%s/%v/n%d", c.name, nk.name, ty, n), func(e *env) {
						x := c.input(e, n)
						e.sprinkle(x, nk.bits, 4)
						e.checkUnary(c, ty, x)
					})
				}
			}
		}
	}
}

// testUnaryGradNaN feeds NaNs as the kept operand (the output, or the
// input) and as the incoming gradient. The oracle's rules follow PyTorch:
// ReLU zeroes the gradient exactly where its output is <= 0
// (threshold_backward), so a NaN output passes dy and a NaN dy becomes 0
// where the output is 0; every other rule multiplies, and a NaN in either
// operand gives a NaN.
func testUnaryGradNaN(t *testing.T, dev device.Device) {
	for _, c := range unaryCases(t) {
		for _, where := range []string{"in", "dy"} {
			if where == "in" && c.op.Def().Keep == device.KeepNothing {
				continue // no such operand
			}
			for _, nk := range nanKinds {
				for _, ty := range unaryGradTypes {
					for _, n := range elemSizes {
						run(t, dev, fmt.Sprintf("nan/%s/%s=%s/%v/n%d", c.name, where, nk.name, ty, n), func(e *env) {
							e.checkUnaryGrad(c, ty, c.input(e, n), e.uniform(n, -2, 2), where, nk.bits...)
						})
					}
				}
			}
		}
	}
}

// testBinaryNaN: Maximum and Minimum (what a clamp is made of) return a
// NaN when either operand is one, as torch.maximum and torch.minimum do.
func testBinaryNaN(t *testing.T, dev device.Device) {
	cases := []binaryCase{binaryCases[0], binaryCases[2], binaryCases[4], binaryCases[len(binaryCases)-2]}
	for _, op := range []device.BinaryOp{device.Maximum, device.Minimum} {
		ref := binaryRef(t, op)
		for _, where := range []string{"a", "b", "ab"} {
			for _, nk := range nanKinds {
				for _, ty := range binaryTypes {
					for _, c := range cases {
						run(t, dev, fmt.Sprintf("nan/%v/%s=%s/%v/%s", op, where, nk.name, ty, c.name), func(e *env) {
							a, b := e.uniform(c.na, -2, 2), e.uniform(c.nb, -2, 2)
							if where != "b" {
								e.sprinkle(a, nk.bits, 4)
							}
							if where != "a" {
								e.sprinkle(b, nk.bits, 4)
							}
							e.checkBinary(op, ref, ty, c, a, b)
						})
					}
				}
			}
		}
	}
}

// poolNaNInput returns pooling input with ties (small integers) and NaNs
// in about one element of six, so that some windows hold none, some one
// and some several.
func (e *env) poolNaNInput(n int, bits []uint32) []float32 {
	x := e.poolInput(n, true)
	e.sprinkle(x, bits, 6)
	return x
}

// testMaxPoolNaN: a window holding a NaN has a NaN maximum, and arg
// points at the window's last NaN.
func testMaxPoolNaN(t *testing.T, dev device.Device) {
	for _, nk := range nanKinds {
		for i, ty := range poolTypes {
			for _, c := range poolCases() {
				run(t, dev, fmt.Sprintf("nan/%s/%v,arg=%v/%s", nk.name, ty, poolArgTypes[i], c.name), func(e *env) {
					s := c.s
					e.checkMaxPool(s, e.poolNaNInput(s.N*s.C*s.H*s.W, nk.bits), ty.dst, ty.src[0], poolArgTypes[i])
				})
			}
		}
	}
}

// testMaxPoolGradNaN: dy goes to the position MaxPool chose, the NaN's
// when the window holds one (arg from the device's own MaxPool on x with
// NaNs); a NaN in dy reaches only that position.
func testMaxPoolGradNaN(t *testing.T, dev device.Device) {
	for _, where := range []string{"x", "dy"} {
		for _, nk := range nanKinds {
			for _, ty := range maxPoolGradTypes {
				for _, c := range poolCases() {
					run(t, dev, fmt.Sprintf("nan/%s=%s/%v/%s", where, nk.name, ty, c.name), func(e *env) {
						s := c.s
						n, ny := s.N*s.C*s.H*s.W, s.N*s.C*s.OH*s.OW
						var x, dy []float32
						if where == "x" {
							x = e.poolNaNInput(n, nk.bits)
							dy = e.uniform(ny, -1, 1)
						} else {
							x = e.poolInput(n, true)
							dy = e.uniform(ny, -1, 1)
							e.sprinkle(dy, nk.bits, 6)
						}
						ab := e.alloc(ty.src[1], ny)
						e.dev.MaxPool(e.alloc(dtype.F32, ny), ab, e.put(dtype.F32, x), s)
						e.checkMaxPoolGrad(s, ty, x, dy, ab)
					})
				}
			}
		}
	}
}

// testAvgPoolNaN: a window holding a NaN has a NaN mean, and a NaN in dy
// spreads over its window.
func testAvgPoolNaN(t *testing.T, dev device.Device) {
	for _, nk := range nanKinds {
		eachPool(t, dev, "nan/"+nk.name+"/", func(e *env, s device.PoolShape, ty dtCase) {
			e.checkAvgPool(s, ty, e.poolNaNInput(s.N*s.C*s.H*s.W, nk.bits))
		})
	}
}

func testAvgPoolGradNaN(t *testing.T, dev device.Device) {
	for _, nk := range nanKinds {
		eachPool(t, dev, "nan/dy="+nk.name+"/", func(e *env, s device.PoolShape, ty dtCase) {
			dy := e.uniform(s.N*s.C*s.OH*s.OW, -1, 1)
			e.sprinkle(dy, nk.bits, 6)
			e.checkAvgPoolGrad(s, ty, dy)
		})
	}
}
