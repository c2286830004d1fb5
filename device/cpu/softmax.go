package cpu

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/device"
)

// expWork is what an exp costs against the element copy grain is sized
// for: the softmax family's rows are cut into pieces of grain/expWork
// elements, so that the MLP's 128 x 10 logits, three exps an element a
// step, are shared by both cores instead of run by one (about 90 µs of a
// 1.2 ms step on an AVX2 Zen 3).
const expWork = 32

// forEachRow runs fn(r) for r in [0, rows) in parallel pieces of about
// grain/work elements of width cols.
func (d *Device) forEachRow(rows, cols, work int, fn func(r int)) {
	d.parallelGrain(rows, max(1, grain/max(cols*work, 1)), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			fn(r)
		}
	})
}

// rowMax returns x's largest element, or its last NaN (-Inf when empty).
func rowMax(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v > m || v != v {
			m = v
		}
	}
	return m
}

// logSumExp returns max(x) + log(sum(exp(x - max))), in float64; a row
// wider than softmaxCols sums the vector exp's float32 lanes where the CPU
// has them (narrower rows keep the float64 loop, and the classifiers'
// trajectories their bits).
func logSumExp(x []float32) float64 {
	m := rowMax(x)
	if math.IsInf(float64(m), 0) || m != m {
		return float64(m)
	}
	if simdTranscend == simdAVX512 && len(x) > softmaxCols {
		p := getScratch(len(x))
		s := expShift(*p, x, m)
		putScratch(p)
		return float64(m) + math.Log(s)
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v - m))
	}
	return float64(m) + math.Log(s)
}

// softmaxCols is the widest row softmaxRow takes (its exps live on the
// stack).
const softmaxCols = 64

// softmaxRow sets w[j] = g * (softmax(x)[j] - [j == c]) with one exp an
// element, exp(x[j] - max) divided by their sum, where the general loop
// takes two (logSumExp's and exp(x[j] - lse)); the two agree to float64
// rounding, far below float32's (with the vector exp, to its float32
// rounding, for rows wider than softmaxCols). It reports false, leaving w
// alone, for a row whose maximum is infinite or NaN, or wider than
// softmaxCols without the vector exp.
func softmaxRow(x, w []float32, c int, g float64) bool {
	m := rowMax(x)
	if math.IsInf(float64(m), 0) || m != m {
		return false
	}
	if simdTranscend == simdAVX512 && len(x) > softmaxCols {
		// The vector exp into w, then w[j] = g·(w[j]/s - [j == c]).
		w = w[:len(x)]
		inv := 1 / expShift(w, x, m)
		for j, e := range w {
			p := float64(e) * inv
			if j == c {
				p--
			}
			w[j] = float32(g * p)
		}
		return true
	}
	if len(x) > softmaxCols {
		return false
	}
	var e [softmaxCols]float64
	var s float64
	for j, v := range x {
		e[j] = math.Exp(float64(v - m))
		s += e[j]
	}
	w = w[:len(x)]
	for j := range w {
		p := e[j] / s
		if j == c {
			p--
		}
		w[j] = float32(g * p)
	}
	return true
}

// LogSoftmax computes dst = src - logsumexp(src) per row.
func (d *Device) LogSoftmax(dst, src device.Buffer, rows, cols int) {
	db, sb := d.buf(dst, "LogSoftmax"), d.buf(src, "LogSoftmax")
	d.checkLen("LogSoftmax", rows*cols, db, sb)
	d.forEachRow(rows, cols, expWork, func(r int) {
		x, w := read(sb, r*cols, (r+1)*cols), writeView(db, r*cols, (r+1)*cols)
		lse := logSumExp(x.v)
		for j, v := range x.v {
			w.v[j] = float32(float64(v) - lse)
		}
		x.done()
		commit(db, r*cols, w)
	})
}

