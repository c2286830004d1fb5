package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Fill sets every element of dst to v.
func (d *Device) Fill(dst device.Buffer, v float32) {
	b := d.buf(dst, "Fill")
	var h uint16
	switch b.dt {
	case dtype.F16:
		h = dtype.F32ToF16(v)
	case dtype.BF16:
		h = dtype.F32ToBF16(v)
	}
	if b.n <= grain {
		fillPiece(b, v, h, 0, b.n)
		return
	}
	d.parallel(b.n, func(lo, hi int) { fillPiece(b, v, h, lo, hi) })
}

// fillPiece sets b[lo:hi] to v, or to its 16-bit pattern h.
func fillPiece(b *Buffer, v float32, h uint16, lo, hi int) {
	if b.dt == dtype.F32 {
		s := b.f32[lo:hi]
		for i := range s {
			s[i] = v
		}
		return
	}
	s := b.u16[lo:hi]
	for i := range s {
		s[i] = h
	}
}

// Copy copies n elements, converting dtypes.
func (d *Device) Copy(dst device.Buffer, dstOff int, src device.Buffer, srcOff, n int) {
	db, sb := d.buf(dst, "Copy"), d.buf(src, "Copy")
	if dstOff < 0 || srcOff < 0 || dstOff+n > db.n || srcOff+n > sb.n {
		panic(fmt.Sprintf("cpu: Copy of %d elements from [%d:] of %d into [%d:] of %d", n, srcOff, sb.n, dstOff, db.n))
	}
	if db == sb && dstOff == srcOff {
		return
	}
	switch {
	case db.dt == sb.dt && db.dt == dtype.F32:
		copy(db.f32[dstOff:dstOff+n], sb.f32[srcOff:srcOff+n])
	case db.dt == sb.dt:
		copy(db.u16[dstOff:dstOff+n], sb.u16[srcOff:srcOff+n])
	case n <= convGrain:
		convertPiece(db, dstOff, sb, srcOff, 0, n)
	default:
		d.parallelGrain(n, convGrain, func(lo, hi int) { convertPiece(db, dstOff, sb, srcOff, lo, hi) })
	}
}

// convertPiece converts elements [lo, hi) of src[srcOff:] into dst[dstOff:],
// whose dtypes differ.
func convertPiece(db *Buffer, dstOff int, sb *Buffer, srcOff, lo, hi int) {
	switch {
	case db.dt == dtype.F32:
		dtype.Decode(sb.dt, db.f32[dstOff+lo:dstOff+hi], sb.u16[srcOff+lo:srcOff+hi])
	case sb.dt == dtype.F32:
		dtype.Encode(db.dt, db.u16[dstOff+lo:dstOff+hi], sb.f32[srcOff+lo:srcOff+hi])
	default: // F16 <-> BF16 through float32
		v := read(sb, srcOff+lo, srcOff+hi)
		dtype.Encode(db.dt, db.u16[dstOff+lo:dstOff+hi], v.v)
		v.done()
	}
}

// Axpby computes dst = alpha*x + beta*y.
func (d *Device) Axpby(dst, x, y device.Buffer, alpha, beta float32) {
	db, xb := d.buf(dst, "Axpby"), d.buf(x, "Axpby")
	n := db.n
	var yb *Buffer
	if beta == 0 {
		d.checkLen("Axpby", n, xb)
	} else {
		yb = d.buf(y, "Axpby")
		d.checkLen("Axpby", n, xb, yb)
	}
	if n <= grain {
		axpbyPiece(db, xb, yb, alpha, beta, 0, n)
		return
	}
	d.parallel(n, func(lo, hi int) { axpbyPiece(db, xb, yb, alpha, beta, lo, hi) })
}

