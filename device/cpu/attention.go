package cpu

import (
	"fmt"
	"math"
	"sync"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu/internal/gemm"
	"github.com/mixprec/mixprec/dtype"
)

// Fused causal attention, after flash attention: each (batch, head) pair
// is one piece of work, and within it the queries and keys go in blocks of
// attBlock rows, so that a block's scores, probabilities and the head's
// operands stay in the core's L1 and L2 caches. The scores are computed in
// float32 by the packed GEMM (reading q, k and v where they lie in the
// packed qkv rows: each head's matrix is T rows 3C apart), the softmax
// keeps a running maximum and sum per row across key blocks (online
// softmax), and the probabilities that multiply v are rounded to the
// operands' dtype first, as a GPU's flash attention does, so that 16-bit
// products stay 16-bit. Nothing of size T x T is kept between calls: the
// backward pass recomputes each block's probabilities from q, k and the
// rows' logsumexp.

// attBlock is the side of a block of queries or keys.
const attBlock = 64

// attScratch is one goroutine's working memory for a (batch, head) piece.
type attScratch struct {
	s, p   []float32 // a block's scores and probabilities, float32
	p16    []uint16  // the probabilities rounded to a 16-bit operand dtype
	ds16   []uint16  // the scores' gradient rounded likewise
	o      []float32 // the head's output (T, D), or dq in backward
	dk, dv []float32 // the head's key and value gradients (T, D)
	m, l   []float32 // running maximum and sum per query row
	di     []float32 // rowsum(dy * y) per query row
	corr   []float32 // a block's factors for the rows' outputs so far
	row    []float32 // the head's rows of dy widened (T, D)
	row2   []float32 // the head's rows of y widened
}

var attScratchPool = sync.Pool{New: func() any { return new(attScratch) }}

func grow32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func grow16(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
}

// attention is one Attention or AttentionGrad call's operands.
type attention struct {
	p      device.AttentionParams
	c      int // H*D
	qkv    *Buffer
	y, lse *Buffer
	dy     *Buffer // backward only
	dqkv   *Buffer
	dt     dtype.DType // the operands' dtype: the probabilities are rounded to it
	drop   float32     // 1/(1-p.Dropout)
}

func (d *Device) attentionOf(op string, y, lse, qkv device.Buffer, p device.AttentionParams) *attention {
	if !p.Valid() {
		panic(fmt.Sprintf("cpu: %s: invalid %v", op, p))
	}
	a := &attention{p: p, c: p.H * p.D, qkv: d.buf(qkv, op), y: d.buf(y, op), lse: d.buf(lse, op)}
	d.checkLen(op, p.QKV(), a.qkv)
	d.checkLen(op, p.Out(), a.y)
	d.checkLen(op, p.Rows(), a.lse)
	if a.lse.dt != dtype.F32 {
		panic(fmt.Sprintf("cpu: %s: lse is %v; want f32", op, a.lse.dt))
	}
	a.dt = a.qkv.dt
	a.drop = 1 / (1 - p.Dropout)
	return a
}

// Attention computes y and lse from qkv.
func (d *Device) Attention(y, lse, qkv device.Buffer, p device.AttentionParams) {
	a := d.attentionOf("Attention", y, lse, qkv, p)
	d.parallelGrain(p.B*p.H, 1, func(lo, hi int) {
		sc := attScratchPool.Get().(*attScratch)
		for bh := lo; bh < hi; bh++ {
			a.forward(sc, bh)
		}
		attScratchPool.Put(sc)
	})
}

// operand is head h of batch b's matrix in qkv (which = 0 for q, 1 for k,
// 2 for v), or in a (B, T, H, D) buffer with which < 0: T rows of D,
// stride 3C or C.
func (a *attention) operand(buf *Buffer, bh, which int) gemm.Operand {
	b, h := bh/a.p.H, bh%a.p.H
	if which < 0 {
		return operand(buf, b*a.p.T*a.c+h*a.p.D, a.c)
	}
	return operand(buf, b*a.p.T*3*a.c+which*a.c+h*a.p.D, 3*a.c)
}

// keysFor is how many keys query block [i0, i1) sees: all T, or up to i1
// when causal.
func (a *attention) keysFor(i1 int) int {
	if a.p.Causal {
		return i1
	}
	return a.p.T
}

// scores sets sc.s (rows i1-i0, cols j1-j0, row stride attBlock) to the
// scaled logits of queries [i0, i1) against keys [j0, j1). The causal mask
// is not written: the row operations below stop each row at its last
// visible key (diag).
func (a *attention) scores(sc *attScratch, bh, i0, i1, j0, j1 int) {
	q, k := a.operand(a.qkv, bh, 0), a.operand(a.qkv, bh, 1)
	q.Off += i0 * q.LD
	k.Off += j0 * k.LD
	gemm.Serial(false, true, i1-i0, j1-j0, a.p.D, a.p.Scale, q, k, 0, sc.s, attBlock)
}

