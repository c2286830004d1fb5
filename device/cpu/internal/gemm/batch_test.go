package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// batchCase is a batched product: count products of op(A) m x k and
// op(B) k x n, each operand shared (stride 0) or one per product.
type batchCase struct {
	transA, transB   bool
	m, n, k, count   int
	sharedA, sharedB bool
	beta             float32
	accum            bool // one C that every product adds onto (StrideC 0, beta 1)
}

// operands returns the batch's A and B in storage st (each product's
// matrix packed one after the other, or one shared matrix) and their
// strides, and a C of count products with rows ldc apart, filled with
// values when beta reads them.
func (bc batchCase) operands(rng *rand.Rand, st storage) (a, b Operand, bt Batch, c []float32, ldc int) {
	ar, ac := stored(bc.transA, bc.m, bc.k)
	br, bcol := stored(bc.transB, bc.k, bc.n)
	na, nb := bc.count, bc.count
	if bc.sharedA {
		na = 1
	}
	if bc.sharedB {
		nb = 1
	}
	a, _ = newOperand(rng, st, na*ar, ac, 0, 3)
	b, _ = newOperand(rng, st, nb*br, bcol, 0, 1)
	bt = Batch{Count: bc.count, StrideA: ar * ac, StrideB: br * bcol}
	if bc.sharedA {
		bt.StrideA = 0
	}
	if bc.sharedB {
		bt.StrideB = 0
	}
	ldc = bc.n + 3
	bt.StrideC = bc.m*ldc + 5
	c = make([]float32, bc.count*bt.StrideC)
	if bc.accum {
		bt.StrideC = 0
		c = c[:bc.m*ldc+5]
	}
	for i := range c {
		c[i] = math.Float32frombits(cSentry)
		if bc.beta != 0 {
			c[i] = float32(rng.IntN(64)-32) / 16
		}
	}
	return a, b, bt, c, ldc
}

// TestGemmBatch checks that a batch shared out as whole products gives,
// bit for bit, what calling Gemm (Gemm16, with both forms of 16-bit C) on
// each product in turn gives, with each operand shared or not, beta 0 and
// 1, on 2 and 3 workers and with the blocking small enough to cross every
// block boundary; C's padding between and after the products stays as it
// was.
func TestGemmBatch(t *testing.T) {
	cases := []batchCase{
		{m: 64, n: 96, k: 72, count: 6, sharedA: true},                     // a convolution's forward: shared filters
		{transA: true, m: 40, n: 70, k: 16, count: 7, sharedA: true},       // its input gradient
		{m: 13, n: 33, k: 17, count: 5},                                    // nothing shared
		{transB: true, m: 12, n: 32, k: 1, count: 9, sharedB: true},        // a bias broadcast: k = 1
		{transA: true, transB: true, m: 7, n: 5, k: 30, count: 4, beta: 1}, // beta reads C
		{m: 30, n: 20, k: 9, count: 8, sharedA: true, sharedB: true, beta: 1},
		{transB: true, m: 64, n: 72, k: 40, count: 5, beta: 1, accum: true},   // a weight gradient over images
		{m: 20, n: 100, k: 30, count: 3, sharedA: true, beta: 1, accum: true}, // strips keeping a shared op(A)
	}
	impls := []*impl{active, smallBlocking(active)}
	for _, im := range impls {
		for _, bc := range cases {
			for _, st := range storages {
				for _, w := range []int{2, 3} {
					name := fmt.Sprintf("%s/%dx%dx%d*%d/%v/shared=%v,%v/beta=%v/accum=%v/w=%d", im.name, bc.m, bc.n, bc.k, bc.count, st, bc.sharedA, bc.sharedB, bc.beta, bc.accum, w)
					t.Run(name, func(t *testing.T) {
						withImpl(t, im)
						for _, out := range []string{"f32", "u16", "wide"} {
							if st == f32 && out != "f32" {
								continue // a 16-bit C goes with 16-bit operands in the tests' cases
							}
							checkBatch(t, bc, st, out, w)
						}
					})
				}
			}
		}
	}
}

