package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// storage is how a test operand is stored.
type storage int

const (
	f32 storage = iota
	f16
	bf16
)

func (s storage) String() string { return [...]string{"F32", "F16", "BF16"}[s] }

var storages = []storage{f32, f16, bf16}

// padNaN16 and padNaN32 fill every element an operand does not own, so that a
// read outside the matrix turns the result into NaN and fails the test.
const (
	padNaN16 = 0x7e01
	padNaN32 = 0x7fc0dead
	cSentry  = 0x7fc0beef // C's padding, which must come back untouched
)

// newOperand returns a rows x cols operand in storage st with leading
// dimension cols+ldExtra and element offset off, and its values as float64.
// Values are in [-1, 1], exactly representable in st.
func newOperand(rng *rand.Rand, st storage, rows, cols, ldExtra, off int) (Operand, []float64) {
	ld := max(1, cols+ldExtra)
	size := off + rng.IntN(4)
	if rows > 0 && cols > 0 {
		size += (rows-1)*ld + cols
	}
	vals := make([]float64, rows*cols)
	op := Operand{Off: off, LD: ld}
	switch st {
	case f32:
		op.F32 = make([]float32, size)
		for i := range op.F32 {
			op.F32[i] = math.Float32frombits(padNaN32)
		}
	default:
		op.U16 = make([]uint16, size)
		op.BF16 = st == bf16
		for i := range op.U16 {
			op.U16[i] = padNaN16
		}
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			x := off + i*ld + j
			var v float32
			switch st {
			case f32:
				v = rng.Float32()*2 - 1
				op.F32[x] = v
			case f16:
				// sign, exponent 2⁻⁸..2⁰ (some subnormal-adjacent
				// values included), random mantissa.
				h := uint16(rng.IntN(2))<<15 | uint16(7+rng.IntN(9))<<10 | uint16(rng.IntN(1024))
				op.U16[x] = h
				v = f16ToF32(h)
			case bf16:
				h := uint16(math.Float32bits(rng.Float32()*2-1) >> 16)
				op.U16[x] = h
				v = bf16ToF32(h)
			}
			vals[i*cols+j] = float64(v)
		}
	}
	return op, vals
}

// newC returns an m x n C with stride n+ldExtra filled with values in [-1, 1]
// (or NaN when nanFill) and padding set to cSentry.
func newC(rng *rand.Rand, m, n, ldExtra int, nanFill bool) ([]float32, int) {
	ldc := max(1, n+ldExtra)
	size := 0
	if m > 0 && n > 0 {
		size = (m-1)*ldc + n
	}
	c := make([]float32, size+rng.IntN(3))
	for i := range c {
		c[i] = math.Float32frombits(cSentry)
	}
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			if nanFill {
				c[i*ldc+j] = float32(math.NaN())
			} else {
				c[i*ldc+j] = rng.Float32()*2 - 1
			}
		}
	}
	return c, ldc
}

// reference returns alpha*op(A)*op(B) + beta*C accumulated in float64 and,
// per element, the magnitude |alpha|·Σ|a·b| + |beta·c| that bounds the
// rounding error of any float32 evaluation order.
func reference(transA, transB bool, m, n, k int, alpha float64, av, bv []float64, beta float64, c []float32, ldc int) (want, mag []float64) {
	want = make([]float64, m*n)
	mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, sa float64
			for p := 0; p < k; p++ {
				var x, y float64
				if transA {
					x = av[p*m+i]
				} else {
					x = av[i*k+p]
				}
				if transB {
					y = bv[j*k+p]
				} else {
					y = bv[p*n+j]
				}
				s += x * y
				sa += math.Abs(x * y)
			}
			w, g := alpha*s, math.Abs(alpha)*sa
			if beta != 0 {
				cv := float64(c[i*ldc+j])
				w += beta * cv
				g += math.Abs(beta * cv)
			}
			want[i*n+j], mag[i*n+j] = w, g
		}
	}
	return want, mag
}