// diag is the causal limit of block (i0, j0) for the row operations: row
// r sees keys j0 .. i0+r, that is r+diag+1 of the block's columns; -1
// when every column is visible.
func (a *attention) diag(i0, j0 int) int {
	if a.p.Causal && i0+attBlock-1 >= j0 {
		return i0 - j0
	}
	return -1
}

// dropMask applies dropout to a block's probabilities (scaled by 1/(1-p)
// where kept), reading the mask from the call's random stream.
func (a *attention) dropMask(p []float32, bh, i0, i1, j0, j1 int) {
	for i := i0; i < i1; i++ {
		row := p[(i-i0)*attBlock : (i-i0)*attBlock+j1-j0]
		for j := j0; j < j1; j++ {
			if device.Uniform(a.p.Key, a.p.DropIndex(bh, i, j)) < a.p.Dropout {
				row[j-j0] = 0
			} else {
				row[j-j0] *= a.drop
			}
		}
	}
}

// probOperand returns block probabilities p (row stride attBlock) as a
// GEMM operand in the operands' dtype: p itself for F32, else rounded into
// u16.
func (a *attention) probOperand(p []float32, u16 []uint16, rows, cols int) gemm.Operand {
	if a.dt == dtype.F32 {
		return gemm.Operand{F32: p, LD: attBlock}
	}
	dtype.EncodeRows(a.dt, u16, attBlock, p, attBlock, rows, cols)
	return gemm.Operand{U16: u16, BF16: a.dt == dtype.BF16, LD: attBlock}
}

func (sc *attScratch) size(t, dd int) {
	sc.s = grow32(sc.s, attBlock*attBlock)
	sc.p = grow32(sc.p, attBlock*attBlock)
	sc.p16 = grow16(sc.p16, attBlock*attBlock)
	sc.ds16 = grow16(sc.ds16, attBlock*attBlock)
	sc.o = grow32(sc.o, t*dd)
	sc.m = grow32(sc.m, t)
	sc.l = grow32(sc.l, t)
	sc.di = grow32(sc.di, t)
	sc.corr = grow32(sc.corr, attBlock)
	sc.row = grow32(sc.row, t*dd)
	sc.row2 = grow32(sc.row2, t*dd)
}

// forward computes head bh's output rows and their logsumexp.
func (a *attention) forward(sc *attScratch, bh int) {
	t, dd := a.p.T, a.p.D
	sc.size(t, dd)
	clear(sc.o)
	v := a.operand(a.qkv, bh, 2)
	for i0 := 0; i0 < t; i0 += attBlock {
		i1 := min(i0+attBlock, t)
		m, l := sc.m[i0:i1], sc.l[i0:i1]
		for i := range m {
			m[i], l[i] = float32(math.Inf(-1)), 0
		}
		for j0 := 0; j0 < a.keysFor(i1); j0 += attBlock {
			j1 := min(j0+attBlock, a.keysFor(i1))
			a.scores(sc, bh, i0, i1, j0, j1)
			// The first block has m = -Inf, so corr = exp(-Inf) = 0.
			softmaxStep(sc.p, sc.s, attBlock, i1-i0, j1-j0, a.diag(i0, j0), m, l, sc.corr[:i1-i0])
			for i := i0; i < i1; i++ {
				if c := sc.corr[i-i0]; c != 1 {
					o := sc.o[i*dd : (i+1)*dd]
					for x := range o {
						o[x] *= c
					}
				}
			}
			if a.p.Dropout > 0 {
				a.dropMask(sc.p, bh, i0, i1, j0, j1)
			}
			vb := v
			vb.Off += j0 * vb.LD
			gemm.Serial(false, false, i1-i0, dd, j1-j0, 1, a.probOperand(sc.p, sc.p16, i1-i0, j1-j0), vb, 1, sc.o[i0*dd:], dd)
		}
		for i := i0; i < i1; i++ {
			o := sc.o[i*dd : (i+1)*dd]
			inv := 1 / sc.l[i]
			for c := range o {
				o[c] *= inv
			}
			a.lse.f32[bh*t+i] = sc.m[i] + float32(math.Log(float64(sc.l[i])))
		}
	}
	b, h := bh/a.p.H, bh%a.p.H
	storeRows(a.y, b*t*a.c+h*dd, a.c, sc.o, t, dd)
}

// storeRows rounds rows of cols float32 (contiguous in v) into b from
// element at, rows ld apart: one call for the head's rows, which sit C or
// 3C apart in the packed buffers.
func storeRows(b *Buffer, at, ld int, v []float32, rows, cols int) {
	if b.dt == dtype.F32 {
		for r := range rows {
			copy(b.f32[at+r*ld:at+r*ld+cols], v[r*cols:(r+1)*cols])
		}
		return
	}
	dtype.EncodeRows(b.dt, b.u16[at:], ld, v, cols, rows, cols)
}

