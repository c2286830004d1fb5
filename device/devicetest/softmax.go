package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest/oracle"
	"github.com/mixprec/mixprec/dtype"
)

// rowsCase is a (rows, cols) geometry with logits drawn from
// shift + U(-spread, spread).
type rowsCase struct {
	name          string
	rows, cols    int
	shift, spread float64
}

var softmaxCases = []rowsCase{
	{"1x1", 1, 1, 0, 3},
	{"3x10", 3, 10, 0, 3},
	{"64x33", 64, 33, 0, 5},
	{"7x1000", 7, 1000, 0, 3},
	// Logits of +-1000 overflow or underflow exp unless the maximum is
	// subtracted first.
	{"large+1000", 4, 7, 1000, 3},
	{"large-1000", 4, 7, -1000, 3},
	{"equal", 3, 5, 2, 0},
	{"parallel/600x40", 600, 40, 0, 4},
}

// rowsRef applies the oracle's row op f to x (rows, cols).
func rowsRef(x []float32, c rowsCase, f func(oracle.Array) oracle.Array) []float64 {
	return f(oracle.FromF32(x, c.rows, c.cols)).Data
}

// narrow returns v as float32s.
func narrow(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// maxAbs is max |x_i|.
func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(float64(v)))
	}
	return m
}

// lseSlack is the extra error allowed where a result is a difference with
// logsumexp of a row: a float32 kernel that forms logsumexp before
// subtracting rounds it to within half an ulp of its magnitude, which for
// logits near 1000 is 3e-5, more than the F32 tolerance of a result near 0.
// The CPU backend forms logsumexp in float64 and needs none of it (its
// largest LogSoftmax error is 9.5e-7).
func lseSlack(row []float32) float64 { return 2 * u32 * maxAbs(row) }

func (e *env) logits(c rowsCase) []float32 {
	return e.uniform(c.rows*c.cols, c.shift-c.spread, c.shift+c.spread)
}

// softmaxTypes are (dst; src): autocast runs softmax in F32 on 16-bit
// inputs, and a 16-bit result of an F32 input is a plain cast.
var softmaxTypes = sameAnd(1,
	mix(dtype.F32, dtype.F16),
	mix(dtype.F32, dtype.BF16),
	mix(dtype.F16, dtype.F32),
)

func testLogSoftmax(t *testing.T, dev device.Device) {
	testRowOp(t, dev, dev.LogSoftmax, oracle.LogSoftmax, lseSlack)
}

func testSoftmax(t *testing.T, dev device.Device) {
	testRowOp(t, dev, dev.Softmax, oracle.Softmax, nil)
}

// testRowOp checks op, a softmax along rows, against the oracle's ref on
// every case and dtype combination, allowing slack(row) more than the
// tolerance on each element of a row (none when slack is nil).
func testRowOp(t *testing.T, dev device.Device, op func(dst, src device.Buffer, rows, cols int),
	ref func(oracle.Array) oracle.Array, slack func(row []float32) float64) {
	for _, ty := range softmaxTypes {
		for _, c := range softmaxCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				x := e.logits(c)
				xb := e.put(ty.src[0], x)
				got := e.output(ty.dst, len(x), func(db device.Buffer) {
					op(db, xb, c.rows, c.cols)
				})
				var extra []float64
				if slack != nil {
					extra = make([]float64, len(x))
					for i := range extra {
						extra[i] = slack(x[i/c.cols*c.cols : (i/c.cols+1)*c.cols])
					}
				}
				e.near("dst", ty.dst, got, rowsRef(x, c, ref), extra)
			})
		}
	}
}

