package devicetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest/oracle"
	"github.com/mixprec/mixprec/dtype"
)

// sizes of elementwise cases: one element, an odd size, and one large
// enough to be split into pieces (parallel on the CPU, many blocks on a GPU).
var elemSizes = []int{1, 37, 50001}

func testAxpby(t *testing.T, dev device.Device) {
	types := sameAnd(2,
		mix(dtype.F32, dtype.F16, dtype.BF16),
		mix(dtype.F16, dtype.F32, dtype.F16),
		mix(dtype.BF16, dtype.BF16, dtype.F32),
		mix(dtype.F32, dtype.F16, dtype.F16),
	)
	scalars := []struct{ alpha, beta float32 }{{1, 1}, {2, -0.5}, {-1, 0.25}, {0.3, 0}}
	for _, ty := range types {
		for _, n := range elemSizes {
			for _, s := range scalars {
				run(t, dev, fmt.Sprintf("%v/n%d/a%v_b%v", ty, n, s.alpha, s.beta), func(e *env) {
					x, y := e.uniform(n, -2, 2), e.uniform(n, -2, 2)
					if s.beta == 0 {
						// beta == 0 does not read y: a NaN there must not appear.
						for i := range y {
							y[i] = nan
						}
					}
					xb, yb := e.put(ty.src[0], x), e.put(ty.src[1], y)
					got := e.output(ty.dst, n, func(db device.Buffer) {
						e.dev.Axpby(db, xb, yb, s.alpha, s.beta)
					})
					e.near("dst", ty.dst, got, axpbyRef(x, y, s.alpha, s.beta), nil)
				})
			}
		}
	}
	for _, dt := range dtype.All {
		for _, n := range []int{37, 50001} {
			for _, alias := range []string{"x", "y"} {
				run(t, dev, fmt.Sprintf("%v/n%d/dst=%s", dt, n, alias), func(e *env) {
					x, y := e.uniform(n, -2, 2), e.uniform(n, -2, 2)
					roundTo(dt, x)
					roundTo(dt, y)
					got := e.twice(func(float32) [][]float32 {
						xb, yb := e.put(dt, append([]float32(nil), x...)), e.put(dt, append([]float32(nil), y...))
						db := xb
						if alias == "y" {
							db = yb
						}
						e.dev.Axpby(db, xb, yb, 1.25, -0.75)
						return [][]float32{e.get(db)}
					})[0]
					e.near("dst", dt, got, axpbyRef(x, y, 1.25, -0.75), nil)
				})
			}
		}
	}
}

func axpbyRef(x, y []float32, alpha, beta float32) []float64 {
	want := make([]float64, len(x))
	for i := range x {
		want[i] = float64(alpha) * float64(x[i])
		if beta != 0 {
			want[i] += float64(beta) * float64(y[i])
		}
	}
	return want
}