// axpbyPiece is Axpby on [lo, hi); yb is nil when beta is 0.
func axpbyPiece(db, xb, yb *Buffer, alpha, beta float32, lo, hi int) {
	if alpha == 1 && beta == 1 && hi > lo && bnFast(db, xb, yb) {
		// Gradients meeting (autograd's accumulation): the sum in one pass
		// over the stored values, 16-bit ones widened as they are loaded.
		_, _, _ = elem(db, hi-1), elem(xb, hi-1), elem(yb, hi-1)
		bnLoops[db.dt].add(at(db, lo), at(xb, lo), at(yb, lo), hi-lo)
		return
	}
	xv, w := read(xb, lo, hi), writeView(db, lo, hi)
	if beta == 0 {
		for i, v := range xv.v {
			w.v[i] = alpha * v
		}
		xv.done()
		commit(db, lo, w)
		return
	}
	yv := read(yb, lo, hi)
	o, xs, ys := w.v, xv.v, yv.v[:len(xv.v)]
	switch {
	case alpha == 1 && beta == 1:
		for i := range xs {
			o[i] = xs[i] + ys[i]
		}
	default:
		for i := range xs {
			o[i] = alpha*xs[i] + beta*ys[i]
		}
	}
	xv.done()
	yv.done()
	commit(db, lo, w)
}

// Binary computes dst = op(a, b) with broadcasting strides.
func (d *Device) Binary(op device.BinaryOp, dst, a, b device.Buffer, s device.Strides) {
	db, ab, bb := d.buf(dst, "Binary"), d.buf(a, "Binary"), d.buf(b, "Binary")
	it := newIter(s.Shape, s.A, s.B)
	d.checkLenOf("Binary", op, it.rows*it.L, db)
	per := rowsPerPiece(&it)
	if it.rows <= per {
		binaryRows(op, db, ab, bb, &it, 0, it.rows)
		return
	}
	rows := it // the closure's copy: capturing it would put it on the heap on every path
	d.parallelGrain(it.rows, per, func(lo, hi int) { binaryRows(op, db, ab, bb, &rows, lo, hi) })
}

// rowsPerPiece is how many rows of it make a piece of about grain
// elements. A kernel whose rows fit in one piece runs them itself: the
// closure parallelGrain needs would otherwise be its one allocation.
func rowsPerPiece(it *iter) int { return max(1, grain/max(it.L, 1)) }

// binaryRows computes rows [lo, hi) of Binary.
func binaryRows(op device.BinaryOp, db, ab, bb *Buffer, it *iter, lo, hi int) {
	a, b, w := newRowBuf(ab, it.sa, it.L), newRowBuf(bb, it.sb, it.L), newRowBuf(db, 1, it.L)
	for r := lo; r < hi; r++ {
		ba, bbase := it.bases(r)
		out := w.write(r*it.L, it.L)
		binaryRow(op, out, a.read(ba, it.sa, it.L), b.read(bbase, it.sb, it.L))
		w.commit(r*it.L, out)
	}
	a.done()
	b.done()
	w.done()
}

// rowBuf is a float32 window onto one operand of a kernel that works row
// by row: the buffer's own memory where it is F32 and read contiguously,
// else one scratch slice that serves every row of a piece, since taking one
// from the pool per row costs as much as the arithmetic on short rows.
type rowBuf struct {
	b   *Buffer
	tmp *[]float32
}

// newRowBuf prepares rows of L elements of b read with stride s (0
// broadcasts one element).
func newRowBuf(b *Buffer, s, L int) rowBuf {
	if b.dt == dtype.F32 && (s == 0 || s == 1) {
		return rowBuf{b: b}
	}
	return rowBuf{b: b, tmp: getScratch(L)}
}

// read returns the L elements of b from base with stride s; for s == 0 it
// returns one element, which the caller broadcasts. The slice is valid
// until the next read.
func (r rowBuf) read(base, s, L int) []float32 {
	if r.tmp == nil {
		if s == 0 {
			return r.b.f32[base : base+1]
		}
		return r.b.f32[base : base+L]
	}
	switch s {
	case 0:
		t := (*r.tmp)[:1]
		t[0] = get(r.b, base)
		return t
	case 1:
		t := (*r.tmp)[:L]
		dtype.Decode(r.b.dt, t, r.b.u16[base:base+L])
		return t
	}
	t := (*r.tmp)[:L]
	for j := range t {
		t[j] = get(r.b, base+j*s)
	}
	return t
}

// write returns a window to fill for the L elements of b from lo; commit
// stores it.
func (r rowBuf) write(lo, L int) []float32 {
	if r.tmp == nil {
		return r.b.f32[lo : lo+L]
	}
	return (*r.tmp)[:L]
}