// AttentionGrad computes dqkv from dy, recomputing each block's
// probabilities from qkv and lse.
func (d *Device) AttentionGrad(dqkv, dy, qkv, y, lse device.Buffer, p device.AttentionParams) {
	a := d.attentionOf("AttentionGrad", y, lse, qkv, p)
	a.dy, a.dqkv = d.buf(dy, "AttentionGrad"), d.buf(dqkv, "AttentionGrad")
	d.checkLen("AttentionGrad", p.Out(), a.dy)
	d.checkLen("AttentionGrad", p.QKV(), a.dqkv)
	if a.dy.dt != a.dt {
		panic(fmt.Sprintf("cpu: AttentionGrad: dy is %v, qkv %v; want one dtype", a.dy.dt, a.dt))
	}
	d.parallelGrain(p.B*p.H, 1, func(lo, hi int) {
		sc := attScratchPool.Get().(*attScratch)
		for bh := lo; bh < hi; bh++ {
			a.backward(sc, bh)
		}
		attScratchPool.Put(sc)
	})
}

// backward computes head bh's share of dqkv. With P the probabilities,
// Pd = P·mask/(1-p) what multiplied v, and Di = rowsum(dy ∘ y):
// dv = Pdᵀ dy, dP = (dy vᵀ)·mask/(1-p), dS = P ∘ (dP - Di),
// dq = Scale · dS k, dk = Scale · dSᵀ q.
func (a *attention) backward(sc *attScratch, bh int) {
	t, dd := a.p.T, a.p.D
	sc.size(t, dd)
	sc.dk, sc.dv = grow32(sc.dk, t*dd), grow32(sc.dv, t*dd)
	clear(sc.o) // dq
	clear(sc.dk)
	clear(sc.dv)
	b, h := bh/a.p.H, bh%a.p.H
	// Di = rowsum(dy ∘ y), from the head's rows widened at once.
	g, o := a.headRows(a.dy, b, h, sc.row), a.headRows(a.y, b, h, sc.row2)
	for i := range t {
		var s float64
		gi, oi := g[i*dd:(i+1)*dd], o[i*dd:(i+1)*dd]
		for c, v := range gi {
			s += float64(v * oi[c])
		}
		sc.di[i] = float32(s)
	}
	q, k, v := a.operand(a.qkv, bh, 0), a.operand(a.qkv, bh, 1), a.operand(a.qkv, bh, 2)
	dy := a.operand(a.dy, bh, -1)
	lse := a.lse.f32[bh*t : (bh+1)*t]
	for i0 := 0; i0 < t; i0 += attBlock {
		i1 := min(i0+attBlock, t)
		for j0 := 0; j0 < a.keysFor(i1); j0 += attBlock {
			j1 := min(j0+attBlock, a.keysFor(i1))
			ni, nj := i1-i0, j1-j0
			a.scores(sc, bh, i0, i1, j0, j1)
			// P = exp(S - lse), kept in sc.s; Pd, what multiplied v, is P
			// itself without dropout, else P·mask/(1-p) in sc.p.
			probs(sc.s, sc.s, attBlock, ni, nj, a.diag(i0, j0), lse[i0:i1])
			pd := sc.s
			if a.p.Dropout > 0 {
				for i := range ni {
					copy(sc.p[i*attBlock:i*attBlock+nj], sc.s[i*attBlock:i*attBlock+nj])
				}
				a.dropMask(sc.p, bh, i0, i1, j0, j1)
				pd = sc.p
			}
			// dv[j0:j1] += Pdᵀ dy[i0:i1]
			dyb := dy
			dyb.Off += i0 * dyb.LD
			gemm.Serial(true, false, nj, dd, ni, 1, a.probOperand(pd, sc.p16, ni, nj), dyb, 1, sc.dv[j0*dd:], dd)
			// dPd = dy vᵀ, into sc.p
			vb := v
			vb.Off += j0 * vb.LD
			gemm.Serial(false, true, ni, nj, dd, 1, dyb, vb, 0, sc.p, attBlock)
			// dS = P ∘ (dPd·mask/(1-p) - Di), into sc.p
			if a.p.Dropout > 0 {
				a.dropMask(sc.p, bh, i0, i1, j0, j1)
			}
			scoresGrad(sc.p, sc.s, sc.p, attBlock, ni, nj, sc.di[i0:i1])
			ds := a.probOperand(sc.p, sc.ds16, ni, nj)
			// dq[i0:i1] += Scale · dS k[j0:j1]; dk[j0:j1] += Scale · dSᵀ q[i0:i1]
			kb, qb := k, q
			kb.Off += j0 * kb.LD
			qb.Off += i0 * qb.LD
			gemm.Serial(false, false, ni, dd, nj, a.p.Scale, ds, kb, 1, sc.o[i0*dd:], dd)
			gemm.Serial(true, false, nj, dd, ni, a.p.Scale, ds, qb, 1, sc.dk[j0*dd:], dd)
		}
	}
	at := b*t*3*a.c + h*dd
	storeRows(a.dqkv, at, 3*a.c, sc.o, t, dd)
	storeRows(a.dqkv, at+a.c, 3*a.c, sc.dk, t, dd)
	storeRows(a.dqkv, at+2*a.c, 3*a.c, sc.dv, t, dd)
}

