package cudaops

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// The transformer kernels (kernels/transformer.cu): the embedding lookup
// and its adjoint, softmax, layer norm and fused attention, with the CPU
// backend's argument checks.

var _ device.TransformerKernels = (*Device)(nil)

// transformerSet is the kernels of transformer.cu, part of kernelSet.
type transformerSet struct {
	embedding, embeddingGrad, softmax, softmaxGrad *kernel
	layerNorm, layerNormGrad, layerNormGradWB      *kernel
	attention, attentionGradQ, attentionGradKV     *kernel
}

// find looks the kernels up in the module's entries and appends them to all.
func (s *transformerSet) find(entries map[string][]int, all *[]*kernel) error {
	for _, k := range []struct {
		p    **kernel
		name string
	}{
		{&s.embedding, "mp_embedding"}, {&s.embeddingGrad, "mp_embedding_grad"},
		{&s.softmax, "mp_softmax"}, {&s.softmaxGrad, "mp_softmax_grad"},
		{&s.layerNorm, "mp_layernorm"}, {&s.layerNormGrad, "mp_layernorm_grad"},
		{&s.layerNormGradWB, "mp_layernorm_grad_wb"}, {&s.attention, "mp_attention"},
		{&s.attentionGradQ, "mp_attention_grad_q"}, {&s.attentionGradKV, "mp_attention_grad_kv"},
	} {
		params, ok := entries[k.name]
		if !ok {
			return fmt.Errorf("cudaops: the embedded PTX has no kernel %s (run make kernels)", k.name)
		}
		*k.p = &kernel{name: k.name, params: params}
		*all = append(*all, *k.p)
	}
	return nil
}

// Tile sizes of transformer.cu, for the grids: the rows of a block of
// mp_embedding_grad, the query rows (forward, dq) or keys (dk, dv) of a
// block of the attention kernels, and the columns of a block of
// mp_layernorm_grad_wb.
const (
	embedGradRows = 32
	attFwdTile    = 16
	attGradQTile  = 8
	attGradKVTile = 32
	lnGradCols    = 8 // LN_COLS
)

// AttentionMaxD is the largest head size the attention kernels take: a
// lane holds D/32 elements of a row in registers and a block stages tiles
// of 32 keys and values of D floats in its 48 KB of static shared memory.
const AttentionMaxD = 128

// tileGrid is the blocks of a launch taking one tile of n per block.
func tileGrid(n int) int { return max(1, min(n, maxGrid)) }

// Embedding gathers table rows: dst[i, :] = table[ids[i], :]. It waits for
// the kernel, to panic on an id that is not a row of the table as the CPU
// backend does.
func (d *Device) Embedding(dst, table, ids device.Buffer, n, dim int) {
	d.enter()
	defer d.leave()
	db, tb, ib := d.embedding("Embedding", dst, table, ids, n, dim)
	if n == 0 || dim == 0 {
		return
	}
	vocab := tb.Len() / dim
	d.setFlag("Embedding", noBadRow)
	d.launch(d.ks.embedding, gridFor(n*dim), ptr(db), dt(db), ptr(tb), dt(tb), ptr(ib), dt(ib),
		pInt(n), pInt(dim), pInt(vocab), pPtr(d.flag))
	d.checkIDs("Embedding", ib, vocab)
}

// EmbeddingGrad overwrites dtable with the scatter-add of dy's rows, in
// order of i for every row (see mp_embedding_grad: one thread per column
// of a block's rows, no atomics), so the sums are the same on every run.
// It waits for the kernel to check the ids: where one is bad it panics as
// the CPU does, but after the kernel has written the other ids' sums (the
// CPU checks them all before it writes).
func (d *Device) EmbeddingGrad(dtable, dy, ids device.Buffer, n, dim int) {
	d.enter()
	defer d.leave()
	gb, tb, ib := d.embedding("EmbeddingGrad", dy, dtable, ids, n, dim)
	if dim == 0 {
		return
	}
	vocab := tb.Len() / dim
	if vocab == 0 {
		if n > 0 {
			d.badID("EmbeddingGrad", ib, 0, vocab) // no id names a row of an empty table
		}
		return
	}
	blocks := (dim + blockSize - 1) / blockSize * ((vocab + embedGradRows - 1) / embedGradRows)
	d.setFlag("EmbeddingGrad", noBadRow)
	d.launch(d.ks.embeddingGrad, tileGrid(blocks), ptr(tb), dt(tb), ptr(gb), dt(gb), ptr(ib), dt(ib),
		pInt(n), pInt(dim), pInt(vocab), pPtr(d.flag))
	d.checkIDs("EmbeddingGrad", ib, vocab)
}

