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

// TestUnaryLoopsMatchTable checks the CPU's own loops (unaryLoops,
// unaryGradLoops and ReLU's bit-pattern paths) against the rows of
// device's op table, which define the ops, bit for bit, through the
// kernels themselves: every op, so an op without a loop is checked to run
// its row.
func TestUnaryLoopsMatchTable(t *testing.T) {
	x := opInputs()
	d := New()
	n := len(x)
	dy, in, dst := d.Alloc(dtype.F32, n, device.Temp), d.Alloc(dtype.F32, n, device.Temp), d.Alloc(dtype.F32, n, device.Temp)
	defer d.Free(dy)
	defer d.Free(in)
	defer d.Free(dst)
	got, hdy := make([]float32, n), make([]float32, n)
	d.CopyFromHost(in, x)
	check := func(what string, op device.UnaryOp, i int, want float32) {
		t.Helper()
		if math.Float32bits(got[i]) != math.Float32bits(want) && !(got[i] != got[i] && want != want) {
			t.Errorf("%s %v(dy %v, x %v) = %v (%#08x), want %v (%#08x)", what, op, hdy[i], x[i], got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
		}
	}
	for op := range device.UnaryOp(device.NumUnaryOps) {
		def := op.Def()
		for _, alpha := range []float32{0, 1.5, -0.25, float32(math.NaN())} {
			if op == device.GELU { // computed in float32 (gelu.go): TestGELU32 bounds it
				break
			}
			d.Unary(op, dst, in, alpha)
			d.CopyToHost(got, dst)
			for i, v := range x {
				check("Unary", op, i, def.Eval(v, alpha))
			}
		}
		if op == device.GELU {
			continue
		}
		// Every dy against every in, a row at a time, so that NaN and
		// zero dy meet positive, zero and NaN operands.
		for _, g := range x[:20] {
			for i := range hdy {
				hdy[i] = g
			}
			d.CopyFromHost(dy, hdy)
			d.UnaryGrad(op, dst, dy, in, 1.5)
			d.CopyToHost(got, dst)
			for i := range got {
				check("UnaryGrad", op, i, def.Grad(hdy[i], x[i], 1.5))
			}
		}
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
