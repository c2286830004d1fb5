// Package gemm is the CPU backend's single-precision matrix multiply: row-major
// C = alpha*op(A)*op(B) + beta*C with float32 accumulation, where A and B may be
// stored as float32, IEEE binary16 or bfloat16.
//
// It follows the Goto/BLIS design. Panels of op(A) and op(B) are packed into
// contiguous float32 buffers sized for the caches, and the 16-bit operands are
// widened while they are packed, so a half-precision GEMM costs about what a
// float32 one does. A register-tiled micro-kernel multiplies the packed
// panels: AVX-512 (12x32 tile) or AVX2+FMA (6x16) assembly on amd64, chosen
// at init, and a Go 4x4 kernel elsewhere or with the purego build tag. Two
// bfloat16 operands on a CPU with AVX512_BF16 are not widened: they are
// packed as pairs along k and multiplied with VDPBF16PS, twice as fast (see
// README.md; MIXPREC_NO_BF16DOT=1 turns this off). There is no separate path
// for tiny products: measured, the packed path is as fast from 4x4x4 up
// (BenchmarkSmall), and one path keeps the bits uniform.
//
// Results are bitwise reproducible. Work is split over goroutines by rows and
// columns of C only, never along k, and the k blocking depends on k alone, so
// an element's bits depend on its row of op(A), its column of op(B), k, alpha,
// beta and its old value, and not on m, n, GOMAXPROCS or how the work was
// divided. The AVX-512 and AVX2 kernels agree bit for bit; the Go kernel
// rounds products separately instead of fusing them (on amd64) and may differ
// in the last bits, and the native bfloat16 path has bits of its own.
package gemm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mixprec/mixprec/dtype"
)

// Operand is a row-major matrix operand in one of three storage types.
type Operand struct {
	F32  []float32 // set when the storage is float32
	U16  []uint16  // set when the storage is 16-bit (F16 or BF16)
	BF16 bool      // with U16: bfloat16 rather than binary16
	Off  int       // element offset of the first element
	LD   int       // leading dimension (row stride in elements)
}

// Gemm computes C = alpha*op(A)*op(B) + beta*C with C float32 (m x n,
// row-major, ldc), op(A) m x k, op(B) k x n; transA/transB select A^T / B^T as
// in cblas row-major, so A is stored m x k (k x m when transA) and B k x n
// (n x k when transB).
//
// beta == 0 means C is not read (NaNs in C do not propagate), and alpha == 0
// or k == 0 means A and B are not read, as in BLAS. Gemm panics, naming the
// operand and the shapes, when a dimension is negative, a leading dimension is
// too small, an operand is too short or has no (or two) storages. It may
// share the work with helper goroutines (see parallel.go) and returns once
// all of C is written; no helper touches the call's operands after that.
func Gemm(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int) {
	gemm(transA, transB, m, n, k, alpha, a, b, beta, c, ldc, false)
}

// Serial is Gemm on the calling goroutine alone, whatever the product's
// size: for a kernel that shares out many small products itself (fused
// attention, one per batch entry and head) from goroutines that are
// already the machine's cores, where a product's own helpers would only
// queue behind them.
func Serial(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int) {
	gemm(transA, transB, m, n, k, alpha, a, b, beta, c, ldc, true)
}

func gemm(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c []float32, ldc int, serial bool) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	if ldc < max(1, n) {
		panic(fmt.Sprintf("gemm: ldc=%d < max(1, n=%d)", ldc, n))
	}
	if m == 0 || n == 0 {
		return
	}
	if need := (m-1)*ldc + n; len(c) < need {
		panic(fmt.Sprintf("gemm: C is %dx%d with ldc=%d, needs %d elements, has %d", m, n, ldc, need, len(c)))
	}
	if alpha == 0 || k == 0 {
		scaleC(c, m, n, ldc, beta)
		return
	}
	j := job{
		transA: transA, transB: transB,
		m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: c, ldc: ldc,
	}
	if !serial {
		start(j)
		return
	}
	j.prepare()
	buf := bufPool.Get().(*buffers)
	j.runRect(buf, 0, m, 0, n)
	bufPool.Put(buf)
}

// start checks j's operands against its shape and runs it: on the calling
// goroutine, or shared with helpers when grid finds that pays.
func start(j job) (nonFinite bool) {
	j.prepare()
	return run(j)
}

// prepare checks j's operands against its shape and chooses its
// implementation and k blocking.
func (j *job) prepare() {
	m, n, k := j.m, j.n, j.k
	ar, ac := m, k
	if j.transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if j.transB {
		br, bc = n, k
	}
	checkOperand("A", j.a, ar, ac, m, n, k)
	checkOperand("B", j.b, br, bc, m, n, k)
	j.im = implFor(&j.a, &j.b)
	j.kc = blockLen(k, j.im.kc, j.im.kUnit())
	j.staged = j.narrow == dtype.F32 && j.im.tiles && j.ldc%1024 == 0 && k > j.kc && m*n > stageMin
}

