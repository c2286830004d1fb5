package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// gemmTypes are Gemm's dtype combinations (dst; a, b): same-dtype, the AMP
// cases (16-bit inputs with an F32 or a 16-bit result) and operands mixed
// freely, which the contract allows.
var gemmTypes = []dtCase{
	mix(dtype.F32, dtype.F32, dtype.F32),
	mix(dtype.F32, dtype.F16, dtype.F16),
	mix(dtype.F32, dtype.BF16, dtype.BF16),
	mix(dtype.F16, dtype.F16, dtype.F16),
	mix(dtype.BF16, dtype.BF16, dtype.BF16),
	mix(dtype.F32, dtype.F32, dtype.F16),
	mix(dtype.BF16, dtype.F16, dtype.F32),
}

// gemmCase is one Gemm call; its buffers are as long as the parameters need,
// plus two elements.
type gemmCase struct {
	name string
	p    device.GemmParams
}

func gemmCases() []gemmCase {
	scalars := []struct{ alpha, beta float32 }{{1, 0}, {1.5, 0}, {1, 1}, {-0.5, 2}, {0.75, -1.25}, {2, 0.5}}
	sizes := [][3]int{
		{1, 1, 1}, {1, 1, 7}, {2, 3, 4}, {3, 1, 5}, {1, 6, 2}, {7, 13, 5}, {16, 16, 16},
		{17, 31, 23}, {33, 8, 47}, {32, 64, 31}, {65, 33, 70}, {70, 69, 68}, {130, 257, 65},
	}
	var cs []gemmCase
	for ti, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
		tn := map[bool]string{false: "N", true: "T"}
		tname := tn[tr[0]] + tn[tr[1]]
		for i, s := range sizes {
			ab := scalars[(i+ti)%len(scalars)]
			p := device.GemmParams{TransA: tr[0], TransB: tr[1], M: s[0], N: s[1], K: s[2], Alpha: ab.alpha, Beta: ab.beta}
			cs = append(cs, gemmCase{fmt.Sprintf("%s/%dx%dx%d/a%v_b%v", tname, s[0], s[1], s[2], ab.alpha, ab.beta), p})
		}
		base := device.GemmParams{TransA: tr[0], TransB: tr[1]}
		add := func(name string, f func(p *device.GemmParams)) {
			p := base
			f(&p)
			cs = append(cs, gemmCase{tname + "/" + name, p})
		}
		add("k0/b0", func(p *device.GemmParams) { p.M, p.N, p.K, p.Alpha, p.Beta = 5, 7, 0, 1, 0 })
		add("k0/b0.5", func(p *device.GemmParams) { p.M, p.N, p.K, p.Alpha, p.Beta = 5, 7, 0, 1, 0.5 })
		add("alpha0", func(p *device.GemmParams) { p.M, p.N, p.K, p.Alpha, p.Beta = 4, 5, 6, 0, 1 })
		add("offsets", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta = 6, 5, 9, 1, 0
			p.OffA, p.OffB, p.OffC = 7, 3, 11
		})
		add("batch3", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 5, 6, 7, 1, 0, 3
			p.StrideA, p.StrideB, p.StrideC = 35, 42, 30
		})
		add("batch4/sharedB/gaps", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 9, 4, 11, -1, 0.5, 4
			p.StrideA, p.StrideB, p.StrideC = 9*11+3, 0, 9*4+2
			p.OffA, p.OffB, p.OffC = 5, 1, 4
		})
		add("batch2/sharedA", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 3, 17, 8, 1, 0, 2
			p.StrideA, p.StrideB, p.StrideC = 0, 8*17+1, 3*17
			p.OffB = 2
		})
		// Entries that share C (StrideC 0), as a convolution's weight
		// gradient sums its images: run in order, each onto what the last
		// left, Beta applying to it each time (0: only the last counts).
		add("batch5/sharedC", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 7, 9, 13, 1, 1, 5
			p.StrideA, p.StrideB, p.StrideC = 7*13, 13*9+1, 0
			p.OffC = 3
		})
		add("batch4/sharedC/a0.5_b0.5", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 6, 5, 8, 0.5, 0.5, 4
			p.StrideA, p.StrideB, p.StrideC = 6*8, 8*5, 0
		})
		add("batch3/sharedC/b0", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 5, 4, 6, 1, 0, 3
			p.StrideA, p.StrideB, p.StrideC = 5*6, 6*4, 0
		})
		add("batch5/large", func(p *device.GemmParams) {
			p.M, p.N, p.K, p.Alpha, p.Beta, p.Batch = 33, 40, 64, 0.5, 1, 5
			p.StrideA, p.StrideB, p.StrideC = 33*64, 64*40, 33*40
		})
	}
	return cs
}

// span is the number of elements a batched operand occupies.
func span(off, stride, size, batch int) int { return off + (batch-1)*stride + size }