// commit rounds a window from write into b from lo (nothing to do for F32).
func (r rowBuf) commit(lo int, w []float32) {
	if r.tmp != nil {
		dtype.Encode(r.b.dt, r.b.u16[lo:lo+len(w)], w)
	}
}

// done returns the scratch slice to the pool.
func (r rowBuf) done() {
	if r.tmp != nil {
		putScratch(r.tmp)
	}
}

// binaryRow computes out[i] = op(a[i], b[i]); a or b of length 1 broadcasts.
func binaryRow(op device.BinaryOp, out, a, b []float32) {
	n := len(out)
	switch {
	case len(a) == n && len(b) == n:
		a, b = a[:n], b[:n]
		if n > 0 && op <= device.Div && simdTranscend == simdAVX512 {
			// One IEEE operation an element: the loops' bits, sixteen at a time.
			arithAVX512(int(op), &out[0], &a[0], &b[0], n)
			return
		}
		switch op {
		case device.Add:
			for i := range out {
				out[i] = a[i] + b[i]
			}
		case device.Sub:
			for i := range out {
				out[i] = a[i] - b[i]
			}
		case device.Mul:
			for i := range out {
				out[i] = a[i] * b[i]
			}
		case device.Div:
			for i := range out {
				out[i] = a[i] / b[i]
			}
		default:
			f := op.Def().F32
			for i := range out {
				out[i] = f(a[i], b[i])
			}
		}
	case len(b) == 1 && len(a) == n:
		y := b[0]
		a = a[:n]
		switch op {
		case device.Add:
			for i := range out {
				out[i] = a[i] + y
			}
		case device.Mul:
			for i := range out {
				out[i] = a[i] * y
			}
		default:
			f := op.Def().F32
			for i := range out {
				out[i] = f(a[i], y)
			}
		}
	case len(a) == 1 && len(b) == n:
		x := a[0]
		f := op.Def().F32
		for i := range out {
			out[i] = f(x, b[i])
		}
	default: // both broadcast scalars
		v := op.Def().F32(a[0], b[0])
		for i := range out {
			out[i] = v
		}
	}
}

// relu is max(v, 0) without a branch, which random signs would
// mispredict: negative values and -0 become +0, and a NaN stays NaN
// whatever its sign, as in PyTorch. The sign matters: the NaN x86
// arithmetic produces (0*Inf, Inf-Inf) is 0xffc00000, which a test of the
// sign bit alone would turn into 0. With the sign bit flipped, the bits of
// exactly the negative numbers (-0 to -Inf, no NaN) are the unsigned range
// [0, 0x7f800000], so one comparison picks them, compiled to a
// conditional move.
func relu(v float32) float32 {
	b := math.Float32bits(v)
	if b^0x80000000 <= 0x7f800000 {
		b = 0
	}
	return math.Float32frombits(b)
}

// signMask is all ones when the sign bit of b is set.
func signMask(b uint32) uint32 { return uint32(int32(b) >> 31) }

// numMask is all ones when b is not a NaN: its magnitude bits are at most
// those of infinity.
func numMask(b uint32) uint32 { return uint32(int32((b&0x7fffffff)-0x7f800001) >> 31) }

// reluGradMask is all ones where ReLU passes the gradient, given its output
// y: where y > 0, and where y is NaN (PyTorch's threshold_backward zeroes
// only where y <= 0, which a NaN is not). Computed without a branch.
func reluGradMask(y float32) uint32 {
	b := math.Float32bits(y)
	pos := uint32(-int32(b)>>31) &^ signMask(b) // b != 0 and the sign bit clear
	return pos | ^numMask(b)
}

// Unary computes dst = op(src).
func (d *Device) Unary(op device.UnaryOp, dst, src device.Buffer, alpha float32) {
	db, sb := d.buf(dst, "Unary"), d.buf(src, "Unary")
	d.checkLenOf("Unary", op, db.n, sb)
	if db.n <= grain {
		unaryPiece(op, db, sb, alpha, 0, db.n)
		return
	}
	d.parallel(db.n, func(lo, hi int) { unaryPiece(op, db, sb, alpha, lo, hi) })
}