func testLogSoftmaxGrad(t *testing.T, dev device.Device) {
	// dst; dy, y
	types := sameAnd(2,
		mix(dtype.F32, dtype.F16, dtype.F32),
		mix(dtype.F32, dtype.BF16, dtype.BF16),
		mix(dtype.F16, dtype.F32, dtype.F32),
	)
	for _, ty := range types {
		for _, c := range softmaxCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				x := e.logits(c)
				y := narrow(rowsRef(x, c, oracle.LogSoftmax))
				dy := e.uniform(len(x), -1, 1)
				dyb, yb := e.put(ty.src[0], dy), e.put(ty.src[1], y)
				got := e.output(ty.dst, len(x), func(db device.Buffer) {
					e.dev.LogSoftmaxGrad(db, dyb, yb, c.rows, c.cols)
				})
				want, slack := make([]float64, len(x)), make([]float64, len(x))
				for r := range c.rows {
					var s, abs float64
					for j := range c.cols {
						s += float64(dy[r*c.cols+j])
						abs += math.Abs(float64(dy[r*c.cols+j]))
					}
					for j := range c.cols {
						i := r*c.cols + j
						p := math.Exp(float64(y[i]))
						want[i] = float64(dy[i]) - p*s
						slack[i] = p * sumSlack(c.cols, abs)
					}
				}
				e.near("dst", ty.dst, got, want, slack)
			})
		}
	}
}

func testSoftmaxGrad(t *testing.T, dev device.Device) {
	// dst; dy, y
	types := sameAnd(2, mix(dtype.F32, dtype.BF16, dtype.F32), mix(dtype.F16, dtype.F32, dtype.F32))
	for _, ty := range types {
		for _, c := range softmaxCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				y := narrow(rowsRef(e.logits(c), c, oracle.Softmax))
				dy := e.uniform(len(y), -1, 1)
				dyb, yb := e.put(ty.src[0], dy), e.put(ty.src[1], y)
				got := e.output(ty.dst, len(y), func(db device.Buffer) {
					dev.SoftmaxGrad(db, dyb, yb, c.rows, c.cols)
				})
				want, slack := make([]float64, len(y)), make([]float64, len(y))
				for r := range c.rows {
					var s, abs float64
					for j := range c.cols {
						i := r*c.cols + j
						s += float64(dy[i]) * float64(y[i])
						abs += math.Abs(float64(dy[i]) * float64(y[i]))
					}
					for j := range c.cols {
						i := r*c.cols + j
						want[i] = float64(y[i]) * (float64(dy[i]) - s)
						slack[i] = float64(y[i]) * sumSlack(c.cols, abs)
					}
				}
				e.near("dst", ty.dst, got, want, slack)
			})
		}
	}
}

// ceTypes are (loss or dlogits; logits, labels).
var ceTypes = sameAnd(2,
	mix(dtype.F32, dtype.F16, dtype.F32),
	mix(dtype.F32, dtype.BF16, dtype.F32),
	mix(dtype.F32, dtype.F32, dtype.F16),
)

// labels returns rows class indices in [0, cols), the first 0 and the last
// cols-1; it skips the case when dt cannot hold them exactly (BF16 holds
// integers up to 256 only).
func (e *env) labels(rows, cols int, dt dtype.DType) []float32 {
	if float64(dtype.Round(dt, float32(cols-1))) != float64(cols-1) {
		e.t.Skipf("%v cannot hold class index %d", dt, cols-1)
	}
	l := make([]float32, rows)
	for r := range l {
		l[r] = float32(e.rng.IntN(cols))
	}
	l[0] = 0
	l[rows-1] = float32(cols - 1)
	return l
}

func testCrossEntropy(t *testing.T, dev device.Device) {
	for _, ty := range ceTypes {
		for _, c := range softmaxCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				labels := e.labels(c.rows, c.cols, ty.src[1])
				x := e.logits(c)
				xb, lb := e.put(ty.src[0], x), e.put(ty.src[1], labels)
				got := e.output(ty.dst, c.rows, func(db device.Buffer) {
					e.dev.CrossEntropy(db, xb, lb, c.rows, c.cols)
				})
				ids := make([]int, c.rows)
				for r, l := range labels {
					ids[r] = int(l)
				}
				want := oracle.CrossEntropyRows(oracle.FromF32(x, c.rows, c.cols), ids).Data
				slack := make([]float64, c.rows)
				for r := range slack {
					slack[r] = lseSlack(x[r*c.cols : (r+1)*c.cols])
				}
				e.near("loss", ty.dst, got, want, slack)
			})
		}
	}
}

