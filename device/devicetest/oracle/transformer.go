package oracle

import (
	"math"
	"slices"
)

// Permute reorders x's axes: axis i of the result is axis perm[i] of x.
func Permute(x Array, perm ...int) Array {
	need(len(perm) == len(x.Shape), "Permute", "%v for shape %v", perm, x.Shape)
	shape := make([]int, len(perm))
	for i, p := range perm {
		shape[i] = x.Shape[p]
	}
	out := New(shape...)
	src := make([]int, len(perm))
	for k := range out.Data {
		r := k
		for i := len(shape) - 1; i >= 0; i-- {
			src[perm[i]] = r % shape[i]
			r /= shape[i]
		}
		off := 0
		for i, d := range x.Shape {
			off = off*d + src[i]
		}
		out.Data[k] = x.Data[off]
	}
	return out
}

// Chunk splits x along its first axis into n equal parts.
func Chunk(x Array, n int) []Array {
	need(len(x.Shape) > 0 && x.Shape[0]%n == 0, "Chunk", "%v into %d", x.Shape, n)
	shape := slices.Clone(x.Shape)
	shape[0] /= n
	size := Numel(shape)
	out := make([]Array, n)
	for i := range out {
		out[i] = Array{Shape: slices.Clone(shape), Data: slices.Clone(x.Data[i*size : (i+1)*size])}
	}
	return out
}

// Embedding gathers rows of table (vocab, dim): the result has ids'
// positions, shaped (shape..., dim).
func Embedding(table Array, ids []int, shape ...int) Array {
	need(len(table.Shape) == 2 && Numel(shape) == len(ids), "Embedding", "table %v, %d ids as %v", table.Shape, len(ids), shape)
	dim := table.Shape[1]
	out := New(append(slices.Clone(shape), dim)...)
	for i, id := range ids {
		copy(out.Data[i*dim:(i+1)*dim], table.Data[id*dim:(id+1)*dim])
	}
	return out
}

// DropKey names a dropout mask's random stream: device.RandKey.
type DropKey struct{ Seed, Offset uint64 }

// Uniform is element i of k's stream, uniform in [0, 1) with 24 random
// bits: SplitMix64's finaliser of the seed mixed with the counter, as
// device.Uniform specifies.
func (k DropKey) Uniform(i uint64) float64 {
	z := k.Seed ^ ((k.Offset + i) * 0x9e3779b97f4a7c15)
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>40) / (1 << 24)
}

// Dropout keeps element i of x, scaled by 1/(1-p), where k.Uniform(i) >=
// p, and zeroes the others.
func Dropout(x Array, p float64, k DropKey) Array {
	out := New(x.Shape...)
	for i, v := range x.Data {
		if k.Uniform(uint64(i)) >= p {
			out.Data[i] = v / (1 - p)
		}
	}
	return out
}

// AttentionParams configure Attention.
type AttentionParams struct {
	Heads   int
	Scale   float64 // 0: 1/√(head size)
	Causal  bool
	Dropout float64
	Key     DropKey // the dropout mask's stream
}

// Attention is multi-head scaled dot-product attention on packed
// projections: qkv (B, T, 3C) holds each position's queries, keys and
// values (C = heads × head size each, heads side by side); the result (B,
// T, C) holds each head's softmax(q·kᵀ·scale, masked above the diagonal
// when causal, then dropped out) · v. Weight (b, h, i, j) is dropped when
// its stream's element ((b·H + h)·T + i)·T + j is below the dropout
// probability.
func Attention(qkv Array, p AttentionParams) Array {
	need(len(qkv.Shape) == 3 && p.Heads > 0 && qkv.Shape[2]%(3*p.Heads) == 0, "Attention", "qkv %v with %d heads", qkv.Shape, p.Heads)
	b, t, c := qkv.Shape[0], qkv.Shape[1], qkv.Shape[2]/3
	h, d := p.Heads, c/p.Heads
	scale := p.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(d))
	}
	at := func(bi, ti, part, hi, di int) float64 { return qkv.Data[(bi*t+ti)*3*c+part*c+hi*d+di] }
	out := New(b, t, c)
	w := make([]float64, t)
	for bi := range b {
		for hi := range h {
			for i := range t {
				for j := range t {
					w[j] = math.Inf(-1)
					if p.Causal && j > i {
						continue
					}
					var s float64
					for di := range d {
						s += at(bi, i, 0, hi, di) * at(bi, j, 1, hi, di)
					}
					w[j] = s * scale
				}
				l := logSumExp(w)
				for j := range t {
					w[j] = math.Exp(w[j] - l)
					if p.Dropout > 0 {
						if p.Key.Uniform(uint64(((bi*h+hi)*t+i)*t+j)) < p.Dropout {
							w[j] = 0
						} else {
							w[j] /= 1 - p.Dropout
						}
					}
				}
				for di := range d {
					var s float64
					for j := range t {
						s += w[j] * at(bi, j, 2, hi, di)
					}
					out.Data[(bi*t+i)*c+hi*d+di] = s
				}
			}
		}
	}
	return out
}
