package devicetest

import (
	"fmt"
	"testing"

	"github.com/mixprec/mixprec/device"
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
					got := e.twice(func(fill float32) [][]float32 {
						db := e.full(ty.dst, n, fill)
						e.dev.Axpby(db, xb, yb, s.alpha, s.beta)
						return [][]float32{e.get(db)}
					})[0]
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

// binaryRef is op's float64 reference, from device's op table.
func binaryRef(op device.BinaryOp, x, y float64) float64 { return op.Def().F64(x, y) }

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
		for _, ty := range binaryTypes {
			for _, c := range binaryCases {
				run(t, dev, fmt.Sprintf("%v/%v/%s", op, ty, c.name), func(e *env) {
					a := e.uniform(c.na, -2, 2)
					var b []float32
					if op == device.Div {
						b = e.signed(c.nb, 0.5, 2)
					} else {
						b = e.uniform(c.nb, -2, 2)
					}
					if op == device.Maximum || op == device.Minimum {
						// Some ties, which either operand answers.
						for i := 0; i < min(c.na, c.nb); i += 3 {
							b[i] = a[i]
						}
					}
					ab, bb := e.put(ty.src[0], a), e.put(ty.src[1], b)
					n := numel(c.shape)
					s := device.Strides{Shape: c.shape, A: c.sa, B: c.sb}
					got := e.twice(func(fill float32) [][]float32 {
						db := e.full(ty.dst, n, fill)
						e.dev.Binary(op, db, ab, bb, s)
						return [][]float32{e.get(db)}
					})[0]
					want := make([]float64, n)
					walk(c.shape, c.sa, c.sb, func(i, oa, ob int) {
						want[i] = binaryRef(op, float64(a[oa]), float64(b[ob]))
					})
					e.near("dst", ty.dst, got, want, nil)
				})
			}
		}
	}
	testBinaryNaN(t, dev)
}

// unaryCase is a unary op with its parameter and an input domain where it
// is defined and well conditioned; the reference is the op's F64 in
// device's op table.
type unaryCase struct {
	name   string
	op     device.UnaryOp
	alpha  float32
	lo, hi float64
	signed bool // magnitude in [lo, hi) with a random sign
}

func (c unaryCase) ref(x float64) float64 { return c.op.Def().F64(x, float64(c.alpha)) }

// unaryDomain is one parameter and input domain of a unary op; name tells
// several of one op apart.
type unaryDomain struct {
	name   string
	alpha  float32
	lo, hi float64
	signed bool
}

// unaryDomains lists, for every op of device's table, where the suite
// draws its inputs. An op without one fails the suite (see unaryCases).
var unaryDomains = map[device.UnaryOp][]unaryDomain{
	device.Scale:    {{alpha: -1.7, lo: -3, hi: 3}},
	device.AddConst: {{alpha: 0.3, lo: -3, hi: 3}},
	device.Neg:      {{lo: -3, hi: 3}},
	device.Exp:      {{lo: -4, hi: 4}},
	device.Log:      {{lo: 0.05, hi: 10}},
	device.Sqrt:     {{lo: 0, hi: 10}},
	device.Rsqrt:    {{name: "eps", alpha: 1e-5, lo: 0.05, hi: 10}, {name: "0.5", alpha: 0.5, lo: 0, hi: 4}},
	device.Square:   {{lo: -3, hi: 3}},
	device.Pow:      {{name: "1.5", alpha: 1.5, lo: 0, hi: 4}, {name: "-0.5", alpha: -0.5, lo: 0.1, hi: 4}, {name: "3", alpha: 3, lo: -2, hi: 2}},
	device.ReLU:     {{lo: -3, hi: 3}},
	device.GELU:     {{lo: -5, hi: 5}},
	device.Tanh:     {{lo: -5, hi: 5}},
	device.Sigmoid:  {{lo: -10, hi: 10}},
	device.Recip:    {{lo: 0.1, hi: 4, signed: true}},
}

