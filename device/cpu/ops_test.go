package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// opInputs are values that tell the float32 rules apart where they could
// differ: zeros of both signs, NaNs of both signs, infinities, subnormals,
// ties, and random numbers of both signs.
func opInputs() []float32 {
	v := []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), math.Float32frombits(0xffc00000),
		float32(math.Inf(1)), float32(math.Inf(-1)), 1e-40, -1e-40, 1, -1, 0.5, -0.5, 3e38, -3e38}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		v = append(v, float32(r.NormFloat64()*4))
	}
	return v
}

// TestUnaryLoopsMatchTable checks the CPU's own loops for the ops that are
// one float32 operation (and ReLU's gradient) against the rows of device's
// op table, which define the ops, bit for bit.
func TestUnaryLoopsMatchTable(t *testing.T) {
	x := opInputs()
	for op := range device.UnaryOp(device.NumUnaryOps) {
		def := op.Def()
		for _, alpha := range []float32{0, 1.5, -0.25, float32(math.NaN())} {
			got := make([]float32, len(x))
			unaryRow(op, got, x, alpha)
			for i, v := range x {
				var want float32
				if def.F32 != nil {
					want = def.F32(v, alpha)
				} else {
					want = float32(def.F64(float64(v), float64(alpha)))
				}
				if op == device.GELU { // computed in float32 (gelu.go): TestGELU32 bounds it
					continue
				}
				if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
					t.Errorf("Unary %v(%v, alpha %v) = %v (%#08x), want %v (%#08x)", op, v, alpha, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		}
	}
	d := New()
	for op := range device.UnaryOp(device.NumUnaryOps) {
		def := op.Def()
		if def.Grad == device.NoGrad || op == device.GELU { // GELU: TestGELU32
			continue
		}
		n := len(x)
		dy, in, dst := d.Alloc(dtype.F32, n, device.Temp), d.Alloc(dtype.F32, n, device.Temp), d.Alloc(dtype.F32, n, device.Temp)
		// Every dy against every in, a row at a time, so that NaN and
		// zero dy meet positive, zero and NaN outputs.
		hdy := make([]float32, n)
		hin := make([]float32, n)
		got := make([]float32, n)
		for _, g := range x[:20] {
			for i := range hdy {
				hdy[i] = g
			}
			copy(hin, x)
			d.CopyFromHost(dy, hdy)
			d.CopyFromHost(in, hin)
			d.UnaryGrad(op, dst, dy, in)
			d.CopyToHost(got, dst)
			for i := range got {
				want := def.GradF32(hdy[i], hin[i])
				if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
					t.Errorf("UnaryGrad %v(dy %v, in %v) = %v (%#08x), want %v (%#08x)", op, hdy[i], hin[i], got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		}
		d.Free(dy)
		d.Free(in)
		d.Free(dst)
	}
}

// TestBinaryLoopsMatchTable checks the CPU's own loops for Add, Sub, Mul
// and Div, with and without a broadcast operand, against the table.
func TestBinaryLoopsMatchTable(t *testing.T) {
	x := opInputs()
	y := append([]float32(nil), x...)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(y), func(i, j int) { y[i], y[j] = y[j], y[i] })
	for op := range device.BinaryOp(device.NumBinaryOps) {
		f := op.Def().F32
		check := func(how string, got []float32, a, b func(i int) float32) {
			t.Helper()
			for i := range got {
				want := f(a(i), b(i))
				if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
					t.Errorf("Binary %v %s (%v, %v) = %v (%#08x), want %v (%#08x)", op, how, a(i), b(i), got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
				}
			}
		}
		got := make([]float32, len(x))
		binaryRow(op, got, x, y)
		check("elementwise", got, func(i int) float32 { return x[i] }, func(i int) float32 { return y[i] })
		for _, s := range x[:16] {
			binaryRow(op, got, x, []float32{s})
			check("b broadcast", got, func(i int) float32 { return x[i] }, func(int) float32 { return s })
			binaryRow(op, got, []float32{s}, y)
			check("a broadcast", got, func(int) float32 { return s }, func(i int) float32 { return y[i] })
		}
	}
}
