package cudaops

import (
	"math"

	"github.com/mixprec/mixprec/dtype"
)

// The fake GPU's transliterations of kernels/transformer.cu, registered
// with the others. Each follows its kernel's order of operations: the
// lanes' strided partial sums and their butterfly, the tiles of keys and
// queries, the roundings to the operands' dtype. Products that the kernels
// add in separate roundings (-fmad=false) are converted to float32 before
// they are added, so Go cannot fuse them either.

func init() {
	for name, fn := range transformerEmulators {
		emulators[name] = fn
	}
}

// Tile sizes of transformer.cu that the emulation follows.
const (
	emuLanes     = 32
	emuWarps     = blockSize / emuLanes
	emuAttKeys   = 32
	emuFwdTile   = 16 // ATT_FWD_TILE
	emuGradQTile = emuWarps
	emuLNGroups  = blockSize / 8 // LN_GROUPS
)

var transformerEmulators = map[string]func(g *fakeGPU, a *argv, grid int){
	"mp_embedding": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, table, tdt, ids, idt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		n, dim, vocab, bad := a.int(), a.int(), a.int(), a.ptr()
		for k := range n * dim {
			i := k / dim
			// embed_id is softmax.cu's label check with the table's rows
			// for classes.
			v := float32(math.NaN())
			if id := g.label(ids, idt, i, vocab, bad); id >= 0 {
				v = g.ld(table, tdt, id*dim+k-i*dim)
			}
			g.st(dst, ddt, k, v)
		}
	},
	"mp_embedding_grad": func(g *fakeGPU, a *argv, _ int) {
		dtable, ddt, dy, gdt, ids, idt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		n, dim, vocab, bad := a.int(), a.int(), a.int(), a.ptr()
		const rows = embedGradRows
		strips := (dim + blockSize - 1) / blockSize
		for blk := range strips * ((vocab + rows - 1) / rows) {
			c0, r0 := blk%strips*blockSize, blk/strips*rows
			acc := make([]float32, rows*blockSize)
			for i := range n {
				id := g.label(ids, idt, i, vocab, bad)
				r := id - r0
				if id < 0 || r < 0 || r >= rows {
					continue
				}
				for t := range blockSize {
					if col := c0 + t; col < dim {
						acc[r*blockSize+t] += g.ld(dy, gdt, i*dim+col)
					}
				}
			}
			for t := range blockSize {
				for r := 0; r < rows && r0+r < vocab; r++ {
					if col := c0 + t; col < dim {
						g.st(dtable, ddt, (r0+r)*dim+col, acc[r*blockSize+t])
					}
				}
			}
		}
	},
	"mp_softmax": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt, rows, cols := a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.int()
		for r := range rows {
			base := r * cols
			x := func(j int) float32 { return g.ld(src, sdt, base+j) }
			m := warpMax(x, cols)
			if !isFinite(m) {
				for j := range cols {
					g.st(dst, ddt, base+j, float32(math.NaN()))
				}
				continue
			}
			inv := 1 / g.warpSum(func(j int) float32 { return expf(x(j) - m) }, cols)
			for j := range cols {
				g.st(dst, ddt, base+j, expf(x(j)-m)*inv)
			}
		}
	},
	"mp_softmax_grad": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, dy, gdt, y, ydt, rows, cols := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.int()
		for r := range rows {
			base := r * cols
			s := g.warpSum(func(j int) float32 { return float32(g.ld(dy, gdt, base+j) * g.ld(y, ydt, base+j)) }, cols)
			for j := range cols {
				yv := g.ld(y, ydt, base+j)
				g.st(dst, ddt, base+j, yv*(g.ld(dy, gdt, base+j)-s))
			}
		}
	},
	"mp_layernorm": func(g *fakeGPU, a *argv, _ int) {
		y, ydt, xhat, hdt, rstd, x, xdt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.ptr(), a.int()
		w, wdt, b, bdt, rows, cols, eps := a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.int(), a.f32()
		for r := range rows {
			base := r * cols
			xv := func(j int) float64 { return float64(g.ld(x, xdt, base+j)) }
			mu := warpSum64(xv, cols) / float64(cols)
			q := warpSum64(func(j int) float64 { d := xv(j) - mu; return d * d }, cols)
			is := float32(1 / math.Sqrt(q/float64(cols)+float64(eps)))
			m := float32(mu)
			g.st(rstd, 0, r, is)
			for j := range cols {
				h := float32(float32(g.ld(x, xdt, base+j)-m) * is)
				if xhat != 0 {
					g.st(xhat, hdt, base+j, h)
				}
				v := float32(h * g.ld(w, wdt, j))
				if b != 0 {
					v = float32(v) + g.ld(b, bdt, j)
				}
				g.st(y, ydt, base+j, v)
			}
		}
	},
	"mp_layernorm_grad": func(g *fakeGPU, a *argv, _ int) {
		dx, ddt, dy, gdt, xhat, hdt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		rstd, w, wdt, rows, cols := a.ptr(), a.ptr(), a.int(), a.int(), a.int()
		for r := range rows {
			base := r * cols
			is := g.ld(rstd, 0, r)
			h := func(j int) float32 { return g.ld(xhat, hdt, base+j) }
			gr := func(j int) float32 { return float32(g.ld(dy, gdt, base+j) * g.ld(w, wdt, j)) }
			mg := g.warpSum(gr, cols) / float32(cols)
			mgh := g.warpSum(func(j int) float32 { return float32(gr(j) * h(j)) }, cols) / float32(cols)
			for j := range cols {
				g.st(dx, ddt, base+j, is*((gr(j)-mg)-float32(h(j)*mgh)))
			}
		}
	},
	"mp_layernorm_grad_wb": func(g *fakeGPU, a *argv, _ int) {
		dw, db, dy, gdt, xhat, hdt := a.ptr(), a.ptr(), a.ptr(), a.int(), a.ptr(), a.int()
		rows, cols := a.int(), a.int()
		for j := range cols {
			var tw, tb float64
			for grp := range emuLNGroups {
				var sw, sb float32
				for r := grp; r < rows; r += emuLNGroups {
					gv := g.ld(dy, gdt, r*cols+j)
					h := g.ld(xhat, hdt, r*cols+j)
					sw += float32(gv * h)
					sb += gv
				}
				tw += float64(sw)
				tb += float64(sb)
			}
			g.st(dw, 0, j, float32(tw))
			if db != 0 {
				g.st(db, 0, j, float32(tb))
			}
		}
	},
	"mp_attention": func(g *fakeGPU, a *argv, _ int) {
		y, ydt, lse, qkv, qdt := a.ptr(), a.int(), a.ptr(), a.ptr(), a.int()
		p := a.att()
		for bh := range p.B * p.H {
			b, h := bh/p.H, bh%p.H
			for i0 := 0; i0 < p.T; i0 += emuFwdTile {
				nkeys := p.T
				if p.causal {
					nkeys = min(i0+emuFwdTile, p.T)
				}
				for i := i0; i < min(i0+emuFwdTile, p.T); i++ {
					q := g.attRow(qkv, qdt, p, b, h, 0, i)
					m, l := float32(math.Inf(-1)), float32(0)
					o := make([]float32, p.D)
					for j0 := 0; j0 < nkeys; j0 += emuAttKeys {
						jend := min(emuAttKeys, p.keys(i)-j0)
						s := make([]float32, emuLanes)
						for lane := range s {
							s[lane] = float32(math.Inf(-1))
							if lane < jend {
								s[lane] = emuDot(q, g.attRow(qkv, qdt, p, b, h, 1, j0+lane)) * p.scale
							}
						}
						mnew := nanMax(m, butterfly(s, nanMax)[0])
						corr := float32(1)
						if !math.IsInf(float64(mnew), -1) {
							corr = expf(m - mnew)
						}
						pr := make([]float32, emuLanes)
						for lane := range pr {
							if lane < jend {
								pr[lane] = expf(s[lane] - mnew)
							}
						}
						l = float32(l*corr) + butterfly(pr, add32)[0]
						m = mnew
						for lane := range pr {
							if p.drop > 0 && lane < jend {
								if p.kept(bh, i, j0+lane) {
									pr[lane] *= p.dscale
								} else {
									pr[lane] = 0
								}
							}
							pr[lane] = roundTo(qdt, pr[lane])
						}
						for x := range o {
							o[x] *= corr
						}
						for jj := 0; jj < jend; jj++ {
							v := g.attRow(qkv, qdt, p, b, h, 2, j0+jj)
							for x := range o {
								o[x] += float32(pr[jj] * v[x])
							}
						}
					}
					inv := 1 / l
					for x := range o {
						g.st(y, ydt, ((b*p.T+i)*p.H+h)*p.D+x, o[x]*inv)
					}
					g.st(lse, 0, bh*p.T+i, m+float32(math.Log(float64(l))))
				}
			}
		}
	},
	"mp_attention_grad_q": func(g *fakeGPU, a *argv, _ int) {
		dqkv, ddt, dy, gdt, qkv, qdt, y, ydt, lse := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr()
		p := a.att()
		for bh := range p.B * p.H {
			b, h := bh/p.H, bh%p.H
			for i := range p.T {
				i0 := i / emuGradQTile * emuGradQTile
				nkeys := p.T
				if p.causal {
					nkeys = min(i0+emuGradQTile, p.T)
				}
				q, gr := g.attRow(qkv, qdt, p, b, h, 0, i), g.attOut(dy, gdt, p, b, h, i)
				di := emuDi(gr, g.attOut(y, ydt, p, b, h, i))
				li := g.ld(lse, 0, bh*p.T+i)
				dq := make([]float32, p.D)
				for j0 := 0; j0 < nkeys; j0 += emuAttKeys {
					jend := min(emuAttKeys, p.keys(i)-j0)
					ds := make([]float32, jend)
					for lane := range ds {
						j := j0 + lane
						pr := expf(emuDot(q, g.attRow(qkv, qdt, p, b, h, 1, j))*p.scale - li)
						dp := emuDot(gr, g.attRow(qkv, qdt, p, b, h, 2, j))
						if p.drop > 0 {
							if p.kept(bh, i, j) {
								dp *= p.dscale
							} else {
								dp = 0
							}
						}
						ds[lane] = roundTo(qdt, pr*(dp-di))
					}
					for jj := range ds {
						k := g.attRow(qkv, qdt, p, b, h, 1, j0+jj)
						for x := range dq {
							dq[x] += float32(ds[jj] * k[x])
						}
					}
				}
				for x := range dq {
					g.st(dqkv, ddt, p.at(b, i, 0, h, x), p.scale*dq[x])
				}
			}
		}
	},
	"mp_attention_grad_kv": func(g *fakeGPU, a *argv, _ int) {
		dqkv, ddt, dy, gdt, qkv, qdt, y, ydt, lse := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr()
		p := a.att()
		for bh := range p.B * p.H {
			b, h := bh/p.H, bh%p.H
			for j0 := 0; j0 < p.T; j0 += emuAttKeys {
				dk, dv := make([][]float32, emuAttKeys), make([][]float32, emuAttKeys)
				for k := range dk {
					dk[k], dv[k] = make([]float32, p.D), make([]float32, p.D)
				}
				q0 := 0
				if p.causal {
					q0 = j0
				}
				// The queries in order of i: the kernel takes them ATT_WARPS
				// at a time, each batch in order, so every key's sums run
				// over i in order.
				for i := q0; i < p.T; i++ {
					q, gr := g.attRow(qkv, qdt, p, b, h, 0, i), g.attOut(dy, gdt, p, b, h, i)
					di := emuDi(gr, g.attOut(y, ydt, p, b, h, i))
					for lane := range emuAttKeys {
						j := j0 + lane
						var pd, ds float32
						if j < p.T && (!p.causal || j <= i) {
							pr := expf(emuDot(q, g.attRow(qkv, qdt, p, b, h, 1, j))*p.scale - g.ld(lse, 0, bh*p.T+i))
							dp := emuDot(gr, g.attRow(qkv, qdt, p, b, h, 2, j))
							pd = pr
							if p.drop > 0 {
								if p.kept(bh, i, j) {
									pd, dp = pr*p.dscale, dp*p.dscale
								} else {
									pd, dp = 0, 0
								}
							}
							ds = pr * (dp - di)
						}
						pd, ds = roundTo(qdt, pd), roundTo(qdt, ds)
						for x := range p.D {
							dv[lane][x] += float32(pd * gr[x])
							dk[lane][x] += float32(ds * q[x])
						}
					}
				}
				for k := range emuAttKeys {
					if j := j0 + k; j < p.T {
						for x := range p.D {
							g.st(dqkv, ddt, p.at(b, j, 1, h, x), p.scale*dk[k][x])
							g.st(dqkv, ddt, p.at(b, j, 2, h, x), dv[k][x])
						}
					}
				}
			}
		}
	},
}