// unaryPiece is Unary on [lo, hi).
func unaryPiece(op device.UnaryOp, db, sb *Buffer, alpha float32, lo, hi int) {
	if op == device.ReLU && reluFast(db, sb, lo, hi) {
		return
	}
	if op == device.GELU && geluBF16(db, sb, nil, lo, hi) {
		return
	}
	sv, w := read(sb, lo, hi), writeView(db, lo, hi)
	unaryRow(op, w.v, sv.v, alpha)
	sv.done()
	commit(db, lo, w)
}

// unaryLoops are the CPU's own loops for some ops: the ones that are one
// float32 operation, which then make no call per element, and GELU in
// float32 (gelu.go). Every other op runs through its row of device's op
// table. TestUnaryLoopsMatchTable holds the loops to the rows.
var unaryLoops = [device.NumUnaryOps]func(out, x []float32, alpha float32){
	device.Scale: func(out, x []float32, alpha float32) {
		for i, v := range x {
			out[i] = alpha * v
		}
	},
	device.AddConst: func(out, x []float32, alpha float32) {
		for i, v := range x {
			out[i] = v + alpha
		}
	},
	device.Neg: func(out, x []float32, _ float32) {
		for i, v := range x {
			out[i] = -v
		}
	},
	device.ReLU: func(out, x []float32, _ float32) {
		for i, v := range x {
			out[i] = relu(v)
		}
	},
	device.Square: func(out, x []float32, _ float32) {
		for i, v := range x {
			out[i] = v * v
		}
	},
	device.Recip: func(out, x []float32, _ float32) {
		for i, v := range x {
			out[i] = 1 / v
		}
	},
	device.GELU: func(out, x []float32, _ float32) { geluRow(out, x) },
}

// unaryRow computes out = op(x): through the op's loop, or its row of
// device's op table, in float32 where the row has F32 and otherwise in
// float64, rounded once.
func unaryRow(op device.UnaryOp, out, x []float32, alpha float32) {
	x = x[:len(out)]
	if loop := unaryLoops[op]; loop != nil {
		loop(out, x, alpha)
		return
	}
	def := op.Def()
	if f := def.F32; f != nil {
		for i, v := range x {
			out[i] = f(v, alpha)
		}
		return
	}
	f, a := def.F64, float64(alpha)
	for i, v := range x {
		out[i] = float32(f(float64(v), a))
	}
}

// UnaryGrad computes dst = dy * op'(x) from in, op's input or output.
func (d *Device) UnaryGrad(op device.UnaryOp, dst, dy, in device.Buffer, alpha float32) {
	keep := op.Def().Keep
	db, gb := d.buf(dst, "UnaryGrad"), d.buf(dy, "UnaryGrad")
	ib := gb // not read: the rule needs dy alone
	if keep != device.KeepNothing {
		ib = d.buf(in, "UnaryGrad")
	}
	d.checkLenOf("UnaryGrad", op, db.n, gb, ib)
	if db.n <= grain {
		unaryGradPiece(op, db, gb, ib, alpha, 0, db.n)
		return
	}
	d.parallel(db.n, func(lo, hi int) { unaryGradPiece(op, db, gb, ib, alpha, lo, hi) })
}

// unaryGradLoops are the CPU's own gradient loops for the activations,
// which then make no call per element; every other op runs through its
// row of device's op table. TestUnaryLoopsMatchTable holds the loops to
// the rows.
var unaryGradLoops = [device.NumUnaryOps]func(o, g, in []float32, alpha float32){
	device.Scale: func(o, g, _ []float32, alpha float32) {
		for i := range g {
			o[i] = alpha * g[i]
		}
	},
	device.Exp: func(o, g, y []float32, _ float32) {
		for i := range g {
			o[i] = g[i] * y[i]
		}
	},
	// y is the output; y > 0 exactly where the input was, and a NaN y
	// passes dy.
	device.ReLU: func(o, g, y []float32, _ float32) {
		for i := range g {
			o[i] = math.Float32frombits(math.Float32bits(g[i]) & reluGradMask(y[i]))
		}
	},
	device.Tanh: func(o, g, y []float32, _ float32) {
		for i := range g {
			o[i] = g[i] * (1 - y[i]*y[i])
		}
	},
	device.Sigmoid: func(o, g, y []float32, _ float32) {
		for i := range g {
			o[i] = g[i] * y[i] * (1 - y[i])
		}
	},
	device.GELU: func(o, g, x []float32, _ float32) { geluGradRow(o, g, x) },
}

