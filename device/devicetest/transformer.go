package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// The checks of device.TransformerKernels, against float64 references
// written from the definitions (the embedding as a gather, layer norm from
// its mean and variance, attention as a full softmax over each row).

type embedCase struct {
	name            string
	n, dim, vocab   int
	repeat, reverse bool
}

var embedCases = []embedCase{
	{"5x3", 5, 3, 4, true, false},
	{"1x1", 1, 1, 1, false, false},
	{"repeated", 40, 7, 3, true, true},
	{"parallel/700x130", 700, 130, 90, true, false},
}

// ids draws c.n ids in [0, c.vocab): with repetitions when c.repeat.
func (e *env) ids(c embedCase) []float32 {
	ids := make([]float32, c.n)
	for i := range ids {
		ids[i] = float32(e.rng.IntN(c.vocab))
		if !c.repeat {
			ids[i] = float32(i % c.vocab)
		}
		if c.reverse {
			ids[i] = float32(c.vocab - 1 - int(ids[i]))
		}
	}
	return ids
}

func testEmbedding(t *testing.T, dev device.Device) {
	// dst; table
	types := sameAnd(1, mix(dtype.BF16, dtype.F32), mix(dtype.F32, dtype.F16))
	for _, ty := range types {
		for _, c := range embedCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				table := e.uniform(c.vocab*c.dim, -2, 2)
				tb := e.put(ty.src[0], table)
				ids := e.ids(c)
				ib := e.put(dtype.F32, ids)
				got := e.output(ty.dst, c.n*c.dim, func(db device.Buffer) {
					dev.Embedding(db, tb, ib, c.n, c.dim)
				})
				want := make([]float32, c.n*c.dim)
				for i, id := range ids {
					for j := range c.dim {
						want[i*c.dim+j] = dtype.Round(ty.dst, table[int(id)*c.dim+j])
					}
				}
				e.exact("dst", got, want)
			})
		}
	}
	run(t, dev, "bad-id", func(e *env) {
		tb := e.put(dtype.F32, e.uniform(6, -1, 1))
		db := e.alloc(dtype.F32, 2)
		for _, id := range []float32{3, -1, 0.5} {
			ib := e.put(dtype.F32, []float32{id})
			mustPanic(e.t, fmt.Sprintf("Embedding with id %v of a 3-row table", id), func() { dev.Embedding(db, tb, ib, 1, 2) })
		}
	})
}

func testEmbeddingGrad(t *testing.T, dev device.Device) {
	// dtable; dy
	types := []dtCase{mix(dtype.F32, dtype.F32), mix(dtype.F32, dtype.F16), mix(dtype.F32, dtype.BF16), mix(dtype.BF16, dtype.BF16)}
	for _, ty := range types {
		for _, c := range embedCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				dy := e.uniform(c.n*c.dim, -1, 1)
				gb := e.put(ty.src[0], dy)
				ids := e.ids(c)
				ib := e.put(dtype.F32, ids)
				got := e.output(ty.dst, c.vocab*c.dim, func(db device.Buffer) {
					dev.EmbeddingGrad(db, gb, ib, c.n, c.dim)
				})
				want, slack := make([]float64, c.vocab*c.dim), make([]float64, c.vocab*c.dim)
				count := make([]int, c.vocab)
				for i, id := range ids {
					count[int(id)]++
					for j := range c.dim {
						want[int(id)*c.dim+j] += float64(dy[i*c.dim+j])
						slack[int(id)*c.dim+j] += math.Abs(float64(dy[i*c.dim+j]))
					}
				}
				for k := range slack {
					slack[k] = sumSlack(count[k/c.dim], slack[k])
				}
				e.near("dtable", ty.dst, got, want, slack)
			})
		}
	}
}

type lnCase struct {
	name          string
	rows, cols    int
	shift, spread float64
	bias          bool
}

var lnCases = []lnCase{
	{"3x7", 3, 7, 0, 2, true},
	{"3x7/no-bias", 3, 7, 0.5, 2, false},
	{"1x1", 1, 1, 0, 1, true},
	{"5x2", 5, 2, 0, 3, true},
	// A large mean: a one-pass E[x²]-E[x]² in float32 loses every digit.
	{"offset+1000", 4, 33, 1000, 1, true},
	{"parallel/768x128", 768, 128, 0, 2, true},
	{"parallel/300x130/no-bias", 300, 130, -1, 1, false},
}