func testGemm(t *testing.T, dev device.Device) {
	cases := gemmCases()
	for _, ty := range gemmTypes {
		for _, c := range cases {
			run(t, dev, ty.String()+"/"+c.name, func(e *env) { checkGemm(e, ty, c.p) })
		}
	}
}

func checkGemm(e *env, ty dtCase, p device.GemmParams) {
	nb := p.Batches()
	m, n, k := p.M, p.N, p.K
	// Two spare elements at the end of every buffer catch writes past it.
	a := e.uniform(span(p.OffA, p.StrideA, m*k, nb)+2, -1, 1)
	b := e.uniform(span(p.OffB, p.StrideB, k*n, nb)+2, -1, 1)
	c0 := e.uniform(span(p.OffC, p.StrideC, m*n, nb)+2, -1, 1)
	ab, bb := e.put(ty.src[0], a), e.put(ty.src[1], b)
	roundTo(ty.dst, c0)
	inC := make([]bool, len(c0)) // which elements of dst the call writes
	for bi := range nb {
		for i := range m * n {
			inC[p.OffC+bi*p.StrideC+i] = true
		}
	}
	got := e.twice(func(fill float32) [][]float32 {
		h := append([]float32(nil), c0...)
		if p.Beta == 0 {
			for i := range h {
				if inC[i] {
					h[i] = fill
				}
			}
		}
		cb := e.put(ty.dst, h)
		e.dev.Gemm(cb, ab, bb, p)
		return [][]float32{e.get(cb)}
	})[0]

	want, slack := gemmRef(p, ty.dst, a, b, c0)
	var gw []float32
	var ww, sw []float64
	var gapGot, gapWant []float32
	for i := range c0 {
		if inC[i] {
			gw = append(gw, got[i])
			ww = append(ww, want[i])
			sw = append(sw, slack[i])
		} else {
			gapGot = append(gapGot, got[i])
			gapWant = append(gapWant, c0[i])
		}
	}
	e.near("C[b*M*N+i*N+j]", ty.dst, gw, ww, sw)
	e.exact("elements of dst outside the matrices", gapGot, gapWant)
}

// gemmRef returns, for every element of dst, Alpha*op(A)*op(B) + Beta*C in
// float64 (C unread when Beta is 0), and the slack of a float32 dot product
// of length K (see sumSlack) plus the rounding of Beta*C.
//
// With 16-bit inputs the products are exact in float32, so an F32 result
// differs from the float64 one only by float32 accumulation, which grows
// with K. Measured on the CPU backend (gonum's float32 Sgemm after widening
// 16-bit inputs), the largest F32 error over every case here is 7.6e-6
// absolute (130x257x65, alpha 1.5, F16 inputs), 0.17 of the plain F32
// tolerance; the slack, sqrt(K)*2^-24*|alpha|*sum|a*b|, about 1.3e-5 in
// that case, is for backends that sum in another order (cuBLAS split-K,
// tensor cores).
//
// Entries that share C are run in order, each onto what the last left (the
// reference rounds it to dst, the dtype it is stored in), and their slacks
// add up, with a rounding of dst's tolerance for every entry but the last.
func gemmRef(p device.GemmParams, dst dtype.DType, a, b, c []float32) (want, slack []float64) {
	want = make([]float64, len(c))
	slack = make([]float64, len(c))
	cur := make([]float64, len(c)) // C as the entries so far left it
	for i, v := range c {
		cur[i] = float64(v)
	}
	atol, rtol := dtype.Tolerance(dst)
	m, n, k := p.M, p.N, p.K
	at := func(base, i, l int) float64 { // op(A)[i, l]
		if p.TransA {
			return float64(a[base+l*m+i])
		}
		return float64(a[base+i*k+l])
	}
	bt := func(base, l, j int) float64 { // op(B)[l, j]
		if p.TransB {
			return float64(b[base+j*k+l])
		}
		return float64(b[base+l*n+j])
	}
	alpha, beta := float64(p.Alpha), float64(p.Beta)
	for bi := range p.Batches() {
		oa, ob, oc := p.OffA+bi*p.StrideA, p.OffB+bi*p.StrideB, p.OffC+bi*p.StrideC
		for i := range m {
			for j := range n {
				var s, abs float64
				for l := range k {
					x := at(oa, i, l) * bt(ob, l, j)
					s += x
					abs += math.Abs(x)
				}
				at := oc + i*n + j
				w := alpha * s
				sl := sumSlack(k, math.Abs(alpha)*abs)
				if p.Beta != 0 {
					w += beta * cur[at]
					sl += u32*math.Abs(beta*cur[at]) + math.Abs(beta)*slack[at]
				}
				if bi > 0 && p.StrideC == 0 {
					sl += atol + rtol*math.Abs(cur[at]) // the last entry's result, stored in dst
				}
				want[at], slack[at] = w, sl
				cur[at] = float64(dtype.Round(dst, float32(w)))
			}
		}
	}
	return want, slack
}