// softmaxStep is one online-softmax step over a block of scores s (rows x
// cols, row stride ld): for each row r, with valid = cols or, when diag
// >= 0, min(cols, r+diag+1) (the causal mask), mnew = max(m[r], the row's
// largest valid score), corr[r] = exp(m[r] - mnew), p[r, j] = exp(s[r, j]
// - mnew) for valid j and 0 for the rest, l[r] = l[r]·corr[r] + the row's
// sum, and m[r] = mnew.
func softmaxStep(p, s []float32, ld, rows, cols, diag int, m, l, corr []float32) {
	if simdTranscend == simdAVX512 {
		_, _, _ = m[rows-1], l[rows-1], corr[rows-1]
		_, _ = p[(rows-1)*ld+cols-1], s[(rows-1)*ld+cols-1]
		attnSoftmaxAVX512(&p[0], &s[0], ld, rows, cols, diag, &m[0], &l[0], &corr[0])
		return
	}
	for r := range rows {
		valid := validCols(r, cols, diag)
		row, pr := s[r*ld:r*ld+valid], p[r*ld:r*ld+cols]
		mnew := max(m[r], rowMax(row))
		corr[r] = exp32(m[r] - mnew)
		sum := expShift(pr[:valid], row, mnew)
		clear(pr[valid:])
		l[r] = float32(float64(l[r]*corr[r]) + sum)
		m[r] = mnew
	}
}

// validCols is how many of a row's cols columns the causal mask leaves
// (all of them when diag < 0).
func validCols(r, cols, diag int) int {
	if diag < 0 {
		return cols
	}
	return min(cols, r+diag+1)
}

// probs sets p[r, j] = exp(s[r, j] - lse[r]) for the valid j of each row
// (as softmaxStep defines them) and 0 for the rest; p may be s.
func probs(p, s []float32, ld, rows, cols, diag int, lse []float32) {
	if simdTranscend == simdAVX512 {
		_ = lse[rows-1]
		_, _ = p[(rows-1)*ld+cols-1], s[(rows-1)*ld+cols-1]
		attnProbsAVX512(&p[0], &s[0], ld, rows, cols, diag, &lse[0])
		return
	}
	for r := range rows {
		valid := validCols(r, cols, diag)
		row, pr := s[r*ld:r*ld+cols], p[r*ld:r*ld+cols]
		for j := range valid {
			pr[j] = exp32(row[j] - lse[r])
		}
		clear(pr[valid:])
	}
}

// scoresGrad sets ds[r, j] = p[r, j]·(dp[r, j] - di[r]) (ds may be dp).
func scoresGrad(ds, p, dp []float32, ld, rows, cols int, di []float32) {
	if simdTranscend == simdAVX512 {
		_ = di[rows-1]
		_, _, _ = ds[(rows-1)*ld+cols-1], p[(rows-1)*ld+cols-1], dp[(rows-1)*ld+cols-1]
		attnDSAVX512(&ds[0], &p[0], &dp[0], ld, rows, cols, &di[0])
		return
	}
	for r := range rows {
		pr, g, out := p[r*ld:r*ld+cols], dp[r*ld:r*ld+cols], ds[r*ld:r*ld+cols]
		for j := range out {
			out[j] = pr[j] * (g[j] - di[r])
		}
	}
}

// headRows returns head h of batch b's T rows of D from a (B, T, H, D)
// buffer as float32 rows D apart: widened into scratch (T·D), or copied.
func (a *attention) headRows(buf *Buffer, b, h int, scratch []float32) []float32 {
	t, dd, at := a.p.T, a.p.D, b*a.p.T*a.c+h*a.p.D
	if buf.dt == dtype.F32 {
		for i := range t {
			copy(scratch[i*dd:(i+1)*dd], buf.f32[at+i*a.c:at+i*a.c+dd])
		}
		return scratch[:t*dd]
	}
	dtype.DecodeRows(buf.dt, scratch, dd, buf.u16[at:], a.c, t, dd)
	return scratch[:t*dd]
}
