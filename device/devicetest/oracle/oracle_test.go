package oracle_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest/oracle"
)

// TestCoversTable checks that the oracle has every op of device's tables:
// a row added there without its independent forward and derivative here
// fails.
func TestCoversTable(t *testing.T) {
	for op := range device.UnaryOp(device.NumUnaryOps) {
		u, ok := oracle.UnaryOp(op.String())
		if !ok || u.F == nil || u.DX == nil {
			t.Errorf("unary op %v: the oracle has no forward and derivative for it; add them to oracle/elementwise.go", op)
			continue
		}
		if op.Def().Keep == device.KeepOutput && u.DY == nil {
			t.Errorf("unary op %v keeps its output, but the oracle has no derivative in terms of it (DY)", op)
		}
	}
	for op := range device.BinaryOp(device.NumBinaryOps) {
		if _, ok := oracle.BinaryOp(op.String()); !ok {
			t.Errorf("binary op %v: the oracle has no forward for it; add it to oracle/elementwise.go", op)
		}
	}
}

// TestUnaryDerivatives checks each unary op's DX, and DY where it has one,
// against central differences of its F over the op's input domains.
func TestUnaryDerivatives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for op := range device.UnaryOp(device.NumUnaryOps) {
		u, ok := oracle.UnaryOp(op.String())
		if !ok {
			continue // TestCoversTable
		}
		for _, d := range op.Def().Domains {
			t.Run(op.String()+"/"+d.Name, func(t *testing.T) {
				a := float64(d.Alpha)
				for range 200 {
					x := d.Lo + (d.Hi-d.Lo)*rng.Float64()
					if d.Signed && rng.IntN(2) == 0 {
						x = -x
					}
					h := 1e-6 * max(1, math.Abs(x))
					num := (u.F(x+h, a) - u.F(x-h, a)) / (2 * h)
					if got := u.DX(1, x, a); !near(got, num) {
						t.Errorf("DX(1, %v, %v) = %.12g, finite difference %.12g", x, a, got, num)
					}
					if u.DY != nil {
						if got := u.DY(1, u.F(x, a), a); !near(got, num) {
							t.Errorf("DY(1, F(%v), %v) = %.12g, finite difference %.12g", x, a, got, num)
						}
					}
				}
			})
		}
	}
}

// near is agreement to the accuracy of a float64 central difference.
func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6*(1+math.Abs(want)) }

// TestNaN checks the NaN rules the backends are held to: a NaN in gives a
// NaN out, except where ReLU's gradient is zero (its operand <= 0).
func TestNaN(t *testing.T) {
	nan := math.NaN()
	for op := range device.UnaryOp(device.NumUnaryOps) {
		u, ok := oracle.UnaryOp(op.String())
		if !ok {
			continue
		}
		if v := u.F(nan, 0.5); !math.IsNaN(v) {
			t.Errorf("%v(NaN) = %v, want NaN", op, v)
		}
		if v := u.DX(nan, 1, 0.5); !math.IsNaN(v) {
			t.Errorf("%v: DX(NaN, 1) = %v, want NaN", op, v)
		}
	}
	relu, _ := oracle.UnaryOp("relu")
	if v := relu.DY(nan, 0, 0); v != 0 {
		t.Errorf("relu: DY(NaN, 0) = %v, want 0 (threshold_backward)", v)
	}
	if v := relu.DY(2, nan, 0); v != 2 {
		t.Errorf("relu: DY(2, NaN) = %v, want 2", v)
	}
	for _, name := range []string{"maximum", "minimum"} {
		f, _ := oracle.BinaryOp(name)
		if !math.IsNaN(f(nan, math.Inf(1))) || !math.IsNaN(f(math.Inf(-1), nan)) {
			t.Errorf("%s with a NaN operand is not NaN", name)
		}
	}
}

// TestUniformIsDevices checks the oracle's dropout stream against
// device.Uniform, the specification both implement.
func TestUniformIsDevices(t *testing.T) {
	for _, k := range []oracle.DropKey{{Seed: 0, Offset: 0}, {Seed: 1234, Offset: 99}, {Seed: math.MaxUint64, Offset: 1 << 40}} {
		for i := range uint64(1000) {
			if got, want := k.Uniform(i), float64(device.Uniform(device.RandKey{Seed: k.Seed, Offset: k.Offset}, i)); got != want {
				t.Fatalf("key %+v, element %d: %v, device.Uniform %v", k, i, got, want)
			}
		}
	}
}

func arr(shape []int, v ...float64) oracle.Array { return oracle.Array{Shape: shape, Data: v} }

