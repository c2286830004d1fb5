package device

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// inputs are float32 values with the edge cases of every op: zeros and
// NaNs of both signs, infinities, subnormals, and random numbers.
func inputs() []float32 {
	v := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), math.Float32frombits(0xffc00000),
		float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40, 1, -1, 0.5, 3e38, -3e38}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		v = append(v, float32(r.NormFloat64()*3))
	}
	return v
}

// same is equality of values, with any NaN equal to any NaN.
func same(a, b float32) bool { return a == b || (a != a && b != b) }

// TestOpTables checks that every op has a complete row: a unique name that
// String returns, an F64 reference, and gradient functions exactly where
// the row says UnaryGrad supports the op. A constant added without its
// row fails here.
func TestOpTables(t *testing.T) {
	names := map[string]bool{}
	// checkRow checks the parts every row has: a name used once in its
	// family, which String returns, and the references.
	checkRow := func(op fmt.Stringer, id string, name string, complete bool) bool {
		if name == "" || !complete {
			t.Errorf("%s: incomplete row", id)
			return false
		}
		key := id[:strings.IndexByte(id, '(')] + " " + name // "UnaryOp relu"
		if names[key] {
			t.Errorf("%s: name %q used twice", id, name)
		}
		names[key] = true
		if got := op.String(); got != name {
			t.Errorf("%s.String() = %q, want %q", id, got, name)
		}
		return true
	}
	for op := range BinaryOp(NumBinaryOps) {
		d := op.Def()
		checkRow(op, fmt.Sprintf("BinaryOp(%d)", uint8(op)), d.Name, d.F32 != nil && d.F64 != nil)
	}
	for op := range UnaryOp(NumUnaryOps) {
		d := op.Def()
		if !checkRow(op, fmt.Sprintf("UnaryOp(%d)", uint8(op)), d.Name, d.F64 != nil) {
			continue
		}
		if hasGrad := d.GradF32 != nil && d.GradF64 != nil; hasGrad != (d.Grad != NoGrad) || (d.GradF32 == nil) != (d.GradF64 == nil) {
			t.Errorf("%v: Grad is %d but GradF32 set %v, GradF64 set %v", op, d.Grad, d.GradF32 != nil, d.GradF64 != nil)
		}
	}
	if got := UnaryOp(NumUnaryOps).String(); got != "UnaryOp(14)" {
		t.Errorf("String of an op outside the table = %q, want %q", got, "UnaryOp(14)")
	}
}

// TestF32RowsAreRoundedF64 checks that every F32 function is the F64
// reference rounded once to float32: these ops are single IEEE operations
// (products and sums of float32 values are exact or correctly rounded in
// float64), so a backend computing them either way gets the same value.
// Zeros of either sign count as equal (math.Max(+0, -0) is +0, the float32
// rule returns its second operand on a tie).
func TestF32RowsAreRoundedF64(t *testing.T) {
	x := inputs()
	for op := range BinaryOp(NumBinaryOps) {
		d := op.Def()
		for _, a := range x {
			for _, b := range x[:40] {
				got, want := d.F32(a, b), float32(d.F64(float64(a), float64(b)))
				if !same(got, want) {
					t.Errorf("%v: F32(%v, %v) = %v, float32(F64) = %v", op, a, b, got, want)
				}
			}
		}
	}
	for op := range UnaryOp(NumUnaryOps) {
		d := op.Def()
		if d.F32 == nil {
			continue
		}
		for _, v := range x {
			for _, alpha := range []float32{0, 1.5, -2.25, 1e-5} {
				got, want := d.F32(v, alpha), float32(d.F64(float64(v), float64(alpha)))
				if !same(got, want) {
					t.Errorf("%v: F32(%v, %v) = %v, float32(F64) = %v", op, v, alpha, got, want)
				}
			}
		}
	}
}

// TestGradRowsAgree checks each GradF32 against its float64 reference,
// within the float32 tolerance for finite values and exactly on NaN.
func TestGradRowsAgree(t *testing.T) {
	x := inputs()
	for op := range UnaryOp(NumUnaryOps) {
		d := op.Def()
		if d.Grad == NoGrad {
			continue
		}
		for _, dy := range x[:20] {
			for _, in := range x {
				if math.Abs(float64(in)) > 100 || math.Abs(float64(dy)) > 100 {
					continue // where float32 products overflow and float64 ones do not
				}
				got, want := float64(d.GradF32(dy, in)), d.GradF64(float64(dy), float64(in))
				if math.IsNaN(want) != math.IsNaN(got) || (!math.IsNaN(want) && math.Abs(got-want) > 1e-5+1e-4*math.Abs(want)) {
					t.Errorf("%v: GradF32(%v, %v) = %v, GradF64 = %v", op, dy, in, got, want)
				}
			}
		}
	}
}