// embedding checks an Embedding or EmbeddingGrad call's operands as the
// CPU backend does: n ids, and rows (Embedding's dst or EmbeddingGrad's
// dy) of n x dim; the table is whatever rows of dim its length holds.
func (d *Device) embedding(op string, rows, table, ids device.Buffer, n, dim int) (rb, tb, ib *Buffer) {
	rb, tb, ib = d.buf(rows, op), d.buf(table, op), d.buf(ids, op)
	checkRows(op, n, dim)
	checkLen(op, n*dim, rb)
	checkLen(op, n, ib)
	return rb, tb, ib
}

// checkIDs reads the flag of the embedding kernels and panics, naming the
// id, when they found one that is not a row of the table.
func (d *Device) checkIDs(op string, ids *Buffer, vocab int) {
	if i := d.readFlag(op); i != noBadRow {
		d.badID(op, ids, int(i), vocab)
	}
}

// badID panics with the CPU backend's message for ids[i].
func (d *Device) badID(op string, ids *Buffer, i, vocab int) {
	v := d.element(ids, i)
	panic(fmt.Sprintf("cudaops: %s: id %v at %d is not a row of a table of %d", op, v, i, vocab))
}

// Softmax computes dst = softmax(src) along each row.
func (d *Device) Softmax(dst, src device.Buffer, rows, cols int) {
	d.rowKernel("Softmax", d.ks.softmax, rows, cols, dst, src)
}

// SoftmaxGrad computes dst = y * (dy - sum(dy*y)) along each row.
func (d *Device) SoftmaxGrad(dst, dy, y device.Buffer, rows, cols int) {
	d.rowKernel("SoftmaxGrad", d.ks.softmaxGrad, rows, cols, dst, dy, y)
}

// opt is an optional operand: nil stays nil.
func (d *Device) opt(b device.Buffer, op string) *Buffer {
	if b == nil {
		return nil
	}
	return d.buf(b, op)
}

// dtOpt is dt of an optional operand (F32's code for nil, never read).
func dtOpt(b *Buffer) param {
	if b == nil {
		return pInt(int(dtype.F32))
	}
	return dt(b)
}

// LayerNorm computes xhat = (x - mean) * rstd and y = xhat * w + b per row
// and writes the rows' rstd (F32) and, unless xhat is nil, x̂ rounded to
// xhat's dtype. b may be nil.
func (d *Device) LayerNorm(y, xhat, rstd, x, w, b device.Buffer, rows, cols int, eps float32) {
	d.enter()
	defer d.leave()
	yb, hb, rb := d.buf(y, "LayerNorm"), d.opt(xhat, "LayerNorm"), d.buf(rstd, "LayerNorm")
	xb, wb, bb := d.buf(x, "LayerNorm"), d.buf(w, "LayerNorm"), d.opt(b, "LayerNorm")
	checkRows("LayerNorm", rows, cols)
	if bb != nil {
		checkLen("LayerNorm", cols, bb)
	}
	if hb != nil {
		checkLen("LayerNorm", rows*cols, hb)
	}
	checkLen("LayerNorm", rows*cols, yb, xb)
	checkLen("LayerNorm", rows, rb)
	checkLen("LayerNorm", cols, wb)
	if rb.DType() != dtype.F32 {
		panic(fmt.Sprintf("cudaops: LayerNorm: rstd is %v; want f32", rb.DType()))
	}
	if rows == 0 || cols == 0 {
		return
	}
	d.launch(d.ks.layerNorm, rowGrid(rows), ptr(yb), dt(yb), ptr(hb), dtOpt(hb), ptr(rb), ptr(xb), dt(xb),
		ptr(wb), dt(wb), ptr(bb), dtOpt(bb), pInt(rows), pInt(cols), pF32(eps))
}

// LayerNormGrad computes dx, and dw and db (F32, db nil without a bias)
// summed over the rows, from x̂ and rstd: one warp per row for dx, then one
// block per strip of 8 columns for dw and db, summing the rows in a fixed
// order.
func (d *Device) LayerNormGrad(dx, dw, db, dy, xhat, rstd, w device.Buffer, rows, cols int) {
	d.enter()
	defer d.leave()
	hb, gb, rb, wb := d.buf(xhat, "LayerNormGrad"), d.buf(dy, "LayerNormGrad"), d.buf(rstd, "LayerNormGrad"), d.buf(w, "LayerNormGrad")
	dxb, dwb, dbb := d.buf(dx, "LayerNormGrad"), d.buf(dw, "LayerNormGrad"), d.opt(db, "LayerNormGrad")
	checkRows("LayerNormGrad", rows, cols)
	if dbb != nil {
		checkLen("LayerNormGrad", cols, dbb)
	}
	checkLen("LayerNormGrad", rows*cols, dxb, gb, hb)
	checkLen("LayerNormGrad", rows, rb)
	checkLen("LayerNormGrad", cols, wb, dwb)
	if rb.DType() != dtype.F32 || dwb.DType() != dtype.F32 || (dbb != nil && dbb.DType() != dtype.F32) {
		panic("cudaops: LayerNormGrad: rstd, dw and db must be f32")
	}
	if cols == 0 {
		return
	}
	if rows > 0 {
		d.launch(d.ks.layerNormGrad, rowGrid(rows), ptr(dxb), dt(dxb), ptr(gb), dt(gb), ptr(hb), dt(hb),
			ptr(rb), ptr(wb), dt(wb), pInt(rows), pInt(cols))
	}
	d.launch(d.ks.layerNormGradWB, tileGrid((cols+lnGradCols-1)/lnGradCols), ptr(dwb), ptr(dbb), ptr(gb), dt(gb), ptr(hb), dt(hb),
		pInt(rows), pInt(cols))
}

