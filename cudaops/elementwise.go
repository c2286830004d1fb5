package cudaops

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

// The Go side of every kernel checks what the CPU backend checks, with the
// same panics, plus the bounds the CPU gets from Go's slice checks (a GPU
// reading past a buffer would not fault), then launches. Every kernel
// takes each operand's dtype code, so any mix of dtypes works.

// checkLen panics unless every buffer holds at least n elements.
func checkLen(op string, n int, bufs ...*Buffer) {
	for _, b := range bufs {
		if b.Len() < n {
			panic(fmt.Sprintf("cudaops: %s: buffer of %d elements, need %d", op, b.Len(), n))
		}
	}
}

func dt(b *Buffer) param { return pInt(int(b.DType())) }

func ptr(b *Buffer) param {
	if b == nil {
		return pPtr(0)
	}
	return pPtr(b.ptr)
}

// Fill sets every element of dst to v.
func (d *Device) Fill(dst device.Buffer, v float32) {
	d.enter()
	defer d.leave()
	b := d.buf(dst, "Fill")
	d.fill(b, 0, b.Len(), v)
}

// fill sets b[off:off+n] to v.
func (d *Device) fill(b *Buffer, off, n int, v float32) {
	if n == 0 {
		return
	}
	d.launch(d.ks.fill, gridFor(n), pPtr(b.addr(off)), dt(b), pInt(n), pF32(v))
}

// Copy copies n elements, converting dtypes; a same-dtype copy is a plain
// device-to-device memcpy.
func (d *Device) Copy(dst device.Buffer, dstOff int, src device.Buffer, srcOff, n int) {
	d.enter()
	defer d.leave()
	db, sb := d.buf(dst, "Copy"), d.buf(src, "Copy")
	if n < 0 || dstOff < 0 || srcOff < 0 || dstOff+n > db.Len() || srcOff+n > sb.Len() {
		panic(fmt.Sprintf("cudaops: Copy of %d elements from [%d:] of %d into [%d:] of %d", n, srcOff, sb.Len(), dstOff, db.Len()))
	}
	if n == 0 || (db == sb && dstOff == srcOff) {
		return
	}
	if db.DType() == sb.DType() {
		if err := d.g.dtod(db.addr(dstOff), sb.addr(srcOff), device.Bytes(db.DType(), n)); err != nil {
			panic("cudaops: Copy: " + err.Error())
		}
		return
	}
	d.copyBlocks(db, dstOff, 0, sb, srcOff, 0, n, 1)
}

// copyBlocks converts nb blocks of cnt elements, block i from
// src[soff+i*sstride:] to dst[doff+i*dstride:].
func (d *Device) copyBlocks(db *Buffer, doff, dstride int, sb *Buffer, soff, sstride, cnt, nb int) {
	if cnt*nb == 0 {
		return
	}
	d.launch(d.ks.copy, gridFor(cnt*nb),
		ptr(db), dt(db), pInt(doff), pInt(dstride),
		ptr(sb), dt(sb), pInt(soff), pInt(sstride),
		pInt(cnt), pInt(nb))
}

// Axpby computes dst = alpha*x + beta*y; y is not read (and may be nil)
// when beta is 0.
func (d *Device) Axpby(dst, x, y device.Buffer, alpha, beta float32) {
	d.enter()
	defer d.leave()
	db, xb := d.buf(dst, "Axpby"), d.buf(x, "Axpby")
	n := db.Len()
	var yb *Buffer
	if beta != 0 {
		yb = d.buf(y, "Axpby")
		checkLen("Axpby", n, xb, yb)
	} else {
		checkLen("Axpby", n, xb)
	}
	if n == 0 {
		return
	}
	ydt := pInt(0)
	if yb != nil {
		ydt = dt(yb)
	}
	d.launch(d.ks.axpby, gridFor(n), ptr(db), dt(db), ptr(xb), dt(xb), ptr(yb), ydt, pInt(n), pF32(alpha), pF32(beta))
}

// Binary computes dst = op(a, b) over s.Shape with broadcasting strides.
func (d *Device) Binary(op device.BinaryOp, dst, a, b device.Buffer, s device.Strides) {
	if op >= device.NumBinaryOps {
		panic(fmt.Sprintf("cudaops: unknown binary op %v", op))
	}
	d.enter()
	defer d.leave()
	what := "Binary " + op.String()
	db, ab, bb := d.buf(dst, what), d.buf(a, what), d.buf(b, what)
	it := newDims(what, s.Shape, s.A, s.B)
	checkLen(what, it.n, db)
	if it.n == 0 {
		return
	}
	it.checkReach(what, 0, ab)
	it.checkReach(what, 1, bb)
	d.launch(d.ks.binary, gridFor(it.n), pInt(int(op)), ptr(db), dt(db), ptr(ab), dt(ab), ptr(bb), dt(bb),
		pInt(it.n), it.param())
}

// Unary computes dst = op(src).
func (d *Device) Unary(op device.UnaryOp, dst, src device.Buffer, alpha float32) {
	d.enter()
	defer d.leave()
	_, db, sb := d.unary("Unary", op, dst, src)
	if db.Len() == 0 {
		return
	}
	d.launch(d.ks.unary, gridFor(db.Len()), pInt(int(op)), ptr(db), dt(db), ptr(sb), dt(sb), pInt(db.Len()), pF32(alpha))
}