// tolerance is the house F32 rule |got-want| <= 1e-5 + 1e-4·|want|, with |want|
// replaced by mag (which is ≥ |want| and is what rounding errors scale with:
// cancellation can make |want| tiny while the terms are not) and rtol grown
// with k. Recursive float32 summation of k products, plus the alpha and beta
// roundings and one add per k block, errs by at most about (k+2·blocks+2)·u·mag
// with u = 2⁻²⁴; 2k·u covers every blocking.
func tolerance(k int, mag float64) float64 {
	const u = 1.0 / (1 << 24)
	atol, rtol := dtype.Tolerance(dtype.F32)
	return atol + (rtol+2*float64(k)*u)*mag
}

// gemmCase is one call of Gemm with generated operands.
type gemmCase struct {
	transA, transB bool
	sa, sb         storage
	m, n, k        int
	alpha, beta    float32
	ldExtra        int  // extra leading-dimension padding for A, B and C
	off            int  // element offset of A and B
	nanC           bool // C filled with NaN (only meaningful with beta == 0)
}

func (tc gemmCase) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s/%s×%s/%dx%dx%d/a%g/b%g/ld+%d/off%d", t(tc.transA), t(tc.transB), tc.sa, tc.sb, tc.m, tc.n, tc.k, tc.alpha, tc.beta, tc.ldExtra, tc.off)
}

// stored is the rows and columns of an operand as stored, for op(X) of
// rows x cols and X transposed or not.
func stored(trans bool, rows, cols int) (int, int) {
	if trans {
		return cols, rows
	}
	return rows, cols
}

// run executes tc with seed and reports every element outside tolerance and
// any write to C's padding. It returns C for bitwise comparisons.
func (tc gemmCase) run(t *testing.T, seed uint64) []float32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	ar, ac := stored(tc.transA, tc.m, tc.k)
	br, bc := stored(tc.transB, tc.k, tc.n)
	a, av := newOperand(rng, tc.sa, ar, ac, tc.ldExtra, tc.off)
	b, bv := newOperand(rng, tc.sb, br, bc, tc.ldExtra, tc.off)
	c, ldc := newC(rng, tc.m, tc.n, tc.ldExtra, tc.nanC)
	want, mag := reference(tc.transA, tc.transB, tc.m, tc.n, tc.k, float64(tc.alpha), av, bv, float64(tc.beta), c, ldc)

	Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, b, tc.beta, c, ldc)

	bad := 0
	for i := 0; i < tc.m; i++ {
		for j := 0; j < tc.n; j++ {
			got := float64(c[i*ldc+j])
			w := want[i*tc.n+j]
			if tol := tolerance(tc.k, mag[i*tc.n+j]); !(math.Abs(got-w) <= tol) {
				if bad++; bad <= 5 {
					t.Errorf("%v: C[%d,%d] = %v, want %v (tol %.3g)", tc, i, j, got, w, tol)
				}
			}
		}
		if i < tc.m-1 && tc.n > 0 {
			for j := tc.n; j < ldc; j++ {
				if bits := math.Float32bits(c[i*ldc+j]); bits != cSentry {
					t.Fatalf("%v: C padding [%d,%d] overwritten: %#x", tc, i, j, bits)
				}
			}
		}
	}
	for x := (tc.m-1)*ldc + tc.n; tc.m > 0 && tc.n > 0 && x < len(c); x++ {
		if bits := math.Float32bits(c[x]); bits != cSentry {
			t.Fatalf("%v: C past its end [%d] overwritten: %#x", tc, x, bits)
		}
	}
	return c
}

// withImpl makes im the active implementation for the rest of the test.
func withImpl(t testing.TB, im *impl) {
	prev := active
	active = im
	t.Cleanup(func() { active = prev })
}

// withWorkers forces the goroutine count for the rest of the test.
func withWorkers(t testing.TB, w int) {
	prev := forceWorkers
	forceWorkers = w
	t.Cleanup(func() { forceWorkers = prev })
}