// LogSoftmaxGrad computes dst = dy - exp(y)*sum(dy) per row.
func (d *Device) LogSoftmaxGrad(dst, dy, y device.Buffer, rows, cols int) {
	db, gb, yb := d.buf(dst, "LogSoftmaxGrad"), d.buf(dy, "LogSoftmaxGrad"), d.buf(y, "LogSoftmaxGrad")
	d.checkLen("LogSoftmaxGrad", rows*cols, db, gb, yb)
	d.forEachRow(rows, cols, expWork, func(r int) {
		g, yv := read(gb, r*cols, (r+1)*cols), read(yb, r*cols, (r+1)*cols)
		w := writeView(db, r*cols, (r+1)*cols)
		var s float64
		for _, v := range g.v {
			s += float64(v)
		}
		for j := range w.v {
			w.v[j] = float32(float64(g.v[j]) - math.Exp(float64(yv.v[j]))*s)
		}
		g.done()
		yv.done()
		commit(db, r*cols, w)
	})
}

func label(l float32, cols int, op string) int {
	c := int(l)
	if float32(c) != l || c < 0 || c >= cols {
		panic(fmt.Sprintf("cpu: %s: label %v is not a class index in [0, %d)", op, l, cols))
	}
	return c
}

// CrossEntropy computes loss[r] = logsumexp(logits[r]) - logits[r, label[r]].
func (d *Device) CrossEntropy(loss, logits, labels device.Buffer, rows, cols int) {
	lb, xb, yb := d.buf(loss, "CrossEntropy"), d.buf(logits, "CrossEntropy"), d.buf(labels, "CrossEntropy")
	d.checkLen("CrossEntropy", rows*cols, xb)
	d.checkLen("CrossEntropy", rows, lb, yb)
	d.forEachRow(rows, cols, expWork, func(r int) {
		x := read(xb, r*cols, (r+1)*cols)
		c := label(get(yb, r), cols, "CrossEntropy")
		set(lb, r, float32(logSumExp(x.v)-float64(x.v[c])))
		x.done()
	})
}

// CrossEntropyGrad computes dlogits = dloss * (softmax(logits) - onehot(labels)).
func (d *Device) CrossEntropyGrad(dlogits, logits, labels, dloss device.Buffer, rows, cols int) {
	db, xb, yb, gb := d.buf(dlogits, "CrossEntropyGrad"), d.buf(logits, "CrossEntropyGrad"),
		d.buf(labels, "CrossEntropyGrad"), d.buf(dloss, "CrossEntropyGrad")
	d.checkLen("CrossEntropyGrad", rows*cols, db, xb)
	d.checkLen("CrossEntropyGrad", rows, yb, gb)
	d.forEachRow(rows, cols, expWork, func(r int) {
		x, w := read(xb, r*cols, (r+1)*cols), writeView(db, r*cols, (r+1)*cols)
		c := label(get(yb, r), cols, "CrossEntropyGrad")
		g := float64(get(gb, r))
		if !softmaxRow(x.v, w.v, c, g) {
			lse := logSumExp(x.v)
			for j, v := range x.v {
				p := math.Exp(float64(v) - lse)
				if j == c {
					p--
				}
				w.v[j] = float32(g * p)
			}
		}
		x.done()
		commit(db, r*cols, w)
	})
}

// Argmax writes the index of each row's first largest element.
func (d *Device) Argmax(dst, src device.Buffer, rows, cols int) {
	db, sb := d.buf(dst, "Argmax"), d.buf(src, "Argmax")
	d.checkLen("Argmax", rows*cols, sb)
	d.checkLen("Argmax", rows, db)
	d.forEachRow(rows, cols, 1, func(r int) {
		x := read(sb, r*cols, (r+1)*cols)
		best := 0
		for j, v := range x.v {
			if v > x.v[best] || (v != v && x.v[best] == x.v[best]) {
				best = j
			}
		}
		set(db, r, float32(best))
		x.done()
	})
}
