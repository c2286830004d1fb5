package gemm

import (
	"fmt"
	"runtime"

	"github.com/mixprec/mixprec/dtype"
)

// Batch lays out the Count products of a batched call: product i reads A,
// B and C from StrideA, StrideB and StrideC elements after product i-1's
// (a stride of 0 shares that operand among all of them).
type Batch struct {
	Count                     int
	StrideA, StrideB, StrideC int
}

// at returns product i's A and B, given the first product's.
func (bt Batch) at(i int, a, b Operand) (Operand, Operand) {
	a.Off += i * bt.StrideA
	b.Off += i * bt.StrideB
	return a, b
}

// workerCount is how many goroutines a parallel call may use.
func workerCount() int {
	if forceWorkers > 0 {
		return forceWorkers
	}
	return runtime.GOMAXPROCS(0)
}

// GemmBatch is Gemm for each of bt.Count products, the operands of product
// i offset by i strides: what a convolution runs per image, the filters
// shared (StrideA 0) and each image's columns and output its own.
//
// A product of one image is small (the MNIST CNN's second layer: 64 x 576
// x 288), and a parallel Gemm per image has each of its goroutines pack
// op(A) again and wait for the others at the end of every image. When the
// products' C do not overlap, GemmBatch shares the whole batch out as one
// task instead: column strips of the products (or whole products, when
// there are enough to go round evenly), each computed as a
// single-goroutine call would, a shared op(A) packed once per worker.
// Products that all add onto one C (StrideC 0 and beta 1: a convolution's
// weight gradient summed over images) are shared out as one column strip
// of C per worker, each adding every product onto its columns in order.
// Either way the bits are those of calling Gemm for each product in turn
// (which goroutine computes a strip does not change them); a C that
// overlaps otherwise runs its products in order, one call each.
func GemmBatch(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int, bt Batch) {
	if bt.Count < 0 {
		panic(fmt.Sprintf("gemm: batch of %d products", bt.Count))
	}
	mode := modeOf(m, n, k, alpha, beta, ldc, bt)
	if mode == inOrder {
		for i := range bt.Count {
			ai, bi := bt.at(i, a, b)
			off := min(i*bt.StrideC, len(c))
			Gemm(transA, transB, m, n, k, alpha, ai, bi, beta, c[off:], ldc)
		}
		return
	}
	if need := (bt.Count-1)*bt.StrideC + (m-1)*ldc + n; len(c) < need {
		panic(fmt.Sprintf("gemm: batch of %d C of %dx%d with ldc=%d, stride %d, needs %d elements, has %d", bt.Count, m, n, ldc, bt.StrideC, need, len(c)))
	}
	startBatch(job{
		transA: transA, transB: transB,
		m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, ldc: ldc,
	}, bt, mode)
}

// Gemm16Batch is Gemm16 for each of bt.Count products, as GemmBatch is
// Gemm's: c.Off is the first product's C, and product i's is bt.StrideC
// elements after product i-1's.
func Gemm16Batch(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c Out16, bt Batch) {
	if bt.Count < 0 {
		panic(fmt.Sprintf("gemm: batch of %d products", bt.Count))
	}
	if c.Unscale != 0 && bt.Count > 1 {
		panic(fmt.Sprintf("gemm: Unscale in a batch of %d products; it unscales one", bt.Count))
	}
	mode := modeOf(m, n, k, alpha, beta, c.LD, bt)
	if mode == inOrder || (c.U16 != nil) == (c.F32 != nil) {
		for i := range bt.Count {
			ai, bi := bt.at(i, a, b)
			ci := c
			ci.Off += i * bt.StrideC
			Gemm16(transA, transB, m, n, k, alpha, ai, bi, beta, ci)
		}
		return
	}
	if c.Off < 0 || c.len() < c.Off+(bt.Count-1)*bt.StrideC+(m-1)*c.LD+n {
		panic(fmt.Sprintf("gemm: batch of %d 16-bit C of %dx%d with LD=%d Off=%d, stride %d, has %d elements", bt.Count, m, n, c.LD, c.Off, bt.StrideC, c.len()))
	}
	dt := dtype.F16
	if c.BF16 {
		dt = dtype.BF16
	}
	startBatch(job{
		transA: transA, transB: transB,
		m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, out: c, narrow: dt,
	}, bt, mode)
}

