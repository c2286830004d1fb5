package cpu

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// This file holds device.TransformerKernels but attention (attention.go):
// the embedding lookup and its adjoint, softmax over rows and layer
// normalisation. Rows are shared out among the cores in pieces that depend
// on the shape alone, so results never depend on the number of workers.

// embedID reads ids[i] and checks that it names a row of a table of vocab.
func embedID(ids *Buffer, i, vocab int, op string) int {
	v := get(ids, i)
	id := int(v)
	if float32(id) != v || id < 0 || id >= vocab {
		panic(fmt.Sprintf("cpu: %s: id %v at %d is not a row of a table of %d", op, v, i, vocab))
	}
	return id
}

// Embedding gathers table rows: dst[i, :] = table[ids[i], :].
func (d *Device) Embedding(dst, table, ids device.Buffer, n, dim int) {
	db, tb, ib := d.buf(dst, "Embedding"), d.buf(table, "Embedding"), d.buf(ids, "Embedding")
	d.checkLen("Embedding", n*dim, db)
	d.checkLen("Embedding", n, ib)
	if dim <= 0 {
		return
	}
	vocab := tb.n / dim
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			id := embedID(ib, i, vocab, "Embedding")
			copyConvert(db, i*dim, tb, id*dim, dim)
		}
	}
	if n*dim <= minParallel {
		rows(0, n)
		return
	}
	d.parallelGrain(n, max(1, grain/dim), rows)
}

// copyConvert copies n elements of src[so:] into dst[do:], converting
// between dtypes.
func copyConvert(db *Buffer, do int, sb *Buffer, so, n int) {
	switch {
	case db.dt == sb.dt && db.dt == dtype.F32:
		copy(db.f32[do:do+n], sb.f32[so:so+n])
	case db.dt == sb.dt:
		copy(db.u16[do:do+n], sb.u16[so:so+n])
	default:
		convertPiece(db, do, sb, so, 0, n)
	}
}

// EmbeddingGrad overwrites dtable with the scatter-add of dy's rows. Each
// worker owns a range of the columns and adds every row into it in order
// of i, so repeated ids accumulate in the same order on every run.
func (d *Device) EmbeddingGrad(dtable, dy, ids device.Buffer, n, dim int) {
	tb, gb, ib := d.buf(dtable, "EmbeddingGrad"), d.buf(dy, "EmbeddingGrad"), d.buf(ids, "EmbeddingGrad")
	d.checkLen("EmbeddingGrad", n*dim, gb)
	d.checkLen("EmbeddingGrad", n, ib)
	if dim <= 0 {
		return
	}
	vocab := tb.n / dim
	for i := range n { // check every id before writing anything
		embedID(ib, i, vocab, "EmbeddingGrad")
	}
	cols := func(lo, hi int) {
		acc := getScratch(vocab * (hi - lo))
		a := *acc
		clear(a)
		w := hi - lo
		row := getScratch(w)
		for i := range n {
			id := int(get(ib, i))
			src := a[id*w : id*w+w]
			g := gb.f32Row(i*dim+lo, w, *row)
			for j, v := range g {
				src[j] += v
			}
		}
		for r := range vocab {
			storeRow(tb, r*dim+lo, a[r*w:r*w+w])
		}
		putScratch(row)
		putScratch(acc)
	}
	const colGrain = 32
	if n*dim <= minParallel || dim <= colGrain {
		cols(0, dim)
		return
	}
	d.parallelGrain(dim, colGrain, cols)
}

// f32Row returns b[at:at+n] as float32: the buffer's own memory for F32,
// else widened into scratch (len >= n).
func (b *Buffer) f32Row(at, n int, scratch []float32) []float32 {
	if b.dt == dtype.F32 {
		return b.f32[at : at+n]
	}
	dtype.Decode(b.dt, scratch[:n], b.u16[at:at+n])
	return scratch[:n]
}

// storeRow rounds v into b[at:at+len(v)].
func storeRow(b *Buffer, at int, v []float32) {
	if b.dt == dtype.F32 {
		copy(b.f32[at:at+len(v)], v)
		return
	}
	dtype.Encode(b.dt, b.u16[at:at+len(v)], v)
}

// Softmax computes dst = softmax(src) along each row.
func (d *Device) Softmax(dst, src device.Buffer, rows, cols int) {
	db, sb := d.buf(dst, "Softmax"), d.buf(src, "Softmax")
	d.checkLen("Softmax", rows*cols, db, sb)
	d.forEachRow(rows, cols, expWork/4, func(r int) {
		x, w := read(sb, r*cols, (r+1)*cols), writeView(db, r*cols, (r+1)*cols)
		softmaxInto(w.v, x.v)
		x.done()
		commit(db, r*cols, w)
	})
}