// lnRef returns the float64 mean and rstd of each row, and the normalised
// values xhat.
func lnRef(x []float32, rows, cols int, eps float64) (mean, rstd, hat []float64) {
	mean, rstd, hat = make([]float64, rows), make([]float64, rows), make([]float64, rows*cols)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		var s float64
		for _, v := range row {
			s += float64(v)
		}
		mu := s / float64(cols)
		var q float64
		for _, v := range row {
			q += (float64(v) - mu) * (float64(v) - mu)
		}
		mean[r], rstd[r] = mu, 1/math.Sqrt(q/float64(cols)+eps)
		for j, v := range row {
			hat[r*cols+j] = (float64(v) - mu) * rstd[r]
		}
	}
	return mean, rstd, hat
}

// lnTypes are (y; x): same dtype, and autocast's F32 result of a 16-bit input.
var lnTypes = sameAnd(1, mix(dtype.F32, dtype.BF16), mix(dtype.BF16, dtype.F32))

// lnHats are the dtypes x̂ is kept in for the backward pass; noHat asks for
// none (a forward pass that records nothing).
var lnHats = []struct {
	name string
	dt   dtype.DType
	keep bool
}{{"no-xhat", 0, false}, {"xhat-f32", dtype.F32, true}, {"xhat-f16", dtype.F16, true}, {"xhat-bf16", dtype.BF16, true}}

func testLayerNorm(t *testing.T, dev device.Device) {
	const eps = 1e-5
	for _, ty := range lnTypes {
		for _, c := range lnCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				x := e.uniform(c.rows*c.cols, c.shift-c.spread, c.shift+c.spread)
				xb := e.put(ty.src[0], x)
				w, b := e.uniform(c.cols, 0.5, 1.5), e.uniform(c.cols, -1, 1)
				wb := e.put(dtype.F32, w)
				var bb device.Buffer
				if c.bias {
					bb = e.put(dtype.F32, b)
				}
				mean, rstd, hat := lnRef(x, c.rows, c.cols, eps)
				want, slack, hatSlack := make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
				for i, h := range hat {
					j := i % c.cols
					want[i] = h * float64(w[j])
					if c.bias {
						want[i] += float64(b[j])
					}
					// xhat's float32 rounding: (x - mean) loses the low
					// bits of a large mean's row.
					r := i / c.cols
					hatSlack[i] = 4 * u32 * (math.Abs(mean[r])*rstd[r] + math.Abs(h))
					slack[i] = hatSlack[i] * float64(w[j])
				}
				var y0 []float32
				for _, h := range lnHats {
					out := e.twice(func(fill float32) [][]float32 {
						yb, rb := e.full(ty.dst, len(x), fill), e.full(dtype.F32, c.rows, fill)
						var hb device.Buffer
						if h.keep {
							hb = e.full(h.dt, len(x), fill)
						}
						dev.LayerNorm(yb, hb, rb, xb, wb, bb, c.rows, c.cols, eps)
						res := [][]float32{e.get(yb), e.get(rb)}
						if h.keep {
							res = append(res, e.get(hb))
						}
						return res
					})
					e.near("y/"+h.name, ty.dst, out[0], want, slack)
					e.near("rstd/"+h.name, dtype.F32, out[1], rstd, nil)
					if h.keep {
						e.near("xhat/"+h.name, h.dt, out[2], hat, hatSlack)
					}
					// y comes from the unrounded x̂, whatever x̂ is kept in.
					if y0 == nil {
						y0 = out[0]
					} else if i := firstDiff(out[0], y0); i >= 0 {
						e.t.Errorf("%s: y[%d] = %v with %s, %v with %s: y depends on x̂'s dtype", e.t.Name(), i, out[0][i], h.name, y0[i], lnHats[0].name)
					}
				}
			})
		}
	}
}