var transCombos = []struct{ a, b bool }{{false, false}, {false, true}, {true, false}, {true, true}}

// smallBlocking returns a copy of im whose cache blocks are a few micro-tiles,
// so that moderate sizes cross every block boundary (k blocks, m blocks, n
// blocks and the edge tiles of each).
func smallBlocking(im *impl) *impl {
	c := *im
	c.name += "-smallblocks"
	c.kc, c.mc, c.nc = 7, 2*im.mr, 3*im.nr
	if im.dot != nil {
		c.dot = smallBlocking(im.dot)
	}
	return &c
}

// negZero is -0 as a float32 (the literal -0.0 is +0 in Go).
var negZero = float32(math.Copysign(0, -1))

// gemmShapes are TestGemm's sizes, 1..70, m x n x k.
func gemmShapes() [][3]int {
	shapes := [][3]int{{1, 1, 1}, {1, 70, 3}, {70, 1, 5}, {3, 5, 1}, {13, 33, 17}, {12, 32, 64}, {6, 16, 9}, {70, 70, 70}}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 6 {
		shapes = append(shapes, [3]int{1 + rng.IntN(70), 1 + rng.IntN(70), 1 + rng.IntN(70)})
	}
	return shapes
}

// TestGemm covers every implementation, transpose combination and pair of
// storages on sizes 1..70 with padded strides and offsets; a dot variant
// runs the bfloat16 pairs (the only ones it changes).
func TestGemm(t *testing.T) {
	shapes := gemmShapes()
	for _, v := range variants() {
		t.Run(v.name, func(t *testing.T) {
			v.use(t)
			seed := uint64(0)
			for _, tr := range transCombos {
				for _, sa := range storages {
					for _, sb := range storages {
						for si, s := range shapes {
							seed++
							if v.dot && (sa != bf16 || sb != bf16) {
								continue
							}
							tc := gemmCase{
								transA: tr.a, transB: tr.b, sa: sa, sb: sb,
								m: s[0], n: s[1], k: s[2],
								alpha:   []float32{1, -0.75, 2.5}[si%3],
								beta:    []float32{0, 1, -1.5, 0.5}[si%4],
								ldExtra: si % 3 * 5, off: si % 4 * 3,
							}
							tc.run(t, seed)
						}
					}
				}
			}
		})
	}
}

// TestGemmBlocks crosses the cache-block boundaries, once with tiny blocks
// on moderate sizes and once with the real blocks on sizes past them.
func TestGemmBlocks(t *testing.T) {
	type test struct {
		v       variant
		m, n, k int
	}
	var tests []test
	for _, v := range variants() {
		im := v.im
		if v.dot {
			im = v.im.dot // its blocks are the ones to cross
		}
		small := v
		small.im, small.name = smallBlocking(v.im), v.name+"-smallblocks"
		tests = append(tests, test{small, 37, 101, 29}, test{v, 2*im.mc + 5, im.nr*3 + 1, im.kc*2 + 3})
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%dx%dx%d", tt.v.name, tt.m, tt.n, tt.k), func(t *testing.T) {
			tt.v.use(t)
			for i, tr := range transCombos {
				tc := gemmCase{transA: tr.a, transB: tr.b, sa: storages[i%3], sb: storages[(i+1)%3],
					m: tt.m, n: tt.n, k: tt.k, alpha: 1.5, beta: -0.5, ldExtra: 3, off: 1}
				if tt.v.dot {
					tc.sa, tc.sb, tc.off = bf16, bf16, i
				}
				tc.run(t, uint64(i))
			}
		})
	}
}

// TestGemmLarge checks the default implementation on the shapes Gemm is tuned
// for, with the goroutine split active.
func TestGemmLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large shapes skipped in -short mode")
	}
	for _, s := range [][3]int{{128, 256, 784}, {256, 784, 128}, {64, 576, 288}} {
		for _, tr := range transCombos {
			for _, st := range [][2]storage{{f16, bf16}, {bf16, bf16}} {
				tc := gemmCase{transA: tr.a, transB: tr.b, sa: st[0], sb: st[1], m: s[0], n: s[1], k: s[2], alpha: 1, beta: 0, nanC: true}
				t.Run(tc.String(), func(t *testing.T) { tc.run(t, 99) })
			}
		}
	}
}