// checkBatch runs bc with workers forced to w, and serially product by
// product, and compares the two bit for bit.
func checkBatch(t *testing.T, bc batchCase, st storage, out string, w int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(bc.m*bc.n), uint64(bc.k)))
	a, b, bt, c, ldc := bc.operands(rng, st)
	want := append([]float32(nil), c...)
	got := append([]float32(nil), c...)
	bf := st == bf16
	switch out {
	case "f32":
		for i := range bt.Count {
			ai, bi := bt.at(i, a, b)
			Gemm(bc.transA, bc.transB, bc.m, bc.n, bc.k, 1.5, ai, bi, bc.beta, want[i*bt.StrideC:], ldc)
		}
		withWorkers(t, w)
		GemmBatch(bc.transA, bc.transB, bc.m, bc.n, bc.k, 1.5, a, b, bc.beta, got, ldc, bt)
		withWorkers(t, 0)
	case "wide":
		// Widened 16-bit C: the old values must be 16-bit ones.
		for i := range c {
			want[i] = roundTo(bf, want[i])
			got[i] = want[i]
		}
		for i := range bt.Count {
			ai, bi := bt.at(i, a, b)
			Gemm16(bc.transA, bc.transB, bc.m, bc.n, bc.k, 1.5, ai, bi, bc.beta, Out16{F32: want, BF16: bf, Off: i * bt.StrideC, LD: ldc})
		}
		withWorkers(t, w)
		Gemm16Batch(bc.transA, bc.transB, bc.m, bc.n, bc.k, 1.5, a, b, bc.beta, Out16{F32: got, BF16: bf, LD: ldc}, bt)
		withWorkers(t, 0)
	case "u16":
		w16 := make([]uint16, len(c))
		for i, v := range c {
			w16[i] = encodeTo(bf, v)
		}
		g16 := append([]uint16(nil), w16...)
		for i := range bt.Count {
			ai, bi := bt.at(i, a, b)
			Gemm16(bc.transA, bc.transB, bc.m, bc.n, bc.k, 1.5, ai, bi, bc.beta, Out16{U16: w16, BF16: bf, Off: i * bt.StrideC, LD: ldc})
		}
		withWorkers(t, w)
		Gemm16Batch(bc.transA, bc.transB, bc.m, bc.n, bc.k, 1.5, a, b, bc.beta, Out16{U16: g16, BF16: bf, LD: ldc}, bt)
		withWorkers(t, 0)
		for i := range w16 {
			if w16[i] != g16[i] {
				t.Fatalf("%s C: element %d (product %d) is %#04x batched, %#04x one by one", out, i, i/bt.StrideC, g16[i], w16[i])
			}
		}
		return
	}
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s C: element %d (product %d) is %v batched, %v one by one", out, i, i/bt.StrideC, got[i], want[i])
		}
	}
}

// TestGemmBatchShared checks that a batch is in fact shared out (the paths
// TestGemmBatch compares) exactly when it has two products or more and
// their C do not overlap or all add onto one C, and that an overlapping C
// otherwise runs its products in order.
func TestGemmBatchShared(t *testing.T) {
	withWorkers(t, 2)
	for _, c := range []struct {
		beta float32
		n    int
		bt   Batch
		want batchMode
	}{
		{0, 8, Batch{Count: 4, StrideC: 64}, disjoint},
		{1, 8, Batch{Count: 2, StrideC: 64}, disjoint},
		{0, 8, Batch{Count: 1, StrideC: 64}, inOrder},
		{0, 8, Batch{Count: 4, StrideC: 63}, inOrder},
		{1, 8, Batch{Count: 4, StrideC: 0}, inOrder}, // 8 columns: one strip
		{1, 64, Batch{Count: 4, StrideC: 0}, accumulate},
		{0, 64, Batch{Count: 4, StrideC: 0}, inOrder},
		{1, 64, Batch{Count: 4, StrideC: 64}, inOrder},
	} {
		if got := modeOf(8, c.n, 8, 1, c.beta, c.n, c.bt); got != c.want {
			t.Errorf("beta %v, %+v: mode %d, want %d", c.beta, c.bt, got, c.want)
		}
	}
	// StrideC 0 with beta 0: each product overwrites C, the last one stays.
	a := Operand{F32: []float32{1, 2, 3, 4}, LD: 1}
	b := Operand{F32: []float32{1}, LD: 1}
	c := []float32{10}
	GemmBatch(false, false, 1, 1, 1, 1, a, b, 0, c, 1, Batch{Count: 4, StrideA: 1})
	if c[0] != 4 {
		t.Errorf("batch of 4 overwriting one C: %v, want 4", c[0])
	}
}

// roundTo rounds v to bfloat16 (bf) or binary16.
func roundTo(bf bool, v float32) float32 {
	if bf {
		return dtype.Round(dtype.BF16, v)
	}
	return dtype.Round(dtype.F16, v)
}

// encodeTo is v's bfloat16 (bf) or binary16 pattern.
func encodeTo(bf bool, v float32) uint16 {
	if bf {
		return dtype.F32ToBF16(v)
	}
	return dtype.F32ToF16(v)
}