// firstDiff is the first index at which a and b differ in bits, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func testLayerNormGrad(t *testing.T, dev device.Device) {
	const eps = 1e-5
	// dx; dy, xhat. Under autocast: an F32 dx from a 16-bit dy (the
	// output's dtype) and an x̂ in that dtype or in F32.
	types := sameAnd(2, mix(dtype.F32, dtype.BF16, dtype.F32), mix(dtype.F32, dtype.BF16, dtype.BF16), mix(dtype.F32, dtype.F16, dtype.F16))
	for _, ty := range types {
		for _, c := range lnCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				x := e.uniform(c.rows*c.cols, c.shift-c.spread, c.shift+c.spread)
				dy := e.uniform(c.rows*c.cols, -1, 1)
				_, rstd, hat := lnRef(x, c.rows, c.cols, eps)
				// x̂ and rstd as a forward pass hands them on: rounded to
				// their dtypes, which the reference then reads exactly.
				h := make([]float32, len(hat))
				for i, v := range hat {
					h[i] = float32(v)
				}
				r32 := make([]float32, c.rows)
				for r := range c.rows {
					r32[r] = float32(rstd[r])
				}
				hb, gb, rb := e.put(ty.src[1], h), e.put(ty.src[0], dy), e.put(dtype.F32, r32)
				w := e.uniform(c.cols, 0.5, 1.5)
				wb := e.put(dtype.F32, w)
				out := e.twice(func(fill float32) [][]float32 {
					dxb, dwb := e.full(ty.dst, len(x), fill), e.full(dtype.F32, c.cols, fill)
					var dbb device.Buffer
					if c.bias {
						dbb = e.full(dtype.F32, c.cols, fill)
					}
					dev.LayerNormGrad(dxb, dwb, dbb, gb, hb, rb, wb, c.rows, c.cols)
					res := [][]float32{e.get(dxb), e.get(dwb)}
					if c.bias {
						res = append(res, e.get(dbb))
					}
					return res
				})
				dx, slack := make([]float64, len(x)), make([]float64, len(x))
				dw, db := make([]float64, c.cols), make([]float64, c.cols)
				sw, sb := make([]float64, c.cols), make([]float64, c.cols)
				n := float64(c.cols)
				for r := range c.rows {
					is := float64(r32[r])
					var mg, mgh, abs float64
					for j := range c.cols {
						i := r*c.cols + j
						g, hi := float64(dy[i])*float64(w[j]), float64(h[i])
						mg += g / n
						mgh += g * hi / n
						abs += math.Abs(g) * (1 + math.Abs(hi))
						dw[j] += float64(dy[i]) * hi
						db[j] += float64(dy[i])
						sw[j] += math.Abs(float64(dy[i]) * hi)
						sb[j] += math.Abs(float64(dy[i]))
					}
					for j := range c.cols {
						i := r*c.cols + j
						g, hi := float64(dy[i])*float64(w[j]), float64(h[i])
						dx[i] = is * (g - mg - hi*mgh)
						// The row sums, and the float32 roundings of the
						// terms, which may cancel.
						slack[i] = is * (sumSlack(c.cols, abs)/n + 4*u32*(math.Abs(g)+math.Abs(mg)+math.Abs(hi*mgh)))
					}
				}
				for j := range c.cols {
					sw[j] = sumSlack(c.rows, sw[j]) + 4*u32*sw[j]
					sb[j] = sumSlack(c.rows, sb[j])
				}
				e.near("dx", ty.dst, out[0], dx, slack)
				e.near("dw", dtype.F32, out[1], dw, sw)
				if c.bias {
					e.near("db", dtype.F32, out[2], db, sb)
				}
			})
		}
	}
}

type attCase struct {
	name    string
	p       device.AttentionParams
	spread  float64
	noMaskP bool
}

var attCases = []attCase{
	{"1x4x2x8/causal", device.AttentionParams{B: 1, T: 4, H: 2, D: 8, Causal: true}, 1, false},
	{"2x5x3x5/full", device.AttentionParams{B: 2, T: 5, H: 3, D: 5}, 1, false},
	{"1x1x1x3/causal", device.AttentionParams{B: 1, T: 1, H: 1, D: 3, Causal: true}, 1, false},
	{"2x64x2x16/causal", device.AttentionParams{B: 2, T: 64, H: 2, D: 16, Causal: true}, 2, false},
	// Two and three blocks of queries and keys: the running maximum and
	// sum carry across key blocks.
	{"1x150x2x8/causal", device.AttentionParams{B: 1, T: 150, H: 2, D: 8, Causal: true}, 3, false},
	{"1x70x1x32/full", device.AttentionParams{B: 1, T: 70, H: 1, D: 32}, 2, false},
	{"2x9x2x4/causal/dropout", device.AttentionParams{B: 2, T: 9, H: 2, D: 4, Causal: true, Dropout: 0.3, Key: device.RandKey{Seed: 5, Offset: 17}}, 1, false},
	{"1x80x1x8/causal/dropout", device.AttentionParams{B: 1, T: 80, H: 1, D: 8, Causal: true, Dropout: 0.5, Key: device.RandKey{Seed: 9}}, 1, false},
}