// TestGemmSpecial covers the quick returns and BLAS conventions.
func TestGemmSpecial(t *testing.T) {
	tests := []gemmCase{
		{m: 5, n: 7, k: 0, alpha: 1, beta: 0, nanC: true},          // k == 0, beta == 0: C zeroed
		{m: 5, n: 7, k: 0, alpha: 1, beta: 2},                      // k == 0: C scaled
		{m: 5, n: 7, k: 3, alpha: 0, beta: 1},                      // alpha == 0: C untouched
		{m: 5, n: 7, k: 3, alpha: 0, beta: 0, nanC: true},          // alpha == 0, beta == 0: C zeroed
		{m: 0, n: 7, k: 3, alpha: 1, beta: 1},                      // empty C
		{m: 5, n: 0, k: 3, alpha: 1, beta: 1},                      // empty C
		{m: 40, n: 50, k: 60, alpha: 1, beta: 0, nanC: true},       // NaN in C must not leak
		{m: 40, n: 50, k: 60, alpha: 1, beta: negZero, nanC: true}, // nor with beta = -0
		{m: 3, n: 3, k: 300, alpha: -1, beta: 0.25, transA: true},  // k-only size
	}
	for _, v := range variants() {
		for _, tc := range tests {
			if v.dot {
				tc.sa, tc.sb = bf16, bf16
			}
			t.Run(v.name+"/"+tc.String(), func(t *testing.T) {
				v.use(t)
				tc.run(t, 5)
			})
		}
	}
}

// TestNaNPropagates checks that a NaN in A reaches exactly its row of C.
func TestNaNPropagates(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			withImpl(t, im)
			const m, n, k = 30, 40, 20
			a := make([]float32, m*k)
			b := make([]float32, k*n)
			for i := range a {
				a[i] = 1
			}
			for i := range b {
				b[i] = 1
			}
			a[7*k+3] = float32(math.NaN())
			c := make([]float32, m*n)
			Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					if got, nan := c[i*n+j], i == 7; math.IsNaN(float64(got)) != nan {
						t.Fatalf("C[%d,%d] = %v, want NaN: %v", i, j, got, nan)
					}
				}
			}
		})
	}
}

// TestReproducible requires identical bits whatever the goroutine count,
// GOMAXPROCS, and across repeated calls.
func TestReproducible(t *testing.T) {
	shapes := [][3]int{{128, 256, 784}, {131, 263, 517}, {64, 576, 288}, {300, 40, 1000}}
	for _, s := range shapes {
		for i, tr := range transCombos {
			tc := gemmCase{transA: tr.a, transB: tr.b, sa: f32, sb: f16, m: s[0], n: s[1], k: s[2], alpha: 0.5, beta: 1.25, ldExtra: 1}
			if i%2 == 1 {
				tc.sa, tc.sb = bf16, bf16 // the dot path where the CPU has one
			}
			t.Run(tc.String(), func(t *testing.T) {
				ref := tc.runQuiet(t, 0, 1)
				for _, procs := range []int{1, 2} {
					prev := runtime.GOMAXPROCS(procs)
					got := tc.runQuiet(t, 0, 0)
					runtime.GOMAXPROCS(prev)
					compareBits(t, fmt.Sprintf("GOMAXPROCS=%d", procs), got, ref)
				}
				for _, w := range []int{1, 2, 3, 4, 7, 16} {
					compareBits(t, fmt.Sprintf("workers=%d", w), tc.runQuiet(t, 0, w), ref)
				}
			})
		}
	}
}