// binaryCase is one iteration space and how a and b are read through it.
type binaryCase struct {
	name   string
	shape  []int
	sa, sb []int
	na, nb int // operand lengths
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bcast is the case of a (shape as) and b (shape bs) broadcast to shape.
func bcast(name string, shape, as, bs []int) binaryCase {
	return binaryCase{name, shape, device.BroadcastStrides(as, shape), device.BroadcastStrides(bs, shape), numel(as), numel(bs)}
}

var binaryCases = []binaryCase{
	bcast("same(5,7)", []int{5, 7}, []int{5, 7}, []int{5, 7}),
	bcast("one(1)", []int{1}, []int{1}, []int{1}),
	bcast("row(6,9)+(9)", []int{6, 9}, []int{6, 9}, []int{9}),
	bcast("col(6,9)+(6,1)", []int{6, 9}, []int{6, 9}, []int{6, 1}),
	bcast("scalar(4,5)+()", []int{4, 5}, []int{4, 5}, []int{}),
	bcast("channel(2,3,4,5)+(1,3,1,1)", []int{2, 3, 4, 5}, []int{2, 3, 4, 5}, []int{1, 3, 1, 1}),
	bcast("middle(3,5,4)+(3,1,4)", []int{3, 5, 4}, []int{3, 5, 4}, []int{3, 1, 4}),
	bcast("left(9)+(6,9)", []int{6, 9}, []int{9}, []int{6, 9}),
	bcast("leftcol(6,1)+(6,9)", []int{6, 9}, []int{6, 1}, []int{6, 9}),
	bcast("outer(6,1)+(1,9)", []int{6, 9}, []int{6, 1}, []int{1, 9}),
	// a is a (7,5) array read transposed: element (i, j) is a[j*5+i].
	{"transposedA(5,7)", []int{5, 7}, []int{1, 5}, []int{7, 1}, 35, 35},
	bcast("large(300,257)+(257)", []int{300, 257}, []int{300, 257}, []int{257}),
	bcast("large(257,300)+(257,1)", []int{257, 300}, []int{257, 300}, []int{257, 1}),
}

// binaryRef is op's float64 reference, from the oracle; a binary op
// without one fails t.
func binaryRef(t *testing.T, op device.BinaryOp) func(x, y float64) float64 {
	t.Helper()
	f, ok := oracle.BinaryOp(op.String())
	if !ok {
		t.Fatalf("binary op %v has no reference: add it to devicetest/oracle", op)
	}
	return f
}

// walk calls f(i, offA, offB) for every element i of shape in row-major
// order, with the offsets of a and b through strides sa and sb.
func walk(shape, sa, sb []int, f func(i, oa, ob int)) {
	idx := make([]int, len(shape))
	total := numel(shape)
	for i := range total {
		oa, ob := 0, 0
		for d := range shape {
			oa += idx[d] * sa[d]
			if sb != nil {
				ob += idx[d] * sb[d]
			}
		}
		f(i, oa, ob)
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
}

// binaryTypes are Binary's dtype combinations: dst; a, b.
var binaryTypes = sameAnd(2,
	mix(dtype.F32, dtype.F16, dtype.BF16),
	mix(dtype.F16, dtype.F32, dtype.F16),
	mix(dtype.BF16, dtype.BF16, dtype.F32),
)

func testBinary(t *testing.T, dev device.Device) {
	for op := range device.BinaryOp(device.NumBinaryOps) {
		ref := binaryRef(t, op)
		for _, d := range op.Def().Domains {
			for _, ty := range binaryTypes {
				for _, c := range binaryCases {
					run(t, dev, caseName(op.String(), d.Name, ty.String(), c.name), func(e *env) {
						a := e.draw(d.Lo, d.Hi, d.Signed, c.na)
						b := e.draw(d.Lo, d.Hi, d.Signed, c.nb)
						if d.BHi != 0 {
							b = e.draw(d.BLo, d.BHi, d.BSigned, c.nb)
						}
						if op == device.Maximum || op == device.Minimum {
							// Some ties, which either operand answers.
							for i := 0; i < min(c.na, c.nb); i += 3 {
								b[i] = a[i]
							}
						}
						e.checkBinary(op, ref, ty, c, a, b)
					})
				}
			}
		}
	}
	testBinaryNaN(t, dev)
}

// checkBinary runs Binary on a and b through c's strides and compares it
// with ref.
func (e *env) checkBinary(op device.BinaryOp, ref func(x, y float64) float64, ty dtCase, c binaryCase, a, b []float32) {
	e.t.Helper()
	ab, bb := e.put(ty.src[0], a), e.put(ty.src[1], b)
	n := numel(c.shape)
	s := device.Strides{Shape: c.shape, A: c.sa, B: c.sb}
	got := e.output(ty.dst, n, func(db device.Buffer) {
		e.dev.Binary(op, db, ab, bb, s)
	})
	want := make([]float64, n)
	walk(c.shape, c.sa, c.sb, func(i, oa, ob int) {
		want[i] = ref(float64(a[oa]), float64(b[ob]))
	})
	e.near("dst", ty.dst, got, want, nil)
}

// caseName joins the parts of a case's name that are not empty with "/".
func caseName(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "/")
}

// unaryCase is a unary op with one of its input domains (from its row of
// device's table) and its reference, from the oracle.
type unaryCase struct {
	name  string
	op    device.UnaryOp
	d     device.Domain
	alpha float32
	ref   oracle.Unary
}

// unaryCases are the cases of every op of device's table, in op order,
// named "op" or "op/domain"; an op with no domain or no reference in the
// oracle is a failure of t.
func unaryCases(t *testing.T) []unaryCase {
	t.Helper()
	var out []unaryCase
	for op := range device.UnaryOp(device.NumUnaryOps) {
		def := op.Def()
		ref, ok := oracle.UnaryOp(op.String())
		if !ok {
			t.Errorf("unary op %v has no reference: add it to devicetest/oracle", op)
			continue
		}
		if len(def.Domains) == 0 {
			t.Errorf("unary op %v has no input domain: add one to its row of device's table", op)
		}
		for _, d := range def.Domains {
			out = append(out, unaryCase{caseName(op.String(), d.Name), op, d, d.Alpha, ref})
		}
	}
	return out
}

// input draws n inputs from c's domain, with a 0 among them where the
// domain holds it (ReLU's kink, where its rules meet).
func (c unaryCase) input(e *env, n int) []float32 {
	x := e.draw(c.d.Lo, c.d.Hi, c.d.Signed, n)
	if n > 2 && c.d.Lo <= 0 && 0 < c.d.Hi && !c.d.Signed {
		x[1] = 0
	}
	return x
}

// fwd is the reference of op(x).
func (c unaryCase) fwd(x float64) float64 { return c.ref.F(x, float64(c.alpha)) }

// gradInput is what UnaryGrad reads for the op, from the raw input x: the
// forward output for ops that keep it, x itself for the others (which
// ops that keep nothing do not read).
func (c unaryCase) gradInput(x float32) float32 {
	if c.op.Def().Keep == device.KeepOutput {
		return float32(c.fwd(float64(x)))
	}
	return x
}

// grad is the reference of dy * op'(x) from in, what UnaryGrad reads: the
// oracle's rule in terms of the output for ops that keep it, of the input
// for the others. It fails t when the op keeps its output and the oracle
// has no rule in terms of it.
func (c unaryCase) grad(t *testing.T, dy, in float64) float64 {
	if c.op.Def().Keep == device.KeepOutput {
		if c.ref.DY == nil {
			t.Fatalf("unary op %v keeps its output, and the oracle has no derivative in terms of it (DY)", c.op)
		}
		return c.ref.DY(dy, in, float64(c.alpha))
	}
	return c.ref.DX(dy, in, float64(c.alpha))
}

// unaryTypes are Unary's dtype combinations: dst; src.
var unaryTypes = sameAnd(1,
	mix(dtype.F32, dtype.F16),
	mix(dtype.BF16, dtype.F32),
	mix(dtype.F16, dtype.BF16),
)

func testUnary(t *testing.T, dev device.Device) {
	for _, c := range unaryCases(t) {
		for _, ty := range unaryTypes {
			for _, n := range elemSizes {
				run(t, dev, fmt.Sprintf("%s/%v/n%d", c.name, ty, n), func(e *env) {
					e.checkUnary(c, ty, c.input(e, n))
				})
			}
		}
	}
	testUnaryNaN(t, dev)
}

// checkUnary runs Unary on x and compares it with the reference.
func (e *env) checkUnary(c unaryCase, ty dtCase, x []float32) {
	e.t.Helper()
	xb := e.put(ty.src[0], x)
	got := e.output(ty.dst, len(x), func(db device.Buffer) {
		e.dev.Unary(c.op, db, xb, c.alpha)
	})
	want := make([]float64, len(x))
	for i, v := range x {
		want[i] = c.fwd(float64(v))
	}
	e.near("dst", ty.dst, got, want, nil)
}

// unaryGradTypes are UnaryGrad's dtype combinations: dst; dy, in.
var unaryGradTypes = sameAnd(2,
	mix(dtype.F32, dtype.F16, dtype.BF16),
	mix(dtype.BF16, dtype.F32, dtype.F32),
	mix(dtype.F16, dtype.F16, dtype.F32),
)

func testUnaryGrad(t *testing.T, dev device.Device) {
	for _, c := range unaryCases(t) {
		for _, ty := range unaryGradTypes {
			for _, n := range elemSizes {
				run(t, dev, fmt.Sprintf("%s/%v/n%d", c.name, ty, n), func(e *env) {
					e.checkUnaryGrad(c, ty, c.input(e, n), e.uniform(n, -2, 2), "")
				})
			}
		}
	}
	testUnaryGradNaN(t, dev)
}

// checkUnaryGrad runs UnaryGrad on dy and what the op keeps of x, and
// compares it with the reference. nanIn, "in" or "dy", sprinkles NaNs
// into that operand first.
func (e *env) checkUnaryGrad(c unaryCase, ty dtCase, x, dy []float32, nanIn string, nanBits ...uint32) {
	e.t.Helper()
	n := len(x)
	in := make([]float32, n)
	for i, v := range x {
		in[i] = c.gradInput(v)
	}
	switch nanIn {
	case "in":
		e.sprinkle(in, nanBits, 4)
	case "dy":
		e.sprinkle(dy, nanBits, 4)
	}
	dyb := e.put(ty.src[0], dy)
	// An op that keeps nothing gets no operand: its rule must not read one.
	var inb device.Buffer
	if c.op.Def().Keep != device.KeepNothing {
		inb = e.put(ty.src[1], in)
	}
	got := e.output(ty.dst, n, func(db device.Buffer) {
		e.dev.UnaryGrad(c.op, db, dyb, inb, c.alpha)
	})
	want := make([]float64, n)
	for i := range want {
		want[i] = c.grad(e.t, float64(dy[i]), float64(in[i]))
	}
	e.near("dst", ty.dst, got, want, nil)
	if ty.dst == ty.src[0] {
		// In place, dst being dy (autograd writes an activation's
		// gradient over the incoming one): the same bits.
		over := e.put(ty.dst, slices.Clone(dy))
		e.dev.UnaryGrad(c.op, over, over, inb, c.alpha)
		e.exact("dst written over dy", e.get(over), got)
	}
}

func testDropout(t *testing.T, dev device.Device) {
	types := sameAnd(1, mix(dtype.F32, dtype.F16), mix(dtype.BF16, dtype.F32))
	keys := []device.RandKey{{Seed: 1234, Offset: 0}, {Seed: 0x9e3779b97f4a7c15, Offset: 777}}
	for _, ty := range types {
		for _, n := range []int{1000, 50001} {
			for _, p := range []float32{0, 0.1, 0.5, 0.9} {
				for ki, key := range keys {
					run(t, dev, fmt.Sprintf("%v/n%d/p%v/key%d", ty, n, p, ki), func(e *env) { checkDropout(e, ty, n, p, key) })
				}
			}
		}
		// p equal to one of the stream's numbers: that element is kept
		// (Uniform >= p), which a backend comparing with > gets wrong.
		key := keys[1]
		p := device.Uniform(key, 123)
		run(t, dev, fmt.Sprintf("%v/boundary/p=Uniform(key,123)=%v", ty, p), func(e *env) { checkDropout(e, ty, 1000, p, key) })
	}
	// Different streams give different masks: the offset and the seed both
	// matter (a backend that ignored either would pass the checks above
	// only by accident of the chosen keys, never here).
	run(t, dev, "streams", func(e *env) {
		n := 4096
		sb := e.put(dtype.F32, e.signed(n, 0.5, 2))
		mask := func(key device.RandKey) []bool {
			db := e.alloc(dtype.F32, n)
			e.dev.Dropout(db, sb, 0.5, key)
			out := make([]bool, n)
			for i, v := range e.get(db) {
				out[i] = v != 0
			}
			return out
		}
		differ := func(a, b []bool) int {
			d := 0
			for i := range a {
				if a[i] != b[i] {
					d++
				}
			}
			return d
		}
		m0 := mask(device.RandKey{Seed: 5, Offset: 0})
		if d := differ(m0, mask(device.RandKey{Seed: 5, Offset: uint64(n)})); d < n/4 {
			e.t.Errorf("%s: keys {5, 0} and {5, %d} give masks that differ in %d of %d elements, want about half", e.t.Name(), n, d, n)
		}
		if d := differ(m0, mask(device.RandKey{Seed: 6, Offset: 0})); d < n/4 {
			e.t.Errorf("%s: keys {5, 0} and {6, 0} give masks that differ in %d of %d elements, want about half", e.t.Name(), d, n)
		}
		// Offset shifts the stream: element i of {5, 100} is element i+100 of {5, 0}.
		if m := mask(device.RandKey{Seed: 5, Offset: 100}); differ(m[:n-100], m0[100:]) != 0 {
			e.t.Errorf("%s: the mask of key {5, 100} is not the mask of key {5, 0} shifted by 100", e.t.Name())
		}
	})
}

func checkDropout(e *env, ty dtCase, n int, p float32, key device.RandKey) {
	// No zeros in src, so a dropped element is told from a kept one.
	src := e.signed(n, 0.5, 2)
	sb := e.put(ty.src[0], src)
	got := e.output(ty.dst, n, func(db device.Buffer) {
		e.dev.Dropout(db, sb, p, key)
	})
	if p == 0 {
		want := append([]float32(nil), src...)
		roundTo(ty.dst, want)
		e.exact("dst (p=0 is the identity)", got, want)
		return
	}
	want := make([]float64, n)
	bad := 0
	for i := range n {
		u := device.Uniform(key, uint64(i))
		keep := u >= p
		if keep {
			want[i] = float64(src[i]) / (1 - float64(p))
		}
		if keep != (got[i] != 0) {
			if bad < maxReports {
				e.t.Errorf("%s: dst[%d] = %v, but Uniform(key, %d) = %v against p = %v says keep=%v", e.t.Name(), i, got[i], i, u, p, keep)
			}
			bad++
		}
	}
	if bad > maxReports {
		e.t.Errorf("%s: %d of %d mask elements wrong", e.t.Name(), bad, n)
	}
	e.near("dst", ty.dst, got, want, nil)
}