// unit16 is the unit roundoff of the dtype the attention kernels round
// their probabilities to: 0 for F32 (they stay float32).
func unitOf(dt dtype.DType) float64 {
	switch dt {
	case dtype.F16:
		return 1.0 / (1 << 11)
	case dtype.BF16:
		return 1.0 / (1 << 8)
	}
	return u32
}

// attRef is the float64 attention of one call: probabilities (before
// dropout), the dropout factors, outputs and row logsumexp.
type attRef struct {
	p             device.AttentionParams
	q, k, v       func(b, h, t int) []float32
	prob, keep    []float64 // (B, H, T, T)
	y, lse        []float64
	yAbs          []float64 // sum_j p_ij |v_jc|, the scale of y's rounding
	c             int
	qkv           []float32
	visibleCounts []int
}

func newAttRef(p device.AttentionParams, qkv []float32) *attRef {
	c := p.H * p.D
	r := &attRef{p: p, c: c, qkv: qkv}
	at := func(which int) func(b, h, t int) []float32 {
		return func(b, h, t int) []float32 {
			o := (b*p.T+t)*3*c + which*c + h*p.D
			return qkv[o : o+p.D]
		}
	}
	r.q, r.k, r.v = at(0), at(1), at(2)
	T := p.T
	r.prob, r.keep = make([]float64, p.B*p.H*T*T), make([]float64, p.B*p.H*T*T)
	r.y, r.yAbs, r.lse = make([]float64, p.Out()), make([]float64, p.Out()), make([]float64, p.Rows())
	for b := range p.B {
		for h := range p.H {
			bh := b*p.H + h
			for i := range T {
				s := make([]float64, T)
				m := math.Inf(-1)
				for j := range T {
					s[j] = math.Inf(-1)
					if p.Causal && j > i {
						continue
					}
					var d float64
					for x, qv := range r.q(b, h, i) {
						d += float64(qv) * float64(r.k(b, h, j)[x])
					}
					s[j] = d * float64(p.Scale)
					m = math.Max(m, s[j])
				}
				var z float64
				for j := range T {
					z += math.Exp(s[j] - m)
				}
				r.lse[bh*T+i] = m + math.Log(z)
				for j := range T {
					at := (bh*T+i)*T + j
					r.prob[at] = math.Exp(s[j]-m) / z
					r.keep[at] = 1
					if p.Dropout > 0 {
						r.keep[at] = 1 / (1 - float64(p.Dropout))
						if device.Uniform(p.Key, p.DropIndex(bh, i, j)) < p.Dropout {
							r.keep[at] = 0
						}
					}
					for x, vv := range r.v(b, h, j) {
						o := (b*T+i)*c + h*p.D + x
						r.y[o] += r.prob[at] * r.keep[at] * float64(vv)
						r.yAbs[o] += r.prob[at] * r.keep[at] * math.Abs(float64(vv))
					}
				}
			}
		}
	}
	return r
}

var attTypes = []dtype.DType{dtype.F32, dtype.F16, dtype.BF16}

func (e *env) attInputs(c attCase, dt dtype.DType) (device.AttentionParams, []float32) {
	p := c.p
	p.Scale = float32(1 / math.Sqrt(float64(p.D)))
	qkv := e.uniform(p.QKV(), -c.spread, c.spread)
	roundTo(dt, qkv)
	return p, qkv
}