// run computes the prepared j, as start does, and reports whether
// j.out.Unscale met an Inf or NaN.
func run(j job) (nonFinite bool) {
	m, n, k := j.m, j.n, j.k
	pm, pn := grid(m, n, k, j.im.mr, j.im.nr)
	if pm*pn > 1 {
		return j.parallel(pm*pn, pm, pn) // a copy: only this path puts the job on the heap
	}
	buf := bufPool.Get().(*buffers)
	j.runRect(buf, 0, m, 0, n)
	bufPool.Put(buf)
	return j.nonFinite != 0
}

// Sgemm is Gemm for float32 operands with offset 0, in the argument order of
// cblas_sgemm (row-major).
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	Gemm(transA, transB, m, n, k, alpha, Operand{F32: a, LD: lda}, Operand{F32: b, LD: ldb}, beta, c, ldc)
}

// Out16 is a 16-bit C for Gemm16: binary16, or bfloat16 when BF16, row-major
// from Off with leading dimension LD, stored in U16, or in F32 as the
// float32 values of the 16-bit results (each rounded once to 16 bits and
// widened back, exactly). Exactly one of U16 and F32 is set. With F32 a
// product whose result a float32 consumer takes next (the weight gradient
// of a mixed-precision step, widened into the parameter's float32
// gradient) has that value without a 16-bit array and a widening pass
// over it; when beta reads C, its float32 values are read as they are.
//
// Unscale, when not 0 (with F32 only, beta 0 and a single product), also
// multiplies each widened result by it before it is stored: the loss
// scaler's unscaling of a weight gradient, without a later pass over
// memory. The binary16 main tiles do it in registers (impl.tileUnscale),
// other tiles just after their store, while the lines are in L1. The bits
// are those of the plain store followed by Unscale over C, and Gemm16 then
// reports whether any unscaled result is Inf or NaN.
type Out16 struct {
	U16     []uint16
	F32     []float32
	BF16    bool
	Off     int
	LD      int
	Unscale float32
}

// len is how many elements C's storage has.
func (c *Out16) len() int { return len(c.U16) + len(c.F32) }

// Gemm16 is Gemm with a 16-bit C: it computes C = round(alpha*op(A)*op(B) +
// beta*C) with the same float32 accumulation. The float32 C is never whole:
// each goroutine accumulates the column block it computes (its rows, at
// most nc columns) in a buffer of its own, which stays in its core's cache
// from one block to the next, widening C's old values into it when beta
// reads them. Each micro-tile is rounded into C as soon as its last k
// block is done, while the tile is in L1. So a 16-bit C costs no separate
// pass over memory, and C's memory sees only the 16-bit stores: half the
// bytes of a float32 C, and no shared float32 copy whose lines move between
// cores (on a 2-vCPU virtual machine, rounding whole blocks of a shared
// m x n copy made the MLP's 16-bit products 10-35% slower than float32
// ones; now they are within a few percent, BenchmarkGemm16). The bits are
// those of widening C, calling Gemm on the float32 copy and rounding it
// once.
func Gemm16(transA, transB bool, m, n, k int, alpha float32, a, b Operand, beta float32, c Out16) (nonFinite bool) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
	if m == 0 || n == 0 {
		return false
	}
	if (c.U16 != nil) == (c.F32 != nil) {
		panic("gemm: exactly one of a 16-bit C's U16 and F32 must be set")
	}
	if c.Unscale != 0 && (c.F32 == nil || beta != 0) {
		panic(fmt.Sprintf("gemm: Unscale %v needs a C stored in F32 and beta 0 (beta %v)", c.Unscale, beta))
	}
	if c.LD < n || c.Off < 0 || c.len() < c.Off+(m-1)*c.LD+n {
		panic(fmt.Sprintf("gemm: 16-bit C is %dx%d with LD=%d Off=%d, has %d elements", m, n, c.LD, c.Off, c.len()))
	}
	dt := dtype.F16
	if c.BF16 {
		dt = dtype.BF16
	}
	if alpha == 0 || k == 0 {
		buf := bufPool.Get().(*buffers)
		row := buf.get(&buf.c, n)
		bits := buf.get16(n)
		for i := 0; i < m; i++ {
			at := c.Off + i*c.LD
			switch {
			case beta == 0:
			case c.F32 != nil:
				copy(row, c.F32[at:at+n])
			default:
				dtype.Decode(dt, row, c.U16[at:at+n])
			}
			scaleC(row, 1, n, n, beta)
			if c.F32 != nil {
				dtype.Encode(dt, bits, row)
				dtype.Decode(dt, c.F32[at:at+n], bits)
				if c.Unscale != 0 && Unscale(c.F32[at:at+n], c.Unscale) {
					nonFinite = true
				}
			} else {
				dtype.Encode(dt, c.U16[at:at+n], row)
			}
		}
		bufPool.Put(buf)
		return nonFinite
	}
	return start(job{
		transA: transA, transB: transB,
		m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, out: c, narrow: dt,
	})
}