// unaryGradPiece is UnaryGrad on [lo, hi).
func unaryGradPiece(op device.UnaryOp, db, gb, ib *Buffer, alpha float32, lo, hi int) {
	if op == device.ReLU && reluGradFast(db, gb, ib, lo, hi) {
		return
	}
	if op == device.GELU && geluBF16(db, ib, gb, lo, hi) {
		return
	}
	gv, w := read(gb, lo, hi), writeView(db, lo, hi)
	iv := gv
	if ib != gb {
		iv = read(ib, lo, hi)
	}
	o, g, x := w.v, gv.v, iv.v[:len(gv.v)]
	if loop := unaryGradLoops[op]; loop != nil {
		loop(o, g, x, alpha)
	} else {
		f := op.Def().Grad
		for i := range g {
			o[i] = f(g[i], x[i], alpha)
		}
	}
	if ib != gb {
		iv.done()
	}
	gv.done()
	commit(db, lo, w)
}

// Reduce sums src into dst through the strides s.A, in float64.
func (d *Device) Reduce(dst, src device.Buffer, s device.Strides, alpha float32) {
	db, sb := d.buf(dst, "Reduce"), d.buf(src, "Reduce")
	it := newIter(s.Shape, s.A, zeroStrides(len(s.Shape))) // "a" here is the destination's strides
	total := it.rows * it.L
	d.checkLen("Reduce", total, sb)
	// Fixed pieces, each with its own float64 accumulator, summed in piece
	// order: the result depends on the shapes only.
	perPiece := max(1, (4*grain)/max(it.L, 1))
	pieces := max(1, (it.rows+perPiece-1)/perPiece) // one piece even when src is empty, so dst becomes 0
	if pieces*db.n > 1<<22 {
		pieces, perPiece = 1, it.rows
	}
	accp := getAcc(pieces * db.n)
	acc := *accp
	if pieces == 1 {
		reducePieces(sb, &it, acc, db.n, perPiece, 0, 1)
	} else {
		rows := it // the closure's copy: capturing it would put it on the heap on every path
		d.parallelGrain(pieces, 1, func(plo, phi int) { reducePieces(sb, &rows, acc, db.n, perPiece, plo, phi) })
	}
	sum := acc[:db.n]
	for p := 1; p < pieces; p++ {
		for i, v := range acc[p*db.n : (p+1)*db.n] {
			sum[i] += v
		}
	}
	w := writeView(db, 0, db.n)
	for i, v := range sum {
		w.v[i] = float32(float64(alpha) * v)
	}
	putAcc(accp)
	commit(db, 0, w)
}

// reducePieces sums Reduce's pieces [plo, phi), each of perPiece rows of
// it, into its own accumulator of n elements in acc.
func reducePieces(sb *Buffer, it *iter, acc []float64, n, perPiece, plo, phi int) {
	src := newRowBuf(sb, 1, it.L)
	defer src.done()
	for p := plo; p < phi; p++ {
		a := acc[p*n : (p+1)*n]
		clear(a)
		for r := p * perPiece; r < min((p+1)*perPiece, it.rows); r++ {
			base, _ := it.bases(r)
			v := src.read(r*it.L, 1, it.L)
			switch it.sa {
			case 0:
				a[base] += sum64(v) // sixteen float64 partials in a fixed order, SIMD where the CPU has it
			case 1:
				addWiden(a[base:base+it.L], v)
			default:
				for j, x := range v {
					a[base+j*it.sa] += float64(x)
				}
			}
		}
	}
}

// accPool holds Reduce's float64 accumulators, which a training step needs
// at the same sizes every step.
var accPool = sync.Pool{New: func() any { return new([]float64) }}

// getAcc returns an accumulator of n elements whose contents are undefined.
func getAcc(n int) *[]float64 {
	p := accPool.Get().(*[]float64)
	if cap(*p) < n {
		*p = make([]float64, n)
	}
	*p = (*p)[:n]
	return p
}