func add32(a, b float32) float32 { return a + b }

// warpMax is the strided per-lane nan_max of f(j), j < cols, then warp_max.
func warpMax(f func(j int) float32, cols int) float32 {
	v := make([]float32, emuLanes)
	for l := range v {
		v[l] = float32(math.Inf(-1))
		for j := l; j < cols; j += emuLanes {
			v[l] = nanMax(v[l], f(j))
		}
	}
	return butterfly(v, nanMax)[0]
}

// warpSum64 is the strided per-lane double sum of f(j), then warp_sum_d.
func warpSum64(f func(j int) float64, cols int) float64 {
	v := make([]float64, emuLanes)
	for l := range v {
		for j := l; j < cols; j += emuLanes {
			v[l] += f(j)
		}
	}
	for m := 16; m > 0; m >>= 1 {
		w := make([]float64, emuLanes)
		for l := range w {
			w[l] = v[l] + v[l^m]
		}
		v = w
	}
	return v[0]
}

// emuAtt is the attention kernels' trailing arguments.
type emuAtt struct {
	B, T, H, D   int
	scale        float32
	causal       bool
	drop, dscale float32
	seed, offset uint64
}

func (a *argv) att() emuAtt {
	var p emuAtt
	p.B, p.T, p.H, p.D = a.int(), a.int(), a.int(), a.int()
	p.scale, p.causal = a.f32(), a.int() != 0
	p.drop, p.dscale = a.f32(), a.f32()
	p.seed, p.offset = a.u64(), a.u64()
	return p
}