// UnaryGrad computes dst = dy * op'(x) from in, op's input or output as
// its row of device's op table keeps (nil, and not read, when it keeps
// nothing).
func (d *Device) UnaryGrad(op device.UnaryOp, dst, dy, in device.Buffer, alpha float32) {
	d.enter()
	defer d.leave()
	what, db, gb := d.unary("UnaryGrad", op, dst, dy)
	var ib *Buffer
	idt := pInt(0)
	if op.Def().Keep != device.KeepNothing {
		ib = d.buf(in, what)
		checkLen(what, db.Len(), ib)
		idt = dt(ib)
	}
	if db.Len() == 0 {
		return
	}
	d.launch(d.ks.unaryGrad, gridFor(db.Len()), pInt(int(op)), ptr(db), dt(db), ptr(gb), dt(gb), ptr(ib), idt, pInt(db.Len()), pF32(alpha))
}

// unary checks a Unary or UnaryGrad call (call) of op, and its dst and
// the operand of dst's length (src or dy), and returns what to name the
// call in a panic ("Unary relu").
func (d *Device) unary(call string, op device.UnaryOp, dst, src device.Buffer) (what string, db, sb *Buffer) {
	if op >= device.NumUnaryOps {
		panic(fmt.Sprintf("cudaops: unknown unary op %v", op))
	}
	what = call + " " + op.String()
	db, sb = d.buf(dst, what), d.buf(src, what)
	checkLen(what, db.Len(), sb)
	return what, db, sb
}

// reduceBlockMin is the reduction length from which Reduce gives each
// output a block instead of a thread: below it, a thread's sequential sum
// is short and adjacent threads read adjacent memory; above it, a block's
// 256 threads share the work.
const reduceBlockMin = 512

// Reduce sums src into dst through s.A (stride 0: a reduced dimension) and
// scales by alpha. Every destination element is overwritten, with alpha*0
// when nothing reduces into it.
func (d *Device) Reduce(dst, src device.Buffer, s device.Strides, alpha float32) {
	d.enter()
	defer d.leave()
	db, sb := d.buf(dst, "Reduce"), d.buf(src, "Reduce")
	if len(s.A) != len(s.Shape) {
		panic(fmt.Sprintf("cudaops: Reduce: strides %v do not match shape %v", s.A, s.Shape))
	}
	total := 1
	for _, n := range s.Shape {
		if n < 0 {
			panic(fmt.Sprintf("cudaops: Reduce: shape %v", s.Shape))
		}
		total *= n
	}
	checkLen("Reduce", total, sb)
	// Split the dimensions: kept ones carry (source, destination) strides,
	// reduced ones the source stride only.
	src0 := device.ContiguousStrides(s.Shape)
	var kShape, kSrc, kDst, rShape, rSrc []int
	for i, n := range s.Shape {
		if s.A[i] < 0 {
			panic(fmt.Sprintf("cudaops: Reduce: negative stride in %v", s.A))
		}
		if s.A[i] == 0 {
			rShape, rSrc = append(rShape, n), append(rSrc, src0[i])
		} else {
			kShape, kSrc, kDst = append(kShape, n), append(kSrc, src0[i]), append(kDst, s.A[i])
		}
	}
	kept := newDims("Reduce", kShape, kSrc, kDst)
	red := newDims("Reduce", rShape, rSrc, make([]int, len(rShape)))
	if kept.n > 0 {
		kept.checkReach("Reduce", 1, db)
		if !kept.injective(1) {
			// The CPU sums such terms into one element; a kernel with one
			// writer per destination element cannot, and no op needs it.
			panic(fmt.Sprintf("cudaops: Reduce: destination strides %v map several kept indices of shape %v to one element", s.A, s.Shape))
		}
	}
	// Destination elements no kept index reaches get alpha*0, as on the CPU.
	if kept.n != db.Len() {
		d.fill(db, 0, db.Len(), alpha*0)
	}
	if kept.n == 0 {
		return
	}
	args := []param{ptr(db), dt(db), ptr(sb), dt(sb), pInt(kept.n), kept.param(), pInt(red.n), red.param(), pF32(alpha)}
	if red.n < reduceBlockMin {
		d.launch(d.ks.reduceThread, gridFor(kept.n), args...)
	} else {
		d.launch(d.ks.reduceBlock, min(kept.n, maxGrid), args...)
	}
}

// Expand writes dst = alpha * src broadcast through s.A.
func (d *Device) Expand(dst, src device.Buffer, s device.Strides, alpha float32) {
	d.enter()
	defer d.leave()
	db, sb := d.buf(dst, "Expand"), d.buf(src, "Expand")
	it := newDims("Expand", s.Shape, s.A, make([]int, len(s.Shape)))
	checkLen("Expand", it.n, db)
	if it.n == 0 {
		return
	}
	it.checkReach("Expand", 0, sb)
	d.launch(d.ks.expand, gridFor(it.n), ptr(db), dt(db), ptr(sb), dt(sb), pInt(it.n), it.param(), pF32(alpha))
}

// Dropout computes dst = src * mask / (1-p) with the mask of device.Uniform.
func (d *Device) Dropout(dst, src device.Buffer, p float32, key device.RandKey) {
	d.enter()
	defer d.leave()
	db, sb := d.buf(dst, "Dropout"), d.buf(src, "Dropout")
	checkLen("Dropout", db.Len(), sb)
	// The scale in float32 exactly as the CPU backend computes it.
	scale := float32(0)
	if p < 1 {
		scale = 1 / (1 - p)
	}
	if db.Len() == 0 {
		return
	}
	d.launch(d.ks.dropout, gridFor(db.Len()), ptr(db), dt(db), ptr(sb), dt(sb), pInt(db.Len()), pF32(p), pF32(scale),
		pU64(key.Seed), pU64(key.Offset))
}

// f32 checks that every non-nil operand is an F32 buffer of the first
// one's length, as the CPU backend does for the optimiser and norm
// statistics.
func (d *Device) f32(op string, bufs ...device.Buffer) []*Buffer {
	return device.OwnF32s[Buffer](d, "cudaops", op, bufs...)
}