// block returns where the float32 C's block of rows m0..m1-1 and columns
// jc..jc+ncur-1 lives while a goroutine computes it: C itself, or with a
// 16-bit C the goroutine's own buffer, which holds just that block. c
// starts at element (m0, jc) and rows are ldc apart.
//
// A float32 C is staged in the buffer too when the AMX kernel would load
// and store its tiles with a stride of a multiple of 4 KiB (j.staged): the
// 32 rows of a tile then fall into one set of the L1 cache, which holds 12
// lines, and a 1024^3 product ran its kernel at 0.9-1.0 TFLOP/s a core
// against 2.0-2.8 with rows 1056 floats apart. Staging pays only where
// later k blocks load C's tiles back and C is larger than the L2 cache
// (stageMin); elsewhere its copy costs more than the aliasing (see
// stageMin). The buffer's rows are
// ncur rounded up to 16 floats, plus 16 when that is a multiple of 256
// (1 KiB).
func (j *job) block(buf *buffers, m0, m1, jc, ncur int) (c []float32, ldc int) {
	if j.narrow == dtype.F32 && !j.staged {
		return j.c[m0*j.ldc+jc:], j.ldc
	}
	ldc = ncur
	if j.im.tiles {
		ldc = roundUp(ncur, 16)
		if ldc%256 == 0 {
			ldc += 16
		}
	}
	return buf.get(&buf.c, (m1-m0)*ldc), ldc
}

// stageMin is the size of C, in floats, above which a C with aliasing rows
// is staged (job.block). BF16 products on one core of an AMX Xeon with 2
// MiB of L2, staged against not (µs): m x 1024 x 1024 with m = 128: 424-458
// against 420-430, m = 256: 647-686 against 680-683, m = 512: 1,132-1,151
// against 1,398-1,440, m = 1024: 2,080-2,093 against 2,589-2,720; with a
// single k block, 1024 x 1024 x 64: 529-541 against 351-352, and 144 x
// 1024 x 16 (a ResNet-20 convolution's input gradient): 39.5-39.8 against
// 28.8-28.9. A variable so that the tests can stage small products.
var stageMin = 1 << 18

// unstage copies a staged float32 C's block (rows ic.., columns jc..) from
// c back into C after its last k block.
func (j *job) unstage(c []float32, ldc, ic, mcur, jc, ncur int) {
	if !j.staged {
		return
	}
	for i := range mcur {
		copy(j.c[(ic+i)*j.ldc+jc:(ic+i)*j.ldc+jc+ncur], c[i*ldc:i*ldc+ncur])
	}
}

// widen loads the 16-bit or staged C's block (rows ic.., columns jc..)
// into c, the float32 C at that block, before the block's first k block,
// when beta reads it.
func (j *job) widen(c []float32, ldc, ic, mcur, jc, ncur int) {
	if j.narrow == dtype.F32 && !j.staged || j.beta == 0 {
		return
	}
	if j.staged {
		for i := range mcur {
			copy(c[i*ldc:i*ldc+ncur], j.c[(ic+i)*j.ldc+jc:])
		}
		return
	}
	at := j.out.Off + ic*j.out.LD + jc
	if j.out.F32 != nil {
		for i := range mcur {
			copy(c[i*ldc:i*ldc+ncur], j.out.F32[at+i*j.out.LD:])
		}
		return
	}
	dtype.DecodeRows(j.narrow, c, ldc, j.out.U16[at:], j.out.LD, mcur, ncur)
}

// rounded returns the offset in the 16-bit C's storage of its element
// (ic, jc) when the k block that ends at kend is the last (the macro then
// rounds each finished tile into C), else -1.
func (j *job) rounded(kend, ic, jc int) int {
	if j.narrow == dtype.F32 || kend < j.k {
		return -1
	}
	return j.out.Off + ic*j.out.LD + jc
}

// checkOperand panics unless op can be read as a rows x cols matrix. The
// message is only formatted on failure: Gemm must not allocate.
func checkOperand(name string, op Operand, rows, cols, m, n, k int) {
	fail := func(format string, args ...any) {
		shape := fmt.Sprintf("gemm(m=%d n=%d k=%d): %s stored %dx%d", m, n, k, name, rows, cols)
		panic(shape + fmt.Sprintf(format, args...))
	}
	if (op.F32 != nil) == (op.U16 != nil) {
		fail(": exactly one of F32 and U16 must be set")
	}
	if op.LD < max(1, cols) {
		fail(": LD=%d < max(1, %d)", op.LD, cols)
	}
	if op.Off < 0 {
		fail(": negative Off=%d", op.Off)
	}
	have := len(op.F32) + len(op.U16)
	if need := op.Off + (rows-1)*op.LD + cols; have < need {
		fail(" with LD=%d Off=%d: needs %d elements, has %d", op.LD, op.Off, need, have)
	}
}