func testCrossEntropyGrad(t *testing.T, dev device.Device) {
	// dlogits; logits, labels, dloss
	types := []dtCase{
		mix(dtype.F32, dtype.F32, dtype.F32, dtype.F32),
		mix(dtype.F16, dtype.F16, dtype.F16, dtype.F16),
		mix(dtype.BF16, dtype.BF16, dtype.BF16, dtype.BF16),
		mix(dtype.F32, dtype.F16, dtype.F32, dtype.F32),
		mix(dtype.BF16, dtype.BF16, dtype.F32, dtype.F32),
		mix(dtype.F32, dtype.F32, dtype.F16, dtype.BF16),
	}
	for _, ty := range types {
		for _, c := range softmaxCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				labels := e.labels(c.rows, c.cols, ty.src[1])
				x := e.logits(c)
				dloss := e.uniform(c.rows, 0.1, 2)
				dloss[0] = -dloss[0]
				xb, lb, gb := e.put(ty.src[0], x), e.put(ty.src[1], labels), e.put(ty.src[2], dloss)
				got := e.output(ty.dst, len(x), func(db device.Buffer) {
					e.dev.CrossEntropyGrad(db, xb, lb, gb, c.rows, c.cols)
				})
				want := rowsRef(x, c, oracle.Softmax)
				for i := range want {
					r := i / c.cols
					if i%c.cols == int(labels[r]) {
						want[i]--
					}
					want[i] *= float64(dloss[r])
				}
				e.near("dlogits", ty.dst, got, want, nil)
			})
		}
	}
}

func testArgmax(t *testing.T, dev device.Device) {
	cases := []struct {
		name       string
		rows, cols int
		gen        func(e *env, n int) []float32
	}{
		{"1x1", 1, 1, func(e *env, n int) []float32 { return e.uniform(n, -1, 1) }},
		// Small integers: most rows have several maxima, and the first wins.
		{"ties/9x7", 9, 7, func(e *env, n int) []float32 { return e.ints(n, -2, 2) }},
		{"equal/3x5", 3, 5, func(e *env, n int) []float32 { return e.ints(n, 1, 1) }},
		{"negative/4x6", 4, 6, func(e *env, n int) []float32 { return e.uniform(n, -9, -1) }},
		{"last/5x8", 5, 8, func(e *env, n int) []float32 {
			v := e.uniform(n, -1, 1)
			for r := range 5 {
				v[r*8+7] = 3
			}
			return v
		}},
		{"wide/4x300", 4, 300, func(e *env, n int) []float32 { return e.ints(n, -50, 50) }},
		{"parallel/3000x10", 3000, 10, func(e *env, n int) []float32 { return e.ints(n, -3, 3) }},
	}
	for _, dt := range dtype.All {
		for _, ldt := range dtype.All {
			for _, c := range cases {
				run(t, dev, fmt.Sprintf("%v/%s", dtName(ldt, dt), c.name), func(e *env) {
					if float64(dtype.Round(ldt, float32(c.cols-1))) != float64(c.cols-1) {
						e.t.Skipf("%v cannot hold index %d", ldt, c.cols-1)
					}
					x := c.gen(e, c.rows*c.cols)
					xb := e.put(dt, x)
					got := e.output(ldt, c.rows, func(db device.Buffer) {
						e.dev.Argmax(db, xb, c.rows, c.cols)
					})
					want := make([]float32, c.rows)
					for r := range c.rows {
						best := 0
						for j := 1; j < c.cols; j++ {
							if x[r*c.cols+j] > x[r*c.cols+best] {
								best = j
							}
						}
						want[r] = float32(best)
					}
					e.exact("dst", got, want)
				})
			}
		}
	}
}

// ints returns n integers uniform in [lo, hi], as float32.
func (e *env) ints(n, lo, hi int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + e.rng.IntN(hi-lo+1))
	}
	return v
}