func testAttention(t *testing.T, dev device.Device) {
	for _, dt := range attTypes {
		for _, c := range attCases {
			run(t, dev, fmt.Sprintf("%v/%s", dt, c.name), func(e *env) {
				p, qkv := e.attInputs(c, dt)
				qb := e.put(dt, qkv)
				out := e.twice(func(fill float32) [][]float32 {
					yb, lb := e.full(dt, p.Out(), fill), e.full(dtype.F32, p.Rows(), fill)
					dev.Attention(yb, lb, qb, p)
					return [][]float32{e.get(yb), e.get(lb)}
				})
				r := newAttRef(p, qkv)
				// The probabilities that multiply v are rounded to dt, and the
				// products and sums are float32: both scale with sum p|v|.
				u := unitOf(dt)
				slack := make([]float64, len(r.y))
				for i, a := range r.yAbs {
					slack[i] = 2*u*a + sumSlack(p.T, a)
				}
				e.near("y", dt, out[0], r.y, slack)
				lslack := make([]float64, len(r.lse))
				for i, l := range r.lse {
					lslack[i] = 4 * u32 * math.Abs(l)
				}
				e.near("lse", dtype.F32, out[1], r.lse, lslack)
			})
		}
	}
	run(t, dev, "invalid", func(e *env) {
		p := device.AttentionParams{B: 1, T: 2, H: 1, D: 2, Dropout: 1}
		qb, yb, lb := e.alloc(dtype.F32, p.QKV()), e.alloc(dtype.F32, p.Out()), e.alloc(dtype.F32, p.Rows())
		mustPanic(e.t, "Attention with dropout 1", func() { dev.Attention(yb, lb, qb, p) })
		p.Dropout = 0
		short := e.alloc(dtype.F32, p.QKV()-1)
		mustPanic(e.t, "Attention with a short qkv", func() { dev.Attention(yb, lb, short, p) })
	})
}

func testAttentionGrad(t *testing.T, dev device.Device) {
	for _, dt := range attTypes {
		for _, c := range attCases {
			run(t, dev, fmt.Sprintf("%v/%s", dt, c.name), func(e *env) {
				p, qkv := e.attInputs(c, dt)
				r := newAttRef(p, qkv)
				T, D, C := p.T, p.D, r.c
				y32 := make([]float32, len(r.y))
				lse32 := make([]float32, len(r.lse))
				for i, v := range r.y {
					y32[i] = float32(v)
				}
				for i, v := range r.lse {
					lse32[i] = float32(v)
				}
				dy := e.uniform(p.Out(), -1, 1)
				qb, yb, gb, lb := e.put(dt, qkv), e.put(dt, y32), e.put(dt, dy), e.put(dtype.F32, lse32)
				got := e.output(dt, p.QKV(), func(db device.Buffer) {
					dev.AttentionGrad(db, gb, qb, yb, lb, p)
				})
				want, abs := make([]float64, p.QKV()), make([]float64, p.QKV())
				scale := float64(p.Scale)
				for b := range p.B {
					for h := range p.H {
						bh := b*p.H + h
						row := func(buf []float32, t int) []float32 {
							o := (b*T+t)*C + h*D
							return buf[o : o+D]
						}
						for i := range T {
							var di float64 // from the y the kernel is given
							for x, g := range row(dy, i) {
								di += float64(g) * float64(row(y32, i)[x])
							}
							for j := range T {
								at := (bh*T+i)*T + j
								pij, keep := r.prob[at], r.keep[at]
								if pij == 0 {
									continue
								}
								var dpd float64
								for x, g := range row(dy, i) {
									dpd += float64(g) * float64(r.v(b, h, j)[x])
								}
								ds := pij * (dpd*keep - di)
								for x := range D {
									qi := (b*T+i)*3*C + h*D + x
									kj := (b*T+j)*3*C + C + h*D + x
									vj := kj + C
									want[qi] += scale * ds * float64(qkv[kj])
									abs[qi] += scale * math.Abs(ds*float64(qkv[kj]))
									want[kj] += scale * ds * float64(qkv[qi])
									abs[kj] += scale * math.Abs(ds*float64(qkv[qi]))
									g := float64(row(dy, i)[x])
									want[vj] += pij * keep * g
									abs[vj] += pij * keep * math.Abs(g)
								}
							}
						}
					}
				}
				// dS and the probabilities are rounded to dt before their
				// products, and dS's parts are float32 sums of D and T terms.
				u := unitOf(dt)
				slack := make([]float64, len(want))
				for i, a := range abs {
					slack[i] = 4*u*a + 2*sumSlack(T*D, a)
				}
				e.near("dqkv", dt, got, want, slack)
			})
		}
	}
}