// batchMode is how a batch runs.
type batchMode uint8

const (
	inOrder    batchMode = iota // one call per product, in order
	disjoint                    // one task: strips of products whose C do not overlap
	accumulate                  // one task: strips of one C that every product adds onto
)

// modeOf chooses how a batch runs. One task needs two products or more,
// enough work to be worth a helper and a C of every product that does not
// overlap another's, or a single C that each product adds onto (StrideC 0,
// beta 1: a weight gradient summed over images). Otherwise, and for the
// cases Gemm and Gemm16 settle without a product (an empty C, alpha 0,
// k 0) or reject, the products run one after another.
func modeOf(m, n, k int, alpha, beta float32, ldc int, bt Batch) batchMode {
	workers := workerCount()
	if workers < 2 || bt.Count < 2 || m <= 0 || n <= 0 || k <= 0 || alpha == 0 || ldc < n {
		return inOrder
	}
	if forceWorkers == 0 && float64(bt.Count)*float64(m)*float64(n)*float64(k) < 2*spawnCost {
		return inOrder
	}
	switch {
	case bt.StrideC >= (m-1)*ldc+n:
		return disjoint
	case bt.StrideC == 0 && beta == 1 && ceilDiv(n, 16) >= 2*workers:
		// (At least two of the widest kernel's columns of 32, or four of
		// 16, per worker; a narrower C, such as the 9 columns of a 3x3
		// single-channel filter's gradient, is one strip.)
		return accumulate
	}
	return inOrder // C overlapping otherwise: the products must run in order
}

// startBatch checks the first and the last product's operands and shares
// the products out among the workers as one task.
func startBatch(j job, bt Batch, mode batchMode) {
	last := j
	last.a, last.b = bt.at(bt.Count-1, j.a, j.b)
	last.prepare()
	j.prepare()
	workers := workerCount()
	nt := ceilDiv(j.n, j.im.nr)
	t := newTask(j)
	t.batch = bt
	switch {
	case mode == accumulate:
		// One strip of C per worker, each adding every product onto its
		// columns in order: a strip packs each product's op(A) again, so
		// more strips would cost more packing.
		t.accum, t.perEntry = true, min(nt, workers)
		t.pieces = t.perEntry
	case bt.Count >= 2*stripsPerWorker*workers:
		// Whole products, enough of them to go round evenly.
		t.perEntry, t.pieces = 1, bt.Count
	default:
		// Column strips of the products, about stripsPerWorker per worker.
		t.perEntry = min(nt, max(1, ceilDiv(stripsPerWorker*workers, bt.Count)))
		t.pieces = bt.Count * t.perEntry
	}
	t.finish(workers)
}

// entry returns product i of a batched job.
func (j *job) entry(i int, bt Batch) job {
	e := *j
	e.a, e.b = bt.at(i, j.a, j.b)
	if e.narrow == dtype.F32 {
		e.c = j.c[i*bt.StrideC:]
	} else {
		e.out.Off += i * bt.StrideC
	}
	return e
}

// runPiece computes piece i of a batched task: a column strip of one
// product, as a single goroutine's Gemm call would compute it, or with an
// accumulating batch a column strip of the shared C with every product
// added onto it in order. The strips keep a shared op(A) packed (*aPacked)
// from one to the next when it fits their budget, as a parallel Gemm's
// strips do; *aEntry is the product whose op(A) that is.
func (t *task) runPiece(buf *buffers, aPacked *bool, aEntry *int, i int) {
	p, s := i/t.perEntry, i%t.perEntry
	if t.accum {
		p, s = 0, i
	}
	for ; p < t.batch.Count; p++ {
		e := t.j.entry(p, t.batch)
		if t.batch.StrideA != 0 && p != *aEntry {
			*aPacked = false
		}
		*aEntry = p
		n0, n1 := e.strip(s, t.perEntry)
		if n0 >= n1 {
			return
		}
		if roundUp(e.m, e.im.mr)*e.steps(e.k) <= stripBudget {
			e.runStrip(buf, aPacked, n0, n1)
		} else {
			*aPacked = false
			e.runRect(buf, 0, e.m, n0, n1)
		}
		if !t.accum {
			return
		}
	}
}