// attention checks an Attention or AttentionGrad call's parameters and
// operands as the CPU backend does, and the head size against the kernels'
// limit.
func (d *Device) attention(op string, y, lse, qkv device.Buffer, p device.AttentionParams) (yb, lb, qb *Buffer) {
	if !p.Valid() {
		panic(fmt.Sprintf("cudaops: %s: invalid %v", op, p))
	}
	if p.D > AttentionMaxD {
		panic(fmt.Sprintf("cudaops: %s: head size D=%d is more than the CUDA kernels' %d (%v)", op, p.D, AttentionMaxD, p))
	}
	yb, lb, qb = d.buf(y, op), d.buf(lse, op), d.buf(qkv, op)
	// The products of the sizes are within a buffer's length once the
	// lengths check, but must not overflow before they are compared.
	if p.B > maxElems/p.T || p.B*p.T > maxElems/(3*p.H) || p.B*p.T*3*p.H > maxElems/p.D {
		panic(fmt.Sprintf("cudaops: %s: %v is beyond any buffer", op, p))
	}
	checkLen(op, p.QKV(), qb)
	checkLen(op, p.Out(), yb)
	checkLen(op, p.Rows(), lb)
	if lb.DType() != dtype.F32 {
		panic(fmt.Sprintf("cudaops: %s: lse is %v; want f32", op, lb.DType()))
	}
	return yb, lb, qb
}

// attParams are the attention kernels' trailing arguments: the sizes, the
// scale, the mask and dropout with its factor 1/(1-p) computed in float32
// as the CPU does, and the dropout stream's key.
func attParams(p device.AttentionParams) []param {
	return []param{pInt(p.B), pInt(p.T), pInt(p.H), pInt(p.D), pF32(p.Scale), pBool(p.Causal),
		pF32(p.Dropout), pF32(1 / (1 - p.Dropout)), pU64(p.Key.Seed), pU64(p.Key.Offset)}
}

// Attention computes y and the rows' logsumexp lse from qkv (see
// mp_attention). Head sizes up to AttentionMaxD.
func (d *Device) Attention(y, lse, qkv device.Buffer, p device.AttentionParams) {
	d.enter()
	defer d.leave()
	yb, lb, qb := d.attention("Attention", y, lse, qkv, p)
	tiles := p.B * p.H * ((p.T + attFwdTile - 1) / attFwdTile)
	d.launch(d.ks.attention, tileGrid(tiles), append([]param{ptr(yb), dt(yb), ptr(lb), ptr(qb), dt(qb)}, attParams(p)...)...)
}

// AttentionGrad computes dqkv from dy, recomputing the probabilities from
// qkv and lse: one kernel for dq (a block per tile of queries) and one for
// dk and dv (a block per tile of keys), so every gradient is summed in a
// fixed order by one block, without atomics.
func (d *Device) AttentionGrad(dqkv, dy, qkv, y, lse device.Buffer, p device.AttentionParams) {
	d.enter()
	defer d.leave()
	yb, lb, qb := d.attention("AttentionGrad", y, lse, qkv, p)
	gb, db := d.buf(dy, "AttentionGrad"), d.buf(dqkv, "AttentionGrad")
	checkLen("AttentionGrad", p.Out(), gb)
	checkLen("AttentionGrad", p.QKV(), db)
	if gb.DType() != qb.DType() {
		panic(fmt.Sprintf("cudaops: AttentionGrad: dy is %v, qkv %v; want one dtype", gb.DType(), qb.DType()))
	}
	args := append([]param{ptr(db), dt(db), ptr(gb), dt(gb), ptr(qb), dt(qb), ptr(yb), dt(yb), ptr(lb)}, attParams(p)...)
	d.launch(d.ks.attentionGradQ, tileGrid(p.B*p.H*((p.T+attGradQTile-1)/attGradQTile)), args...)
	d.launch(d.ks.attentionGradKV, tileGrid(p.B*p.H*((p.T+attGradKVTile-1)/attGradKVTile)), args...)
}