// runQuiet runs tc with a forced worker count (0: Gemm's choice) and returns
// C without checking it.
func (tc gemmCase) runQuiet(t *testing.T, seed uint64, workers int) []float32 {
	t.Helper()
	prev := forceWorkers
	forceWorkers = workers
	defer func() { forceWorkers = prev }()
	return tc.gemm(seed)
}

// gemm runs tc with operands made from seed, as runQuiet does, under the
// current settings, and returns C; it may run on several goroutines at once.
func (tc gemmCase) gemm(seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	ar, ac := tc.m, tc.k
	if tc.transA {
		ar, ac = tc.k, tc.m
	}
	br, bc := tc.k, tc.n
	if tc.transB {
		br, bc = tc.n, tc.k
	}
	a, _ := newOperand(rng, tc.sa, ar, ac, tc.ldExtra, tc.off)
	b, _ := newOperand(rng, tc.sb, br, bc, tc.ldExtra, tc.off)
	c, ldc := newC(rng, tc.m, tc.n, tc.ldExtra, false)
	Gemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, b, tc.beta, c, ldc)
	return c
}

func compareBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %v (%#x), want %v (%#x): not bitwise reproducible",
				what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestImplsAgree compares each assembly implementation with the Go one on
// the same inputs: both must be within tolerance of each other, not only of
// the reference.
func TestImplsAgree(t *testing.T) {
	const m, n, k = 53, 77, 301
	for _, im := range impls[1:] {
		for _, tr := range transCombos {
			tc := gemmCase{transA: tr.a, transB: tr.b, sa: bf16, sb: f32, m: m, n: n, k: k, alpha: 1, beta: 0.5}
			t.Run(im.name+"/"+tc.String(), func(t *testing.T) {
				prev := active
				active = goImpl
				want := tc.runQuiet(t, 3, 1)
				active = im
				got := tc.runQuiet(t, 3, 1)
				active = prev
				for i := range want {
					d := math.Abs(float64(got[i] - want[i]))
					// Each side is within tolerance of the exact
					// result, so they are within twice of each other.
					if tol := 2 * tolerance(k, float64(k)); !(d <= tol) {
						t.Fatalf("element %d: %s gives %v, go gives %v", i, im.name, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestAsmImplsBits checks that the AVX2 and AVX-512 implementations give the
// same bits: different tiles, same kc, and per element the same FMAs in the
// same order, so a result does not depend on which x86 CPU computed it.
func TestAsmImplsBits(t *testing.T) {
	var asm []*impl
	for _, im := range impls {
		if im != goImpl {
			asm = append(asm, im)
		}
	}
	if len(asm) < 2 {
		t.Skip("fewer than two assembly implementations on this CPU")
	}
	for _, tr := range transCombos {
		tc := gemmCase{transA: tr.a, transB: tr.b, sa: f16, sb: bf16, m: 77, n: 131, k: 600, alpha: 0.75, beta: -1, ldExtra: 2}
		t.Run(tc.String(), func(t *testing.T) {
			prev := active
			defer func() { active = prev }()
			active = asm[0]
			want := tc.runQuiet(t, 4, 0)
			for _, im := range asm[1:] {
				active = im
				compareBits(t, im.name+" vs "+asm[0].name, tc.runQuiet(t, 4, 0), want)
			}
		})
	}
}

// TestEdgeTileBits checks the property the reproducibility argument rests on:
// a tile computed in place and one computed into a temporary and merged by
// mergeTile are bitwise equal.
func TestEdgeTileBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, im := range kernelImpls() {
		for _, beta := range []float32{0, 1, -0.3} {
			t.Run(fmt.Sprintf("%s/beta=%g", im.name, beta), func(t *testing.T) {
				const kc = 37
				a := make([]float32, kc*im.mr)
				b := make([]float32, kc*im.nr)
				c0 := make([]float32, im.mr*im.nr)
				fillPanel(rng, im, a)
				fillPanel(rng, im, b)
				fillPanel(rng, goImpl, c0)
				alpha := float32(1.7)
				direct := append([]float32(nil), c0...)
				im.tile(kc, a, b, direct, im.nr, alpha, beta)
				merged := append([]float32(nil), c0...)
				tmp := make([]float32, im.mr*im.nr)
				im.tile(kc, a, b, tmp, im.nr, 1, 0)
				mergeTile(merged, im.nr, tmp, im.nr, im.mr, im.nr, alpha, beta)
				compareBits(t, "merged tile", merged, direct)
			})
		}
	}
}

// TestNoAllocs checks that, once the pool is warm, a single-goroutine call
// allocates nothing.
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	withWorkers(t, 1)
	const m, n, k = 64, 96, 128
	a := make([]uint16, m*k)
	b := make([]float32, k*n)
	c := make([]float32, m*n)
	f := func() {
		Gemm(false, true, m, n, k, 1, Operand{U16: a, LD: k}, Operand{F32: b, LD: k}, 0, c, n)
	}
	f()
	if got := testing.AllocsPerRun(20, f); got > 0.5 {
		t.Errorf("Gemm allocates %v times per call, want 0", got)
	}
}

// TestPanics checks that programmer errors panic with a message naming the
// problem.
func TestPanics(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"negative m", func() { Sgemm(false, false, -1, 2, 2, 1, f(4), 2, f(4), 2, 0, f(4), 2) }, "negative dimension"},
		{"small ldc", func() { Sgemm(false, false, 2, 2, 2, 1, f(4), 2, f(4), 2, 0, f(4), 1) }, "ldc=1"},
		{"short C", func() { Sgemm(false, false, 2, 2, 2, 1, f(4), 2, f(4), 2, 0, f(3), 2) }, "C is 2x2"},
		{"small lda", func() { Sgemm(false, false, 2, 3, 4, 1, f(8), 3, f(12), 3, 0, f(6), 3) }, "A stored 2x4: LD=3"},
		{"small ldb transB", func() { Sgemm(false, true, 2, 3, 4, 1, f(8), 4, f(12), 3, 0, f(6), 3) }, "B stored 3x4: LD=3"},
		{"short A", func() { Sgemm(true, false, 2, 3, 4, 1, f(7), 2, f(12), 3, 0, f(6), 3) }, "needs 8 elements, has 7"},
		{"no storage", func() {
			Gemm(false, false, 1, 1, 1, 1, Operand{LD: 1}, Operand{F32: f(1), LD: 1}, 0, f(1), 1)
		}, "exactly one of F32 and U16"},
		{"two storages", func() {
			Gemm(false, false, 1, 1, 1, 1, Operand{F32: f(1), U16: []uint16{0}, LD: 1}, Operand{F32: f(1), LD: 1}, 0, f(1), 1)
		}, "exactly one of F32 and U16"},
		{"negative offset", func() {
			Gemm(false, false, 1, 1, 1, 1, Operand{F32: f(1), LD: 1, Off: -1}, Operand{F32: f(1), LD: 1}, 0, f(1), 1)
		}, "negative Off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if r == nil || !strings.Contains(msg, tt.want) {
					t.Errorf("panic = %v, want a message containing %q", r, tt.want)
				}
			}()
			tt.call()
		})
	}
}

// TestSplit checks the grid choice: never more rectangles than goroutines
// allowed, none for small products, a short wide C split along n, and all
// goroutines used when starting them is free.
func TestSplit(t *testing.T) {
	tests := []struct {
		m, n, k, p, spawn int
		pm, pn            int
	}{
		{128, 256, 784, 1, spawnCost, 1, 1},
		{128, 256, 784, 2, spawnCost, 1, 2},
		{4096, 64, 64, 2, spawnCost, 2, 1},
		{1024, 1024, 1024, 16, spawnCost, 4, 4},
		{40, 40, 40, 8, spawnCost, 1, 1},     // 64k multiply-adds: not worth a goroutine
		{5, 5, 5, 8, 0, 1, 1},                // one tile cannot be split
		{100, 100, 10, 8, 0, 2, 4},           // free goroutines: use them all
		{128, 256, 784, 64, spawnCost, 4, 4}, // 16, not 64: more would pack more than they save
	}
	for _, tt := range tests {
		pm, pn := split(tt.m, tt.n, tt.k, 12, 32, tt.p, tt.spawn)
		if pm != tt.pm || pn != tt.pn {
			t.Errorf("split(%d, %d, %d, 12, 32, p=%d, spawn=%d) = %d x %d, want %d x %d", tt.m, tt.n, tt.k, tt.p, tt.spawn, pm, pn, tt.pm, tt.pn)
		}
		if pm*pn > tt.p {
			t.Errorf("split(%d, %d, %d, p=%d) uses %d goroutines", tt.m, tt.n, tt.k, tt.p, pm*pn)
		}
	}
}

// TestBlockLen checks that k blocks are equal and bounded.
func TestBlockLen(t *testing.T) {
	tests := []struct{ n, limit, unit, want int }{
		{784, 256, 1, 196},
		{256, 256, 1, 256},
		{257, 256, 1, 129},
		{1, 256, 1, 1},
		{128, 240, 12, 132},
		{500, 240, 12, 168},
	}
	for _, tt := range tests {
		if got := blockLen(tt.n, tt.limit, tt.unit); got != tt.want {
			t.Errorf("blockLen(%d, %d, %d) = %d, want %d", tt.n, tt.limit, tt.unit, got, tt.want)
		}
	}
}

// TestEdgeKernelBits checks that every edge kernel gives the main kernel's
// bits on the part of the tile it covers and writes nothing outside it.
func TestEdgeKernelBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, im := range kernelImpls() {
		for ri, rows := range im.rows {
			for ci, cols := range im.cols {
				for _, beta := range []float32{0, -0.3} {
					t.Run(fmt.Sprintf("%s/%dx%d/beta=%g", im.name, rows, cols, beta), func(t *testing.T) {
						const kc = 29
						a := make([]float32, kc*im.mr)
						b := make([]float32, kc*im.nr)
						c0 := make([]float32, im.mr*im.nr)
						fillPanel(rng, im, a)
						fillPanel(rng, im, b)
						fillPanel(rng, goImpl, c0)
						full := append([]float32(nil), c0...)
						im.tile(kc, a, b, full, im.nr, 0.7, beta)
						edge := append([]float32(nil), c0...)
						im.edge[ri][ci](kc, a, b, edge, im.nr, 0.7, beta)
						for i := 0; i < im.mr; i++ {
							for j := 0; j < im.nr; j++ {
								want := full[i*im.nr+j]
								if i >= rows || j >= cols {
									want = c0[i*im.nr+j]
								}
								if got := edge[i*im.nr+j]; math.Float32bits(got) != math.Float32bits(want) {
									t.Fatalf("C[%d,%d] = %v, want %v", i, j, got, want)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestSubmatrixBits checks a stronger form of reproducibility: an element's
// bits depend on its row of op(A), its column of op(B), k, alpha, beta and
// its C value, but not on m, n, or where it sits in C. Computing a block of C
// on its own, through operand offsets, must reproduce the full product's
// bits there.
func TestSubmatrixBits(t *testing.T) {
	const m, n = 100, 90
	const i0, i1, j0, j1 = 37, 61, 20, 71
	// The second set is training's alpha and beta, with k spanning three
	// k blocks, so that later blocks add onto C: the AMX kernel then
	// starts from C's old value, and its edge tiles must too.
	for _, ps := range []struct {
		k           int
		alpha, beta float32
	}{{300, 0.5, 2}, {1100, 1, 1}} {
		k, alpha, beta := ps.k, ps.alpha, ps.beta
		for _, v := range variants() {
			for _, tr := range transCombos {
				t.Run(fmt.Sprintf("%s/%v%v/k=%d", v.name, tr.a, tr.b, k), func(t *testing.T) {
					v.use(t)
					sta, stb := f16, f32
					if v.dot {
						sta, stb = bf16, bf16
					}
					rng := rand.New(rand.NewPCG(11, 12))
					ar, ac := m, k
					if tr.a {
						ar, ac = k, m
					}
					br, bc := k, n
					if tr.b {
						br, bc = n, k
					}
					a, _ := newOperand(rng, sta, ar, ac, 0, 0)
					b, _ := newOperand(rng, stb, br, bc, 0, 0)
					c0, _ := newC(rng, m, n, 0, false)
					full := append([]float32(nil), c0[:m*n]...)
					Gemm(tr.a, tr.b, m, n, k, alpha, a, b, beta, full, n)

					sa, sb := a, b
					if tr.a {
						sa.Off += i0 // first column of the stored k x m A
					} else {
						sa.Off += i0 * a.LD
					}
					if tr.b {
						sb.Off += j0 * b.LD
					} else {
						sb.Off += j0
					}
					sub := append([]float32(nil), c0[i0*n+j0:]...)
					Gemm(tr.a, tr.b, i1-i0, j1-j0, k, alpha, sa, sb, beta, sub, n)
					for i := i0; i < i1; i++ {
						for j := j0; j < j1; j++ {
							got, want := sub[(i-i0)*n+j-j0], full[i*n+j]
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("C[%d,%d] = %v alone, %v in the full product", i, j, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestStagedBits checks that a C whose rows are a multiple of 1024 floats
// apart, which the AMX path computes in a buffer of its own and copies back
// when k spans several k blocks (job.staged; stageMin is lowered so that
// this small C qualifies), gets the bits a C 1040 floats apart gets, leaves
// the columns past n alone and, with beta 0, does not read C (NaN stays
// out).
func TestStagedBits(t *testing.T) {
	const m, n = 70, 100
	defer func(s int) { stageMin = s }(stageMin)
	stageMin = 0
	for _, ps := range []struct {
		k           int
		alpha, beta float32
	}{{300, 1, 0}, {600, 0.5, 2}, {1100, 1, 1}, {1100, 1, 0}} {
		for _, v := range variants() {
			for _, tr := range transCombos {
				t.Run(fmt.Sprintf("%s/%v%v/k=%d/beta=%v", v.name, tr.a, tr.b, ps.k, ps.beta), func(t *testing.T) {
					v.use(t)
					sta, stb := f16, f32
					if v.dot {
						sta, stb = bf16, bf16
					}
					rng := rand.New(rand.NewPCG(13, 14))
					ar, ac := m, ps.k
					if tr.a {
						ar, ac = ps.k, m
					}
					br, bc := ps.k, n
					if tr.b {
						br, bc = n, ps.k
					}
					a, _ := newOperand(rng, sta, ar, ac, 0, 0)
					b, _ := newOperand(rng, stb, br, bc, 0, 0)
					c0, _ := newC(rng, m, n, 0, ps.beta == 0)
					run := func(ldc int) []float32 {
						c := make([]float32, m*ldc)
						for i := range c {
							c[i] = math.Float32frombits(cSentry)
						}
						for i := range m {
							copy(c[i*ldc:i*ldc+n], c0[i*n:])
						}
						Gemm(tr.a, tr.b, m, n, ps.k, ps.alpha, a, b, ps.beta, c, ldc)
						return c
					}
					staged, plain := run(1024), run(1040)
					for i := range m {
						for j := range 1024 {
							got := math.Float32bits(staged[i*1024+j])
							if j >= n {
								if got != cSentry {
									t.Fatalf("C[%d,%d] past n written: %#x", i, j, got)
								}
								continue
							}
							if want := math.Float32bits(plain[i*1040+j]); got != want {
								t.Fatalf("C[%d,%d] = %v with ldc 1024, %v with ldc 1040", i, j, staged[i*1024+j], plain[i*1040+j])
							}
							if got&0x7f800000 == 0x7f800000 && got&0x7fffff != 0 {
								t.Fatalf("C[%d,%d] is NaN", i, j)
							}
						}
					}
				})
			}
		}
	}
}