func putAcc(p *[]float64) { accPool.Put(p) }

// zeros backs zeroStrides: strides that are all 0, read and never written.
var zeros [8]int

// zeroStrides returns n zero strides, without allocating for the ranks
// tensors have.
func zeroStrides(n int) []int {
	if n <= len(zeros) {
		return zeros[:n:n]
	}
	return make([]int, n)
}

// Expand broadcasts alpha*src into dst through the strides s.A.
func (d *Device) Expand(dst, src device.Buffer, s device.Strides, alpha float32) {
	db, sb := d.buf(dst, "Expand"), d.buf(src, "Expand")
	it := newIter(s.Shape, s.A, zeroStrides(len(s.Shape)))
	d.checkLen("Expand", it.rows*it.L, db)
	per := rowsPerPiece(&it)
	if it.rows <= per {
		expandRows(db, sb, &it, alpha, 0, it.rows)
		return
	}
	rows := it // the closure's copy: capturing it would put it on the heap on every path
	d.parallelGrain(it.rows, per, func(lo, hi int) { expandRows(db, sb, &rows, alpha, lo, hi) })
}

// expandRows computes rows [lo, hi) of Expand.
func expandRows(db, sb *Buffer, it *iter, alpha float32, lo, hi int) {
	src, w := newRowBuf(sb, it.sa, it.L), newRowBuf(db, 1, it.L)
	prev, prevRow := -1, 0
	for r := lo; r < hi; r++ {
		base, _ := it.bases(r)
		if base == prev {
			// A broadcast repeats the row just made (a bias over a
			// batch): copy its stored bits instead of computing them again.
			copyRow(db, r*it.L, prevRow*it.L, it.L)
			continue
		}
		prev, prevRow = base, r
		out := w.write(r*it.L, it.L)
		if v := src.read(base, it.sa, it.L); len(v) == 1 {
			x := alpha * v[0]
			for j := range out {
				out[j] = x
			}
		} else {
			for j, x := range v {
				out[j] = alpha * x
			}
		}
		w.commit(r*it.L, out)
	}
	src.done()
	w.done()
}

// copyRow copies b's n elements from src to dst, as stored.
func copyRow(b *Buffer, dst, src, n int) {
	if b.dt == dtype.F32 {
		copy(b.f32[dst:dst+n], b.f32[src:src+n])
		return
	}
	copy(b.u16[dst:dst+n], b.u16[src:src+n])
}

// Dropout computes dst = src * mask / (1-p) with a counter-based mask.
func (d *Device) Dropout(dst, src device.Buffer, p float32, key device.RandKey) {
	db, sb := d.buf(dst, "Dropout"), d.buf(src, "Dropout")
	d.checkLen("Dropout", db.n, sb)
	scale := float32(0)
	if p < 1 {
		scale = 1 / (1 - p)
	}
	if db.n <= grain {
		dropoutPiece(db, sb, p, scale, key, 0, db.n)
		return
	}
	d.parallel(db.n, func(lo, hi int) { dropoutPiece(db, sb, p, scale, key, lo, hi) })
}

// dropThreshold is the least 24-bit draw k that Dropout keeps: Uniform is
// k·2⁻²⁴ exactly, so Uniform >= p exactly when k >= ⌈p·2²⁴⌉ (p·2²⁴ is
// exact in float64).
func dropThreshold(p float32) uint64 {
	if !(p > 0) {
		return 0
	}
	return uint64(math.Ceil(float64(p) * (1 << 24)))
}

// dropoutPiece is Dropout on [lo, hi).
func dropoutPiece(db, sb *Buffer, p, scale float32, key device.RandKey, lo, hi int) {
	sv, w := read(sb, lo, hi), writeView(db, lo, hi)
	n := dropoutSIMD(w.v, sv.v, key.Seed, key.Offset+uint64(lo), dropThreshold(p), scale)
	for i := n; i < len(sv.v); i++ {
		x := sv.v[i]
		if device.Uniform(key, uint64(lo+i)) >= p {
			w.v[i] = x * scale
		} else {
			w.v[i] = 0
		}
	}
	sv.done()
	commit(db, lo, w)
}