// unaryCases are the cases of every op of device's table, in op order,
// named "op" or "op/domain"; an op with no domain is a failure of t.
func unaryCases(t *testing.T) []unaryCase {
	t.Helper()
	var out []unaryCase
	for op := range device.UnaryOp(device.NumUnaryOps) {
		ds := unaryDomains[op]
		if len(ds) == 0 {
			t.Errorf("unary op %v has no input domain: add one to devicetest's unaryDomains", op)
		}
		for _, d := range ds {
			name := op.String()
			if d.name != "" {
				name += "/" + d.name
			}
			out = append(out, unaryCase{name, op, d.alpha, d.lo, d.hi, d.signed})
		}
	}
	return out
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
					var x []float32
					if c.signed {
						x = e.signed(n, c.lo, c.hi)
					} else {
						x = e.uniform(n, c.lo, c.hi)
					}
					if c.op == device.ReLU && n > 2 {
						x[1] = 0
					}
					xb := e.put(ty.src[0], x)
					got := e.twice(func(fill float32) [][]float32 {
						db := e.full(ty.dst, n, fill)
						e.dev.Unary(c.op, db, xb, c.alpha)
						return [][]float32{e.get(db)}
					})[0]
					want := make([]float64, n)
					for i, v := range x {
						want[i] = c.ref(float64(v))
					}
					e.near("dst", ty.dst, got, want, nil)
				})
			}
		}
	}
	testUnaryNaN(t, dev)
}

// unaryGradCase is an op UnaryGrad supports, with what it reads.
type unaryGradCase struct {
	name string
	op   device.UnaryOp
}

// in maps a raw input x to what UnaryGrad reads: the forward output y for
// ops differentiated from it, x itself for the others.
func (c unaryGradCase) in(x float64) float64 {
	def := c.op.Def()
	if def.Grad == device.GradFromOutput {
		return def.F64(x, 0)
	}
	return x
}

// ref is the float64 reference of dy * op'(in).
func (c unaryGradCase) ref(dy, in float64) float64 { return c.op.Def().GradF64(dy, in) }

// unaryGradCases are the ops of device's table that UnaryGrad supports.
func unaryGradCases() []unaryGradCase {
	var out []unaryGradCase
	for op := range device.UnaryOp(device.NumUnaryOps) {
		if op.Def().Grad != device.NoGrad {
			out = append(out, unaryGradCase{op.String(), op})
		}
	}
	return out
}

// unaryGradTypes are UnaryGrad's dtype combinations: dst; dy, in.
var unaryGradTypes = sameAnd(2,
	mix(dtype.F32, dtype.F16, dtype.BF16),
	mix(dtype.BF16, dtype.F32, dtype.F32),
	mix(dtype.F16, dtype.F16, dtype.F32),
)

func testUnaryGrad(t *testing.T, dev device.Device) {
	for _, c := range unaryGradCases() {
		for _, ty := range unaryGradTypes {
			for _, n := range elemSizes {
				run(t, dev, fmt.Sprintf("%s/%v/n%d", c.name, ty, n), func(e *env) {
					x := e.uniform(n, -5, 5)
					if n > 2 {
						x[0] = 0
					}
					in := make([]float32, n)
					for i, v := range x {
						in[i] = float32(c.in(float64(v)))
					}
					dy := e.uniform(n, -2, 2)
					dyb, inb := e.put(ty.src[0], dy), e.put(ty.src[1], in)
					got := e.twice(func(fill float32) [][]float32 {
						db := e.full(ty.dst, n, fill)
						e.dev.UnaryGrad(c.op, db, dyb, inb)
						return [][]float32{e.get(db)}
					})[0]
					want := make([]float64, n)
					for i := range want {
						want[i] = c.ref(float64(dy[i]), float64(in[i]))
					}
					e.near("dst", ty.dst, got, want, nil)
				})
			}
		}
	}
	testUnaryGradNaN(t, dev)
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
	got := e.twice(func(fill float32) [][]float32 {
		db := e.full(ty.dst, n, fill)
		e.dev.Dropout(db, sb, p, key)
		return [][]float32{e.get(db)}
	})[0]
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