// scaleC sets C = beta*C, with beta == 0 writing zeros without reading C.
func scaleC(c []float32, m, n, ldc int, beta float32) {
	if beta == 1 {
		return
	}
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// forceWorkers, when positive, makes Gemm use that many goroutines (as far as
// C has micro-tiles to give them) whatever the cost model says; the tests use
// it to run more goroutines than there are cores and show that the result
// does not change.
var forceWorkers int

// The cost model of grid, in units of one multiply-add of the micro-kernel
// (about 0.005-0.01 ns on one core). Packing an element (a load, maybe a
// widening, a shuffle, a store) takes 0.05-0.15 ns, so packCost is a
// generous average. Starting and joining a goroutine costs about spawnCost,
// a microsecond or two, paid serially by the caller.
const (
	packCost  = 16
	spawnCost = 1 << 17
)

// grid chooses how to split C among goroutines: a pm x pn grid of
// rectangles, at most GOMAXPROCS of them. Each rectangle packs its own rows
// of op(A) and columns of op(B), so more rectangles mean more packing in
// total as well as less work each; grid minimises the estimated time of the
// largest rectangle, k·(rows·cols + packCost·(rows+cols)), plus the goroutine
// starts. Small products (a few hundred thousand multiply-adds) stay on the
// calling goroutine.
func grid(m, n, k, mr, nr int) (pm, pn int) {
	if forceWorkers > 0 {
		return split(m, n, k, mr, nr, forceWorkers, 0)
	}
	return split(m, n, k, mr, nr, runtime.GOMAXPROCS(0), spawnCost)
}

// split is grid for at most p rectangles, each goroutine start costing
// spawn. With spawn == 0 it uses as many rectangles as the tiles allow.
func split(m, n, k, mr, nr, p, spawn int) (pm, pn int) {
	mt, nt := ceilDiv(m, mr), ceilDiv(n, nr)
	pm, pn = 1, 1
	best := -1.0
	for i := 1; i <= min(p, mt); i++ {
		for j := 1; j <= min(p/i, nt); j++ {
			// float64: the products overflow a 32-bit int.
			rows := float64(ceilDiv(mt, i) * mr)
			cols := float64(ceilDiv(nt, j) * nr)
			cost := float64(k)*(rows*cols+packCost*(rows+cols)) + float64(spawn*(i*j-1))
			if best < 0 || cost < best {
				best, pm, pn = cost, i, j
			}
		}
	}
	return pm, pn
}

// job is one Gemm call; runRect computes one rectangle of its C.
type job struct {
	im             *impl
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b           Operand
	c              []float32
	ldc            int
	kc             int  // k block length: a function of k alone, for reproducibility
	staged         bool // a float32 C computed in a buffer (see block)

	// With a 16-bit C (Gemm16), c is float32 scratch and each finished
	// block is rounded into out; narrow is out's dtype, F32 otherwise.
	out    Out16
	narrow dtype.DType

	nonFinite uint32 // set (atomically) when out.Unscale met an Inf or NaN
}

// steps is how many kernel steps kcur values of k take: kcur, or pairs of
// them for a dot implementation. Blocks of kc (even) sum to steps(k).
func (j *job) steps(kcur int) int {
	switch {
	case j.im.tiles:
		return roundUp(ceilDiv(kcur, 2), 16)
	case j.im.pairs:
		return ceilDiv(kcur, 2)
	}
	return kcur
}

// packA and packB pack a block of op(A) (rows p0.., k q0..) or op(B) (columns
// p0.., k q0..) for the kernels. Element (p, q) of a panel, p along m (or n)
// and q along k, lives at Off + p*sp + q*sq of the storage, and copy mode
// means p is the contiguous direction. They branch rather than hold a
// method value: a call through one would make the job escape, and Gemm
// allocate.
func (j *job) packA(buf *buffers, dst []float32, p0, np, q0, nq int) {
	copyMode, sp, sq := false, j.a.LD, 1
	if j.transA {
		copyMode, sp, sq = true, 1, j.a.LD
	}
	if j.im.tiles {
		j.im.packTiles(buf, dst, &j.a, copyMode, sp, sq, p0, np, q0, nq, j.im.mr, j.steps(nq))
		return
	}
	if j.im.pairs {
		j.im.packPairs(dst, &j.a, copyMode, sp, sq, p0, np, q0, nq, j.im.mr, j.steps(nq))
		return
	}
	j.im.pack(dst, &j.a, copyMode, sp, sq, p0, np, q0, nq, j.im.mr)
}

func (j *job) packB(buf *buffers, dst []float32, p0, np, q0, nq int) {
	copyMode, sp, sq := true, 1, j.b.LD
	if j.transB {
		copyMode, sp, sq = false, j.b.LD, 1
	}
	if j.im.tiles {
		// The dot kernels' layout (a pair's 32 columns contiguous), the
		// pairs past the data zero up to a whole tile's 16.
		nr, steps := j.im.nr, j.steps(nq)
		j.im.packPairs(dst, &j.b, copyMode, sp, sq, p0, np, q0, nq, nr, steps)
		if used := ceilDiv(nq, 2); used < steps {
			for pp := 0; pp < np; pp += nr {
				clear(dst[pp*steps+used*nr : pp*steps+steps*nr])
			}
		}
		return
	}
	if j.im.pairs {
		j.im.packPairs(dst, &j.b, copyMode, sp, sq, p0, np, q0, nq, j.im.nr, j.steps(nq))
		return
	}
	j.im.pack(dst, &j.b, copyMode, sp, sq, p0, np, q0, nq, j.im.nr)
}

// runRect computes C[m0:m1, n0:n1] with the classic five loops: n in blocks
// of nc (packed B stays in L3), k in blocks of kc, m in blocks of mc (packed A
// stays in L2), then micro-tiles nr wide and mr high.
func (j *job) runRect(buf *buffers, m0, m1, n0, n1 int) {
	im := j.im
	mr, nr := im.mr, im.nr
	mc := blockLen(m1-m0, im.mc, mr)
	nc := blockLen(n1-n0, im.nc, nr)
	kc := j.kc
	pa := buf.get(&buf.a, roundUp(mc, mr)*j.steps(kc))
	pb := buf.get(&buf.b, roundUp(nc, nr)*j.steps(kc))
	tmp := buf.get(&buf.tmp, mr*nr)
	bits := j.bits(buf)
	for jc := n0; jc < n1; jc += nc {
		ncur := min(nc, n1-jc)
		cb, ldc := j.block(buf, m0, m1, jc, ncur)
		for pc := 0; pc < j.k; pc += kc {
			kcur := min(kc, j.k-pc)
			beta := j.beta
			if pc > 0 {
				beta = 1 // later k blocks add onto what the first one stored
			}
			j.packB(buf, pb, jc, ncur, pc, kcur)
			for ic := m0; ic < m1; ic += mc {
				mcur := min(mc, m1-ic)
				c := cb[(ic-m0)*ldc:]
				j.packA(buf, pa, ic, mcur, pc, kcur)
				if pc == 0 {
					j.widen(c, ldc, ic, mcur, jc, ncur)
				}
				if j.macro(pa, pb, tmp, c, ldc, mcur, ncur, j.steps(kcur), beta, j.rounded(pc+kcur, ic, jc), bits) {
					atomic.StoreUint32(&j.nonFinite, 1) // Out16.Unscale met an Inf or NaN
				}
				if pc+kcur == j.k {
					j.unstage(c, ldc, ic, mcur, jc, ncur)
				}
			}
		}
	}
}

// runStrip computes the column strip C[:, n0:n1] as runRect would, but
// keeps all of op(A) packed in buf.a: block (pc, ic) at offset
// roundUp(m, mr)*steps(pc) + ic*steps(kcur). *aPacked says whether buf.a
// already holds it for this job; the first strip a worker takes packs it,
// block by block as the loops first need them.
func (j *job) runStrip(buf *buffers, aPacked *bool, n0, n1 int) {
	im := j.im
	mr, nr := im.mr, im.nr
	mc := blockLen(j.m, im.mc, mr)
	nc := blockLen(n1-n0, im.nc, nr)
	kc := j.kc
	mp := roundUp(j.m, mr)
	pa := buf.get(&buf.a, mp*j.steps(j.k))
	pb := buf.get(&buf.b, roundUp(nc, nr)*j.steps(kc))
	tmp := buf.get(&buf.tmp, mr*nr)
	bits := j.bits(buf)
	for jc := n0; jc < n1; jc += nc {
		ncur := min(nc, n1-jc)
		cb, ldc := j.block(buf, 0, j.m, jc, ncur)
		for pc := 0; pc < j.k; pc += kc {
			kcur := min(kc, j.k-pc)
			steps := j.steps(kcur)
			block := pa[mp*j.steps(pc):]
			beta := j.beta
			if pc > 0 {
				beta = 1
			}
			j.packB(buf, pb, jc, ncur, pc, kcur)
			for ic := 0; ic < j.m; ic += mc {
				mcur := min(mc, j.m-ic)
				c := cb[ic*ldc:]
				if !*aPacked {
					j.packA(buf, block[ic*steps:], ic, mcur, pc, kcur)
				}
				if pc == 0 {
					j.widen(c, ldc, ic, mcur, jc, ncur)
				}
				if j.macro(block[ic*steps:], pb, tmp, c, ldc, mcur, ncur, steps, beta, j.rounded(pc+kcur, ic, jc), bits) {
					atomic.StoreUint32(&j.nonFinite, 1)
				}
				if pc+kcur == j.k {
					j.unstage(c, ldc, ic, mcur, jc, ncur)
				}
			}
		}
		*aPacked = true
	}
}

// macro runs the micro-kernels over one packed mc x kc block of A and kc x nc
// block of B. Full tiles are written in place. An edge tile goes to the
// smallest edge kernel that covers it, in place when it fits exactly, else
// into tmp (the packed panels are zero-padded), whose valid part is merged
// into C with the same roundings the kernels use. c is the float32 C at the
// block's first element, with rows ldc apart. out >= 0 is the offset of the
// same element in the 16-bit C's storage: this is the last k block, and
// each tile is rounded into C once computed (through bits, an mr x nr
// scratch tile, when C is stored widened in F32).
func (j *job) macro(pa, pb, tmp, c []float32, ldc, mcur, ncur, kc int, beta float32, out int, bits []uint16) (nonFinite bool) {
	im := j.im
	mr, nr := im.mr, im.nr
	ld := j.out.LD
	inv := j.out.Unscale
	for jr := 0; jr < ncur; jr += nr {
		nv := min(nr, ncur-jr)
		bp := pb[jr*kc : jr*kc+nr*kc]
		ir := 0
		if im.run != nil && nv == nr && mcur >= mr {
			// A column of full tiles in one call (see impl.run). When C
			// is 16-bit they are rounded afterwards, as j.tile's are, or
			// by the kernel as each is done where it can (impl.runRound).
			n := mcur / mr
			ir = n * mr
			switch {
			case out >= 0 && j.roundsInKernel(beta) && j.out.F32 != nil:
				im.runRoundW(kc, pa[:n*mr*kc], bp, c[jr:], ldc, beta, n, j.out.F32[out+jr:], ld)
			case out >= 0 && j.roundsInKernel(beta):
				im.runRound(kc, pa[:n*mr*kc], bp, c[jr:], ldc, beta, n, j.out.U16[out+jr:], ld)
			case out >= 0:
				im.run(kc, pa[:n*mr*kc], bp, c[jr:], ldc, j.alpha, beta, n)
				j.round(c[jr:], ldc, out+jr, ir, nr, bits)
				nonFinite = j.unscale(out+jr, ir, nr) || nonFinite
			default:
				im.run(kc, pa[:n*mr*kc], bp, c[jr:], ldc, j.alpha, beta, n)
			}
		}
		for ; ir < mcur; ir += mr {
			mv := min(mr, mcur-ir)
			ap := pa[ir*kc : ir*kc+mr*kc]
			off := ir*ldc + jr
			if out < 0 {
				j.tile(ap, bp, tmp, c[off:], ldc, mv, nv, kc, beta)
				continue
			}
			at := out + ir*ld + jr
			full := mv == mr && nv == nr
			half, wide := im.tileHalf, im.tileWide
			if j.narrow == dtype.BF16 {
				half, wide = im.tileBF16, im.tileBF16Wide
			}
			if full && j.out.F32 != nil && inv != 0 && im.tileUnscale != nil && j.narrow == dtype.F16 {
				nonFinite = im.tileUnscale(kc, ap, bp, c[off:], ldc, j.alpha, beta, j.out.F32[at:], ld, inv) || nonFinite
				continue
			}
			if full && j.out.F32 != nil && wide != nil {
				wide(kc, ap, bp, c[off:], ldc, j.alpha, beta, j.out.F32[at:], ld)
				nonFinite = j.unscale(at, mr, nr) || nonFinite
				continue
			}
			if full && half != nil {
				dst, ldd := bits, nr // the scratch tile when C is stored in F32
				if j.out.F32 == nil {
					dst, ldd = j.out.U16[at:], ld
				}
				half(kc, ap, bp, c[off:], ldc, j.alpha, beta, dst, ldd)
				if j.out.F32 != nil {
					dtype.DecodeRows(j.narrow, j.out.F32[at:], ld, bits, nr, mr, nr)
					nonFinite = j.unscale(at, mr, nr) || nonFinite
				}
				continue
			}
			j.tile(ap, bp, tmp, c[off:], ldc, mv, nv, kc, beta)
			j.round(c[off:], ldc, at, mv, nv, bits)
			nonFinite = j.unscale(at, mv, nv) || nonFinite
		}
	}
	return nonFinite
}

// roundsInKernel reports whether impl.runRound (runRoundW for a C kept in
// float32) stores the 16-bit C of the last k block: a bfloat16 C, not
// unscaled, alpha 1 and beta 0 or 1.
func (j *job) roundsInKernel(beta float32) bool {
	if j.narrow != dtype.BF16 || j.alpha != 1 || (beta != 0 && beta != 1) {
		return false
	}
	if j.out.F32 != nil {
		return j.im.runRoundW != nil && j.out.Unscale == 0
	}
	return j.im.runRound != nil
}

// round stores rows x cols of the float32 C at c (rows ldc apart) into the
// 16-bit C at offset at, rounded to j.narrow, as macro stores what no kernel
// rounded: directly into U16, or through bits (at most mr x nr at a time)
// when C is stored widened in F32.
func (j *job) round(c []float32, ldc, at, rows, cols int, bits []uint16) {
	nr, ld := j.im.nr, j.out.LD
	if j.out.F32 == nil {
		dtype.EncodeRows(j.narrow, j.out.U16[at:], ld, c, ldc, rows, cols)
		return
	}
	mr := j.im.mr
	for ir := 0; ir < rows; ir += mr {
		h := min(mr, rows-ir)
		dtype.EncodeRows(j.narrow, bits, nr, c[ir*ldc:], ldc, h, cols)
		dtype.DecodeRows(j.narrow, j.out.F32[at+ir*ld:], ld, bits, nr, h, cols)
	}
}

// tile computes one mv x nv tile of C at c.
func (j *job) tile(ap, bp, tmp, c []float32, ldc, mv, nv, kc int, beta float32) {
	im := j.im
	mr, nr := im.mr, im.nr
	if mv == mr && nv == nr {
		im.tile(kc, ap, bp, c, ldc, j.alpha, beta)
		return
	}
	if im.tiles {
		// The AMX kernel may start from C's old value (see genAMX), so
		// an edge tile runs on a copy of its part of C with the same
		// alpha and beta: a full tile's bits.
		if beta != 0 {
			for i := 0; i < mv; i++ {
				copy(tmp[i*nr:i*nr+nv], c[i*ldc:i*ldc+nv])
			}
		}
		im.tile(kc, ap, bp, tmp, nr, j.alpha, beta)
		for i := 0; i < mv; i++ {
			copy(c[i*ldc:i*ldc+nv], tmp[i*nr:i*nr+nv])
		}
		return
	}
	tile, tm, tn := im.tile, mr, nr
	if im.edge != nil {
		ri, ci := 0, 0
		for im.rows[ri] < mv {
			ri++
		}
		for im.cols[ci] < nv {
			ci++
		}
		tile, tm, tn = im.edge[ri][ci], im.rows[ri], im.cols[ci]
	}
	if tm == mv && tn == nv {
		tile(kc, ap, bp, c, ldc, j.alpha, beta)
		return
	}
	tile(kc, ap, bp, tmp, nr, 1, 0)
	mergeTile(c, ldc, tmp, nr, mv, nv, j.alpha, beta)
}

// mergeTile sets c = alpha*t + beta*c on an mv x nv tile, rounding each
// product before the sum exactly as the assembly kernels do, so that an
// element's bits do not depend on whether it fell in a full or an edge tile.
// The explicit float32 conversions forbid the compiler to fuse them.
func mergeTile(c []float32, ldc int, t []float32, ldt, mv, nv int, alpha, beta float32) {
	for i := 0; i < mv; i++ {
		crow := c[i*ldc : i*ldc+nv]
		trow := t[i*ldt : i*ldt+nv]
		if beta == 0 {
			for x, v := range trow {
				crow[x] = alpha * v
			}
			continue
		}
		for x, v := range trow {
			crow[x] = float32(alpha*v) + float32(beta*crow[x])
		}
	}
}

// pack writes op's elements p in [p0, p0+np), q in [q0, q0+nq) as
// ceil(np/r) panels of nq x r floats (q-major), zero-padding the last panel.
// Element (p, q) is at op.Off + p*sp + q*sq; in copy mode p is the contiguous
// direction (sp == 1) and a panel row is a copy, otherwise q is (sq == 1) and
// the panel is a transpose. 16-bit elements are widened on the way.
func (im *impl) pack(dst []float32, op *Operand, copyMode bool, sp, sq, p0, np, q0, nq, r int) {
	for pp := 0; pp < np; pp += r {
		w := min(r, np-pp)
		d := dst[pp*nq : pp*nq+r*nq]
		base := op.Off + (p0+pp)*sp + q0*sq
		switch {
		case copyMode && op.F32 != nil:
			im.copy2D(d, r, op.F32[base:], sq, nq, w)
		case copyMode:
			im.cvt2D(d, r, op.U16[base:], sq, nq, w, op.BF16)
		case op.F32 != nil:
			im.transpose(d, r, op.F32[base:], sp, w, nq)
		default:
			im.transpose16(d, r, op.U16[base:], sp, w, nq, op.BF16)
		}
		if w < r {
			for q := 0; q < nq; q++ {
				clear(d[q*r+w : q*r+r])
			}
		}
	}
}

// packPairs is pack for a dot implementation (im.pairs): two bfloat16
// operands, whose panels hold ceil(nq/2) steps of r pairs, element (p, q)
// in the low half of pair (q-q0)/2 when q-q0 is even, the high half when
// odd. q0 is even (kc is), so pairs are (0,1), (2,3), ... of k whatever the
// blocking, and an odd nq pairs the last k with a zero. Both operands pad
// so, and the padding adds 0·0: nothing past the matrices is read, and an
// infinity in them never meets a zero of the padding.
func (im *impl) packPairs(dst []float32, op *Operand, copyMode bool, sp, sq, p0, np, q0, nq, r, steps int) {
	full, used := nq/2, ceilDiv(nq, 2)
	for pp := 0; pp < np; pp += r {
		w := min(r, np-pp)
		d := dst[pp*steps : pp*steps+r*steps]
		base := op.Off + (p0+pp)*sp + q0*sq
		src := op.U16[base:]
		if copyMode {
			// p is contiguous: a k row of the panel is a row of src.
			im.zip(d, r, src, sq, full, w)
		} else {
			// q is contiguous: pairs are 32-bit words of src's rows.
			im.trPairs(d, r, src, sp, w, full)
		}
		if used > full {
			last := words(d[full*r : full*r+w])
			for x := range last {
				last[x] = uint32(src[x*sp+(nq-1)*sq])
			}
		}
		if w < r {
			for q := 0; q < used; q++ {
				clear(d[q*r+w : q*r+r])
			}
		}
	}
}

// packTiles is packPairs for op(A) of an AMX implementation (im.tiles).
// Its micro-panels hold 32 rows by steps pairs of k as 2*steps/16 tiles of
// 16x16 32-bit words, each 1 KiB and contiguous: tile (g, h) covers pairs
// 16g..16g+15 and rows 16h..16h+15, at words (2g+h)*256, row-major (a
// row's 16 pairs contiguous: what TDPBF16PS takes as its first source).
// The pairs past ceil(nq/2) and the rows past np are zero. Contiguous tiles
// load as 16 consecutive cache lines; rows of a longer panel a power of two
// apart fell into few cache sets. A tile is a copy of 16 row pieces when k
// is contiguous in op's storage, else zip's tile transposed (buf.z holds
// it). op(B) is packed as for the dot kernels (see packB).
func (im *impl) packTiles(buf *buffers, dst []float32, op *Operand, copyMode bool, sp, sq, p0, np, q0, nq, r, steps int) {
	full, used := nq/2, ceilDiv(nq, 2)
	z := buf.get(&buf.z, 256)
	for pp := 0; pp < np; pp += r {
		w := min(r, np-pp)
		d := dst[pp*steps : pp*steps+r*steps]
		g0 := 0
		if !copyMode && w == r && im.tileRows != nil {
			g0 = min(full/16, steps/16)
			im.tileRows(d, op.U16[op.Off+(p0+pp)*sp+q0:], sp, g0)
		}
		for g := g0; g < steps/16; g++ {
			pf := min(max(full-16*g, 0), 16) // full pairs in this tile
			pu := min(max(used-16*g, 0), 16) // pairs with data
			for h := range 2 {
				t := d[(2*g+h)*256 : (2*g+h+1)*256]
				wh := min(max(w-16*h, 0), 16)
				if pu == 0 || wh == 0 {
					clear(t)
					continue
				}
				src := op.U16[op.Off+(p0+pp+16*h)*sp+(q0+32*g)*sq:]
				if !copyMode {
					// k contiguous: each row's pairs are a copy.
					hv := halves(t)
					for x := 0; x < wh; x++ {
						row := hv[32*x : 32*x+32]
						copy(row, src[x*sp:x*sp+2*pf])
						if pu > pf {
							row[2*pf] = src[x*sp+(nq-1-32*g)]
						}
						clear(row[2*pu:])
					}
					clear(t[16*wh:])
					continue
				}
				// The tile pair-major in z (zip), then transposed into t.
				im.zip(z, 16, src, sq, pf, wh)
				if pu > pf {
					last := words(z[16*pf : 16*pf+wh])
					for x := range last {
						last[x] = uint32(src[x*sp+(nq-1-32*g)*sq])
					}
				}
				for q := 0; q < pu; q++ {
					clear(z[16*q+wh : 16*q+16])
				}
				clear(z[16*pu:])
				im.transpose(t, 16, z, 16, 16, 16)
			}
		}
	}
}

// buffers are one worker's packing buffers. They live in a sync.Pool so that
// a training loop calling Gemm with the same shapes does not allocate.
type buffers struct {
	a, b, tmp []float32
	z         []float32 // an AMX A panel's pairs before they are transposed into rows
	c         []float32 // a 16-bit C's float32 block (Gemm16)
	bits      []uint16  // a rounded tile of a 16-bit C stored in F32, or a row
}

// get16 returns bits[:n], reallocating when too small.
func (b *buffers) get16(n int) []uint16 {
	if cap(b.bits) < n {
		b.bits = make([]uint16, n)
	}
	return b.bits[:n]
}

// bits is the scratch tile through which a 16-bit C stored in F32 is
// rounded: nil for any other C.
func (j *job) bits(buf *buffers) []uint16 {
	if j.out.F32 == nil {
		return nil
	}
	return buf.get16(j.im.mr * j.im.nr)
}

var bufPool = sync.Pool{New: func() any { return new(buffers) }}

// get returns (*s)[:n], reallocating when too small. The slice starts on a
// 64-byte boundary so that the kernels' full-vector loads of packed B never
// straddle cache lines.
func (*buffers) get(s *[]float32, n int) []float32 {
	if cap(*s) < n {
		const align = 64 / 4
		raw := make([]float32, n+align)
		skip := int(uintptr(unsafe.Pointer(&raw[0]))%64) / 4
		if skip != 0 {
			skip = align - skip
		}
		*s = raw[skip : skip+n : skip+n]
	}
	return (*s)[:n]
}

// blockLen splits n into the fewest blocks of at most limit and returns the
// block length, rounded up to a multiple of unit: equal blocks avoid a short,
// inefficient last one (k = 784 with limit 256 and unit 8 becomes 3 x 200 +
// 184 rather than 3 x 256 + 16).
func blockLen(n, limit, unit int) int {
	if n <= 0 {
		return unit
	}
	nb := ceilDiv(n, limit)
	return min(roundUp(ceilDiv(n, nb), unit), roundUp(limit, unit))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func roundUp(a, b int) int { return ceilDiv(a, b) * b }
