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
// single-goroutine call would, a shared op(A) packed once per worker. The
// bits are those of calling Gemm for each product in turn (which goroutine
// computes a strip does not change them); so are they when C overlaps
// (StrideC 0 accumulating into one C with beta 1), which runs the products
// in order.
func GemmBatch(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int, bt Batch) {
	if bt.Count < 0 {
		panic(fmt.Sprintf("gemm: batch of %d products", bt.Count))
	}
	if !batched(m, n, k, alpha, ldc, bt) {
		for i := range bt.Count {
			ai, bi := a, b
			ai.Off += i * bt.StrideA
			bi.Off += i * bt.StrideB
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
	}, bt)
}

// Gemm16Batch is Gemm16 for each of bt.Count products, as GemmBatch is
// Gemm's: c.Off is the first product's C, and product i's is bt.StrideC
// elements after product i-1's.
func Gemm16Batch(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c Out16, bt Batch) {
	if bt.Count < 0 {
		panic(fmt.Sprintf("gemm: batch of %d products", bt.Count))
	}
	if !batched(m, n, k, alpha, c.LD, bt) || (c.U16 != nil) == (c.F32 != nil) {
		for i := range bt.Count {
			ai, bi, ci := a, b, c
			ai.Off += i * bt.StrideA
			bi.Off += i * bt.StrideB
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
	}, bt)
}

// batched reports whether a batch is shared out among the workers as one
// task: it has two products or more, their C do not overlap, and it is
// large enough to be worth a helper. Otherwise, and for
// the cases Gemm and Gemm16 settle without a product (an empty C, alpha 0,
// k 0) or reject, the products run one after another.
func batched(m, n, k int, alpha float32, ldc int, bt Batch) bool {
	workers := runtime.GOMAXPROCS(0)
	if forceWorkers > 0 {
		workers = forceWorkers
	}
	if workers < 2 || bt.Count < 2 || m <= 0 || n <= 0 || k <= 0 || alpha == 0 || ldc < n {
		return false
	}
	if bt.StrideC < (m-1)*ldc+n {
		return false // overlapping C: the products must run in order
	}
	return forceWorkers > 0 || float64(bt.Count)*float64(m)*float64(n)*float64(k) >= 2*spawnCost
}

// startBatch checks the first and the last product's operands and shares
// the products out among the workers, whole.
func startBatch(j job, bt Batch) {
	last := j
	last.a.Off += (bt.Count - 1) * bt.StrideA
	last.b.Off += (bt.Count - 1) * bt.StrideB
	last.prepare()
	j.prepare()
	workers := runtime.GOMAXPROCS(0)
	if forceWorkers > 0 {
		workers = forceWorkers
	}
	// Whole products when there are enough of them to go round evenly,
	// else column strips of them, about stripsPerWorker per worker.
	per := min(ceilDiv(j.n, j.im.nr), max(1, ceilDiv(stripsPerWorker*workers, bt.Count)))
	if bt.Count >= 2*stripsPerWorker*workers {
		per = 1
	}
	t := &task{j: j, batch: bt, perEntry: per, pieces: bt.Count * per}
	t.left.Store(int64(t.pieces))
	t.done.Add(t.pieces)
	t.finish(workers)
}

// entry returns product i of a batched job.
func (j *job) entry(i int, bt Batch) job {
	e := *j
	e.a.Off += i * bt.StrideA
	e.b.Off += i * bt.StrideB
	if e.narrow == dtype.F32 {
		e.c = j.c[i*bt.StrideC:]
	} else {
		e.out.Off += i * bt.StrideC
	}
	return e
}

// runPiece computes piece i of a batched task: a column strip of one
// product, as a single goroutine's Gemm call would compute it. The strips
// keep a shared op(A) packed (*aPacked) from one to the next when it fits
// their budget, as a parallel Gemm's strips do; *aEntry is the product
// whose op(A) that is.
func (t *task) runPiece(buf *buffers, aPacked *bool, aEntry *int, i int) {
	p, s := i/t.perEntry, i%t.perEntry
	e := t.j.entry(p, t.batch)
	if t.batch.StrideA != 0 && p != *aEntry {
		*aPacked = false
	}
	*aEntry = p
	nt := ceilDiv(e.n, e.im.nr)
	n0 := s * nt / t.perEntry * e.im.nr
	n1 := min(e.n, (s+1)*nt/t.perEntry*e.im.nr)
	if n0 >= n1 {
		return
	}
	if roundUp(e.m, e.im.mr)*e.steps(e.k) <= stripBudget {
		e.runStrip(buf, aPacked, n0, n1)
		return
	}
	*aPacked = false
	e.runRect(buf, 0, e.m, n0, n1)
}