// at is qkv_at.
func (p emuAtt) at(b, t, which, h, x int) int {
	return ((b*p.T+t)*3+which)*p.H*p.D + h*p.D + x
}

// keys is how many keys query i sees.
func (p emuAtt) keys(i int) int {
	if p.causal {
		return i + 1
	}
	return p.T
}

// kept is att_kept.
func (p emuAtt) kept(bh, i, j int) bool {
	idx := (uint64(bh)*uint64(p.T)+uint64(i))*uint64(p.T) + uint64(j)
	return float32(emuMix64(p.seed, p.offset+idx)>>40)*(1.0/16777216.0) >= p.drop
}

// attRow is row t of head (b, h)'s q, k or v (which 0, 1, 2), as float.
func (g *fakeGPU) attRow(qkv uint64, qdt int, p emuAtt, b, h, which, t int) []float32 {
	r := make([]float32, p.D)
	for x := range r {
		r[x] = g.ld(qkv, qdt, p.at(b, t, which, h, x))
	}
	return r
}

// attOut is row t of head (b, h) of a (B, T, H, D) buffer.
func (g *fakeGPU) attOut(buf uint64, dt int, p emuAtt, b, h, t int) []float32 {
	r := make([]float32, p.D)
	for x := range r {
		r[x] = g.ld(buf, dt, ((b*p.T+t)*p.H+h)*p.D+x)
	}
	return r
}

// emuDot is dot_sh.
func emuDot(a, b []float32) float32 {
	var s float32
	for x := range a {
		s += float32(a[x] * b[x])
	}
	return s
}

// emuDi is att_di: lane-strided partial sums of dy*y, then warp_sum.
func emuDi(gr, y []float32) float32 {
	v := make([]float32, emuLanes)
	for l := range v {
		for x := l; x < len(gr); x += emuLanes {
			v[l] += float32(gr[x] * y[x])
		}
	}
	return butterfly(v, add32)[0]
}

// roundTo is round_to: v rounded to the dtype code dt and back.
func roundTo(dt int, v float32) float32 {
	switch dt {
	case 1:
		return dtype.F16ToF32(dtype.F32ToF16(v))
	case 2:
		return math.Float32frombits(uint32(f32ToBF16Bits(v)) << 16)
	}
	return v
}