// TestKnownValues checks each structured op on an input small enough to
// work out by hand.
func TestKnownValues(t *testing.T) {
	ln3 := math.Log(3)
	one := arr([]int{1}, 1)
	cases := []struct {
		name      string
		got, want oracle.Array
	}{
		{"matmul", oracle.MatMul(arr([]int{2, 2}, 1, 2, 3, 4), arr([]int{2, 2}, 5, 6, 7, 8)), arr([]int{2, 2}, 19, 22, 43, 50)},
		{"bmm/TN", oracle.BatchMatMul(arr([]int{1, 2, 1}, 1, 2), arr([]int{1, 2, 1}, 3, 4), true, false), arr([]int{1, 1, 1}, 11)},
		{"bmm/NT", oracle.BatchMatMul(arr([]int{1, 1, 2}, 1, 2), arr([]int{1, 1, 2}, 3, 4), false, true), arr([]int{1, 1, 1}, 11)},
		{"linear", oracle.Linear(arr([]int{1, 2}, 1, 2), arr([]int{2, 2}, 1, 0, 1, 1), &oracle.Array{Shape: []int{2}, Data: []float64{10, 20}}), arr([]int{1, 2}, 11, 23)},
		{"conv2d/pad", oracle.Conv2d(arr([]int{1, 1, 2, 2}, 1, 2, 3, 4), arr([]int{1, 1, 3, 3}, 0, 0, 0, 0, 1, 0, 0, 0, 1), &one, 1, 1),
			arr([]int{1, 1, 2, 2}, 1+4+1, 2+1, 3+1, 4+1)},
		{"maxpool", oracle.MaxPool2d(arr([]int{1, 1, 2, 2}, 1, 4, 3, 2), 2, 2, 0), arr([]int{1, 1, 1, 1}, 4)},
		{"avgpool/pad", oracle.AvgPool2d(arr([]int{1, 1, 1, 1}, 9), 3, 1, 1), arr([]int{1, 1, 1, 1}, 1)},
		{"global-avgpool", oracle.GlobalAvgPool(arr([]int{1, 2, 1, 2}, 1, 3, 5, 9)), arr([]int{1, 2}, 2, 7)},
		{"softmax", oracle.Softmax(arr([]int{1, 2}, 0, ln3)), arr([]int{1, 2}, 0.25, 0.75)},
		{"log-softmax", oracle.LogSoftmax(arr([]int{2}, 0, ln3)), arr([]int{2}, math.Log(0.25), math.Log(0.75))},
		{"cross-entropy", oracle.CrossEntropy(arr([]int{2, 2}, 0, ln3, ln3, 0), []int{1, 1}), arr(nil, -(math.Log(0.75)+math.Log(0.25))/2)},
		{"sum-axis", oracle.SumAxis(arr([]int{2, 3}, 1, 2, 3, 4, 5, 6), 0), arr([]int{3}, 5, 7, 9)},
		{"mean", oracle.MeanAll(arr([]int{4}, 1, 2, 3, 6)), arr(nil, 3)},
		{"mse", oracle.MSE(arr([]int{2}, 1, 2), arr([]int{2}, 2, 4)), arr(nil, 2.5)},
		{"batchnorm", oracle.BatchNorm(arr([]int{2, 1}, 1, 3), nil, nil, nil, nil, 0), arr([]int{2, 1}, -1, 1)},
		{"layernorm", oracle.LayerNorm(arr([]int{1, 2}, 1, 3), arr([]int{2}, 2, 3), &oracle.Array{Shape: []int{2}, Data: []float64{0, 1}}, 0), arr([]int{1, 2}, -2, 4)},
		{"permute", oracle.Permute(arr([]int{2, 3}, 1, 2, 3, 4, 5, 6), 1, 0), arr([]int{3, 2}, 1, 4, 2, 5, 3, 6)},
		{"embedding", oracle.Embedding(arr([]int{3, 1}, 7, 8, 9), []int{2, 0}, 2), arr([]int{2, 1}, 9, 7)},
		// One position attends to itself alone: y is its v.
		{"attention/T=1", oracle.Attention(arr([]int{1, 1, 3}, 5, 6, 7), oracle.AttentionParams{Heads: 1}), arr([]int{1, 1, 1}, 7)},
		// Equal scores average the values; causal keeps the first position's own.
		{"attention/causal", oracle.Attention(arr([]int{1, 2, 3}, 0, 0, 2, 0, 0, 4), oracle.AttentionParams{Heads: 1, Causal: true}), arr([]int{1, 2, 1}, 2, 3)},
		{"broadcast", oracle.Broadcast(func(x, y float64) float64 { return x - y }, arr([]int{2, 1}, 10, 20), arr([]int{3}, 1, 2, 3)),
			arr([]int{2, 3}, 9, 8, 7, 19, 18, 17)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !slices.Equal(c.got.Shape, c.want.Shape) {
				t.Fatalf("shape %v, want %v", c.got.Shape, c.want.Shape)
			}
			for i := range c.want.Data {
				if math.Abs(c.got.Data[i]-c.want.Data[i]) > 1e-12 {
					t.Errorf("[%d] = %v, want %v", i, c.got.Data[i], c.want.Data[i])
				}
			}
		})
	}
}

// The oracle computes an op on float64 arrays; a test rounds the device's
// inputs into it (FromF32) and compares the device's output with the
// result under dtype.Close.
func Example() {
	x := oracle.FromF32([]float32{-1, 0, 2}, 3)
	gelu, _ := oracle.UnaryOp("gelu")
	y := x.Map(func(v float64) float64 { return gelu.F(v, 0) })
	fmt.Printf("%.6f\n", y.Data)
	fmt.Printf("%.4f\n", oracle.Softmax(x).Data)
	// Output:
	// [-0.158655 0.000000 1.954500]
	// [0.0420 0.1142 0.8438]
}