// softmaxInto sets w = softmax(x) (w may be x). A row whose maximum is
// +Inf or NaN comes out NaN, as PyTorch's does; a row of -Inf too.
func softmaxInto(w, x []float32) {
	m := rowMax(x)
	if math.IsInf(float64(m), 0) || m != m {
		for j := range w[:len(x)] {
			w[j] = float32(math.NaN())
		}
		return
	}
	s := expShift(w, x, m)
	inv := float32(1 / s)
	for j := range w[:len(x)] {
		w[j] *= inv
	}
}

// SoftmaxGrad computes dst = y * (dy - sum(dy*y)) along each row.
func (d *Device) SoftmaxGrad(dst, dy, y device.Buffer, rows, cols int) {
	db, gb, yb := d.buf(dst, "SoftmaxGrad"), d.buf(dy, "SoftmaxGrad"), d.buf(y, "SoftmaxGrad")
	d.checkLen("SoftmaxGrad", rows*cols, db, gb, yb)
	d.forEachRow(rows, cols, 2, func(r int) {
		g, yv := read(gb, r*cols, (r+1)*cols), read(yb, r*cols, (r+1)*cols)
		w := writeView(db, r*cols, (r+1)*cols)
		var s float64
		for j, v := range g.v {
			s += float64(v * yv.v[j])
		}
		sf := float32(s)
		for j := range w.v {
			w.v[j] = yv.v[j] * (g.v[j] - sf)
		}
		g.done()
		yv.done()
		commit(db, r*cols, w)
	})
}

// lnRows is how many rows a piece of LayerNorm or LayerNormGrad takes, so
// that a piece holds about grain elements whatever the width.
func lnRows(cols int) int { return max(1, grain/max(cols, 1)) }

// LayerNorm computes xhat = (x - mean) * rstd and y = xhat * w + b per
// row, with the mean and the biased variance summed in float64, and writes
// rstd and (unless xhat is nil) x̂, rounded to xhat's dtype.
func (d *Device) LayerNorm(y, xhat, rstd, x, w, b device.Buffer, rows, cols int, eps float32) {
	yb, rb, xb, wb := d.buf(y, "LayerNorm"), d.buf(rstd, "LayerNorm"), d.buf(x, "LayerNorm"), d.buf(w, "LayerNorm")
	var bb, hb *Buffer
	if b != nil {
		bb = d.buf(b, "LayerNorm")
		d.checkLen("LayerNorm", cols, bb)
	}
	if xhat != nil {
		hb = d.buf(xhat, "LayerNorm")
		d.checkLen("LayerNorm", rows*cols, hb)
	}
	d.checkLen("LayerNorm", rows*cols, yb, xb)
	d.checkLen("LayerNorm", rows, rb)
	d.checkLen("LayerNorm", cols, wb)
	if rb.dt != dtype.F32 {
		panic(fmt.Sprintf("cpu: LayerNorm: rstd is %v; want f32", rb.dt))
	}
	if rows == 0 || cols == 0 {
		return
	}
	d.parallelGrain(rows, lnRows(cols), func(lo, hi int) {
		wv := read(wb, 0, cols)
		var bv view
		if bb != nil {
			bv = read(bb, 0, cols)
		}
		// The piece's rows widened (16-bit storage) in one view each.
		xv, out := read(xb, lo*cols, hi*cols), writeView(yb, lo*cols, hi*cols)
		var hv view
		if hb != nil {
			hv = writeView(hb, lo*cols, hi*cols)
		}
		for r := lo; r < hi; r++ {
			o := (r - lo) * cols
			x := xv.v[o : o+cols]
			var h []float32
			if hb != nil {
				h = hv.v[o : o+cols]
			}
			mu := sum64(x) / float64(cols)
			v := sumSqDev64(x, mu) / float64(cols)
			is := float32(1 / math.Sqrt(v+float64(eps)))
			rb.f32[r] = is
			layerNormRow(out.v[o:o+cols], h, x, wv.v, bv.v, float32(mu), is)
		}
		xv.done()
		commit(yb, lo*cols, out)
		if hb != nil {
			commit(hb, lo*cols, hv)
		}
		wv.done()
		bv.done()
	})
}

// layerNormRow sets h = (x - m) * is (h nil: not kept) and y = h * w + b
// (b nil: no bias).
func layerNormRow(y, h, x, w, b []float32, m, is float32) {
	y, w = y[:len(x)], w[:len(x)]
	if h != nil {
		h = h[:len(x)]
	}
	if len(x) > 0 && simdTranscend == simdAVX512 {
		var hp, bp *float32
		if h != nil {
			hp = &h[0]
		}
		if b != nil {
			bp = &b[:len(x)][0]
		}
		lnRowAVX512(&y[0], hp, &x[0], &w[0], bp, len(x), m, is)
		return
	}
	if b != nil {
		b = b[:len(x)]
	}
	for j, v := range x {
		hj := float32(float32(v-m) * is)
		if h != nil {
			h[j] = hj
		}
		if b == nil {
			y[j] = hj * w[j]
		} else {
			y[j] = float32(hj*w[j]) + b[j]
		}
	}
}