// testGemmNarrow checks device.NarrowGemmer where a backend has it: each
// Gemm case, with operands in the rounding dtype (the autocast weight
// gradient) and mixed with F32, must give the bits of Gemm into a 16-bit
// dst read back as F32, and leave the rest of dst as it was.
func testGemmNarrow(t *testing.T, dev device.Device) {
	ng, ok := optional[device.NarrowGemmer](dev)
	if !ok {
		t.Skip("the backend does not implement the optional device.NarrowGemmer")
	}
	for _, via := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, src := range [][2]dtype.DType{{via, via}, {dtype.F32, via}} {
			for _, c := range gemmCases() {
				name := fmt.Sprintf("%v/%v,%v/%s", via, src[0], src[1], c.name)
				run(t, dev, name, func(e *env) { checkGemmNarrow(e, ng, via, src, c.p) })
			}
		}
	}
}

func checkGemmNarrow(e *env, ng device.NarrowGemmer, via dtype.DType, src [2]dtype.DType, p device.GemmParams) {
	nb := p.Batches()
	a := e.uniform(span(p.OffA, p.StrideA, p.M*p.K, nb)+2, -1, 1)
	b := e.uniform(span(p.OffB, p.StrideB, p.K*p.N, nb)+2, -1, 1)
	c0 := e.uniform(span(p.OffC, p.StrideC, p.M*p.N, nb)+2, -1, 1)
	roundTo(via, c0) // C's old values as a 16-bit dst holds them
	ab, bb := e.put(src[0], a), e.put(src[1], b)
	narrow := e.put(via, append([]float32(nil), c0...))
	e.dev.Gemm(narrow, ab, bb, p)
	wide := e.put(dtype.F32, append([]float32(nil), c0...))
	ng.GemmNarrow(wide, ab, bb, p, via)
	e.exact("GemmNarrow against Gemm into a 16-bit dst", e.get(wide), e.get(narrow))
}

// testGemmNarrowUnscale checks device.UnscalingGemmer where a backend has
// it: each single-product Gemm case with beta 0, through F16 and BF16, must
// give the bits of GemmNarrow with C's elements then multiplied by inv (by
// a power of two and by a factor that rounds), report no Inf or NaN among
// finite results, and leave the rest of dst as it was; an Inf in A, or a
// factor that overflows, must be reported.
func testGemmNarrowUnscale(t *testing.T, dev device.Device) {
	ug, ok := optional[device.UnscalingGemmer](dev)
	ng, ok2 := optional[device.NarrowGemmer](dev)
	if !ok || !ok2 {
		t.Skip("the backend does not implement the optional device.UnscalingGemmer")
	}
	for _, via := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, c := range gemmCases() {
			if c.p.Batches() > 1 || c.p.Beta != 0 {
				continue
			}
			for _, inv := range []float32{0x1p-16, 1.0 / 3} {
				name := fmt.Sprintf("%v/%s/inv%g", via, c.name, inv)
				run(t, dev, name, func(e *env) { checkGemmNarrowUnscale(e, ug, ng, via, c.p, inv) })
			}
		}
		p := device.GemmParams{M: 9, N: 37, K: 5, Alpha: 1}
		run(t, dev, fmt.Sprintf("%v/nonfinite", via), func(e *env) {
			a := e.uniform(p.M*p.K, -1, 1)
			a[3*p.K+2] = float32(math.Inf(1))
			wide := e.put(dtype.F32, make([]float32, p.M*p.N))
			ab, bb := e.put(via, a), e.put(via, e.uniform(p.K*p.N, -1, 1))
			if !ug.GemmNarrowUnscale(wide, ab, bb, p, via, 0x1p-16) {
				e.t.Fatalf("an Inf in A: GemmNarrowUnscale reports none")
			}
			if !ug.GemmNarrowUnscale(wide, e.put(via, e.uniform(p.M*p.K, 1, 2)), bb, p, via, 0x1p127) {
				e.t.Fatalf("finite results unscaled past float32's range: GemmNarrowUnscale reports no Inf")
			}
		})
	}
}

func checkGemmNarrowUnscale(e *env, ug device.UnscalingGemmer, ng device.NarrowGemmer, via dtype.DType, p device.GemmParams, inv float32) {
	a := e.uniform(p.OffA+p.M*p.K+2, -1, 1)
	b := e.uniform(p.OffB+p.K*p.N+2, -1, 1)
	c0 := e.uniform(p.OffC+p.M*p.N+2, -1, 1)
	ab, bb := e.put(via, a), e.put(via, b)
	want := e.put(dtype.F32, append([]float32(nil), c0...))
	ng.GemmNarrow(want, ab, bb, p, via)
	w := e.get(want)
	for i := range p.M * p.N {
		w[p.OffC+i] *= inv
	}
	got := e.put(dtype.F32, append([]float32(nil), c0...))
	if ug.GemmNarrowUnscale(got, ab, bb, p, via, inv) {
		e.t.Fatalf("GemmNarrowUnscale reports an Inf or NaN among finite results")
	}
	e.exact("GemmNarrowUnscale against GemmNarrow, then each result times inv", e.get(got), w)
}