// LayerNormGrad computes dx, and dw and db summed over rows, from x̂ and
// rstd: with g = dy * w, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
// Each piece of rows sums its share of dw and db in float32 (a piece is at
// most lnRows rows), and the pieces are added in order in float64, so the
// sums do not depend on how many workers there are.
func (d *Device) LayerNormGrad(dx, dw, db, dy, xhat, rstd, w device.Buffer, rows, cols int) {
	hb, gb, rb, wb := d.buf(xhat, "LayerNormGrad"), d.buf(dy, "LayerNormGrad"), d.buf(rstd, "LayerNormGrad"), d.buf(w, "LayerNormGrad")
	dxb, dwb := d.buf(dx, "LayerNormGrad"), d.buf(dw, "LayerNormGrad")
	var dbb *Buffer
	if db != nil {
		dbb = d.buf(db, "LayerNormGrad")
		d.checkLen("LayerNormGrad", cols, dbb)
	}
	d.checkLen("LayerNormGrad", rows*cols, dxb, gb, hb)
	d.checkLen("LayerNormGrad", rows, rb)
	d.checkLen("LayerNormGrad", cols, wb, dwb)
	if rb.dt != dtype.F32 || dwb.dt != dtype.F32 || (dbb != nil && dbb.dt != dtype.F32) {
		panic("cpu: LayerNormGrad: rstd, dw and db must be f32")
	}
	per := lnRows(cols)
	pieces := (rows + per - 1) / per
	// Partial sums of dw and db, one pair of rows of cols per piece.
	pp := getScratch(2 * pieces * cols)
	part := *pp
	clear(part)
	if rows > 0 && cols > 0 {
		d.parallelGrain(rows, per, func(lo, hi int) {
			p := lo / per
			pw, pb := part[2*p*cols:(2*p+1)*cols], part[(2*p+1)*cols:(2*p+2)*cols]
			if dbb == nil {
				pb = nil
			}
			wv := read(wb, 0, cols)
			hv, gv := read(hb, lo*cols, hi*cols), read(gb, lo*cols, hi*cols)
			out := writeView(dxb, lo*cols, hi*cols)
			for r := lo; r < hi; r++ {
				o := (r - lo) * cols
				layerNormGradRow(out.v[o:o+cols], pw, pb, gv.v[o:o+cols], hv.v[o:o+cols], wv.v, rb.f32[r])
			}
			hv.done()
			gv.done()
			commit(dxb, lo*cols, out)
			wv.done()
		})
	}
	for j := range cols {
		var sw, sb float64
		for p := range pieces {
			sw += float64(part[2*p*cols+j])
			sb += float64(part[(2*p+1)*cols+j])
		}
		dwb.f32[j] = float32(sw)
		if dbb != nil {
			dbb.f32[j] = float32(sb)
		}
	}
	putScratch(pp)
}

// layerNormGradRow computes one row's dx from its x̂ h and adds its dw and
// db terms into pw and pb (pb nil: no bias). The row's sums of g = dy*w and
// g*h keep sixteen partial sums, element j in lane j%16, added as lanes16f
// does, as the AVX-512 loop does.
func layerNormGradRow(dx, pw, pb, dy, h, w []float32, is float32) {
	n := len(h)
	dx, dy, w, pw = dx[:n], dy[:n], w[:n], pw[:n]
	if n > 0 && simdTranscend == simdAVX512 {
		var pbp *float32
		if pb != nil {
			pbp = &pb[:n][0]
		}
		lnGradRowAVX512(&dx[0], &dy[0], &h[0], &w[0], n, is, &pw[0], pbp)
		return
	}
	var sg, sgh [16]float32
	for j, hj := range h {
		g := dy[j] * w[j]
		sg[j%16] += g
		sgh[j%16] += g * hj
		pw[j] += dy[j] * hj
		if pb != nil {
			pb[j] += dy[j]
		}
	}
	mg, mgh := lanes16f(&sg)/float32(n), lanes16f(&sgh)/float32(n)
	for j, hj := range h {
		g := dy[j] * w[j]
		dx[j] = is * ((g - mg) - hj*mgh)
	}
}

// lanes16f adds sixteen float32 partial sums in the order of the assembly's
// HSUM16: lane l and l+8, then halves of what is left.
func lanes16f(a *[16]float32) float32 {
	var s [8]float32
	for l := range 8 {
		s[l] = a[l] + a[l+8]
	}
	for l := range 4 {
		s[l] += s[l+4]
	}
	s[0], s[1] = s[0]+s[2], s[1]+s[3]
	return s[0] + s[1]
}
