package cudaops

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Gemm computes dst = Alpha*op(a)*op(b) + Beta*dst for each batch entry
// with cuBLAS (or mixprec's own kernel where Open found no cuBLAS),
// accumulating in float32.
//
// cuBLAS is column-major; a row-major C = A*B is the column-major
// C^T = B^T*A^T, so the operands swap and the transposes stay with them.
// cublasGemmEx takes both inputs in one dtype and C in that dtype or F32:
// inputs of different dtypes are widened to F32 first (exactly), and a
// result dtype cuBLAS cannot write for those inputs (an F32 product into
// F16, F16 inputs into BF16), or a 16-bit C that Beta makes an input too,
// goes through an F32 temporary, rounded once on the way out. Temporaries
// come from the allocator's cache and are not accounted, as the CPU
// backend's scratch memory is not.
func (d *Device) Gemm(dst, a, b device.Buffer, p device.GemmParams) {
	d.enter()
	defer d.leave()
	cb, ab, bb := d.buf(dst, "Gemm"), d.buf(a, "Gemm"), d.buf(b, "Gemm")
	nb := p.Batches()
	m, n, k := p.M, p.N, p.K
	last := func(off, stride, size int) int { return off + (nb-1)*stride + size }
	if m < 0 || n < 0 || k < 0 || p.Batch < 0 || p.OffA < 0 || p.OffB < 0 || p.OffC < 0 ||
		p.StrideA < 0 || p.StrideB < 0 || p.StrideC < 0 ||
		last(p.OffA, p.StrideA, m*k) > ab.Len() || last(p.OffB, p.StrideB, k*n) > bb.Len() || last(p.OffC, p.StrideC, m*n) > cb.Len() {
		panic(fmt.Sprintf("cudaops: Gemm %+v out of range of buffers a[%d] b[%d] c[%d]", p, ab.Len(), bb.Len(), cb.Len()))
	}
	if m == 0 || n == 0 {
		return
	}
	if nb > 1 && p.StrideC == 0 && k > 0 && p.Alpha != 0 {
		d.gemmFold(cb, ab, bb, p)
		return
	}
	if nb > 1 && p.StrideC < m*n {
		// Batch entries of C overlap (a shared C accumulating): the CPU
		// runs them in order, and so must we, one call each; a batched
		// cuBLAS call would race on C.
		q := p
		q.Batch = 1
		for i := range nb {
			q.OffA, q.OffB, q.OffC = p.OffA+i*p.StrideA, p.OffB+i*p.StrideB, p.OffC+i*p.StrideC
			d.gemm(cb, ab, bb, q)
		}
		return
	}
	d.gemm(cb, ab, bb, p)
}

// foldFloats bounds gemmFold's temporary: products of at most this many
// floats (32 MiB) at a time.
const foldFloats = 8 << 20

// gemmFold is Gemm for batch entries that share one C (StrideC 0), as a
// convolution's weight gradient sums its images' products: a call per
// entry, in order, was 127 launches per convolution at batch 128 and most
// of a ResNet-20 step on the H200. The products go into an F32 temporary
// in one batched call, as many entries at a time as foldFloats allows, and
// mp_gemm_fold adds them into C in order, rounding to C's dtype after each
// as the calls would (c = product + Beta*c, the product alone when Beta is
// 0). Deterministic; each product's own sum is cuBLAS's.
func (d *Device) gemmFold(cb, ab, bb *Buffer, p device.GemmParams) {
	mn := p.M * p.N
	group := max(1, min(p.Batches(), foldFloats/mn))
	t := d.scratch(group * mn)
	defer d.unscratch(t)
	for e0 := 0; e0 < p.Batches(); e0 += group {
		q := p
		q.Batch = min(group, p.Batches()-e0)
		q.OffA, q.OffB = p.OffA+e0*p.StrideA, p.OffB+e0*p.StrideB
		q.OffC, q.StrideC, q.Beta = 0, mn, 0
		d.gemm(t, ab, bb, q)
		d.launch(d.ks.gemmFold, gridFor(mn), ptr(cb), dt(cb), pInt(p.OffC), ptr(t), pInt(mn), pInt(q.Batch), pF32(p.Beta))
	}
}

// scratch is an F32 temporary of n floats from the allocator's cache,
// unaccounted as the CPU backend's scratch is; unscratch returns it.
func (d *Device) scratch(n int) *Buffer {
	t := &Buffer{BufferHeader: device.NewBufferHeader(dtype.F32, n, device.Workspace), dev: d}
	var err error
	if t.ptr, _, err = d.pool.TakeBlock(t.Bytes()); err != nil {
		panic(fmt.Sprintf("cudaops: temporary of %d floats: %v", n, err))
	}
	return t
}

func (d *Device) unscratch(t *Buffer) {
	if err := d.pool.ReturnBlock(bucket(t.Bytes()), t.ptr); err != nil {
		panic("cudaops: temporary: " + err.Error())
	}
}

// gemm is Gemm after the checks, for batch entries whose C do not overlap.
func (d *Device) gemm(cb, ab, bb *Buffer, p device.GemmParams) {
	nb := p.Batches()
	m, n, k := p.M, p.N, p.K
	if k == 0 || p.Alpha == 0 {
		// No product: C = Beta*C (0 when Beta is 0), as the CPU backend does.
		d.launch(d.ks.gemmScale, gridFor(nb*m*n), ptr(cb), dt(cb), pInt(p.OffC), pInt(p.StrideC),
			pInt(m*n), pInt(nb), pF32(p.Beta))
		return
	}

	in := ab.DType()
	if ab.DType() != bb.DType() {
		in = dtype.F32
	}
	var temps []*Buffer
	defer func() {
		for _, t := range temps {
			d.unscratch(t)
		}
	}()
	temp := func(n int) *Buffer {
		t := d.scratch(n)
		temps = append(temps, t)
		return t
	}
	// operand returns the address of an input's first matrix, widened to
	// F32 (the whole span its batch covers, so its strides still hold)
	// when the inputs' dtypes differ.
	operand := func(x *Buffer, off, stride, size int) uint64 {
		if x.DType() == in {
			return x.addr(off)
		}
		span := (nb-1)*stride + size
		t := temp(span)
		d.copyBlocks(t, 0, 0, x, off, 0, span, 1)
		return t.ptr
	}
	aPtr := operand(ab, p.OffA, p.StrideA, m*k)
	bPtr := operand(bb, p.OffB, p.StrideB, k*n)

	cPtr, ct, strideC := cb.addr(p.OffC), cb.DType(), p.StrideC
	var ctmp *Buffer
	// A 16-bit C that is also read (Beta != 0) goes through F32 as well:
	// on the H200, cuBLAS's BF16 GEMM with Beta 1 rounded Alpha*A*B to BF16
	// before adding Beta*C at 33x40x64 in a batch of 5 (the conformance
	// suite's batch5/large), two roundings where the contract has one.
	if !(cb.DType() == dtype.F32 || (cb.DType() == in && p.Beta == 0)) {
		ctmp = temp(nb * m * n)
		if p.Beta != 0 {
			d.copyBlocks(ctmp, 0, m*n, cb, p.OffC, p.StrideC, m*n, nb)
		}
		cPtr, ct, strideC = ctmp.ptr, dtype.F32, m*n
	}

	lda, ldb := k, n // row-major leading dimensions, as the CPU backend's
	if p.TransA {
		lda = m
	}
	if p.TransB {
		ldb = k
	}
	call := &gemmCall{
		transA: p.TransB, transB: p.TransA,
		m: n, n: m, k: k,
		alpha: p.Alpha, beta: p.Beta,
		a: bPtr, at: in, lda: ldb, sa: int64(p.StrideB),
		b: aPtr, bt: in, ldb: lda, sb: int64(p.StrideA),
		c: cPtr, ct: ct, ldc: n, sc: int64(strideC),
		batch: nb,
	}
	if d.ownGemm {
		d.ownGEMM(call)
	} else if err := d.g.gemm(call); err != nil {
		panic(fmt.Sprintf("cudaops: Gemm %+v (%v, %v -> %v): %v", p, ab.DType(), bb.DType(), cb.DType(), err))
	}
	if ctmp != nil {
		d.copyBlocks(cb, p.OffC, p.StrideC, ctmp, 0, m*n, m*n, nb)
	}
}

// ownGEMM is the call cuBLAS would have taken, on mp_gemm. The strides fit
// a C int: they lie within buffers, which are shorter than 2^31.
func (d *Device) ownGEMM(c *gemmCall) {
	flag := func(b bool) param {
		if b {
			return pInt(1)
		}
		return pInt(0)
	}
	d.launch(d.ks.gemm, gridFor(c.m*c.n*c.batch), flag(c.transA), flag(c.transB), pInt(c.m), pInt(c.n), pInt(c.k), pF32(c.alpha),
		pU64(c.a), pInt(int(c.at)), pInt(c.lda), pInt(int(c.sa)),
		pU64(c.b), pInt(int(c.bt)), pInt(c.ldb), pInt(int(c.sb)),
		pF32(c.beta), pU64(c.c), pInt(int(c.ct)), pInt(c.ldc), pInt(int(c.sc)), pInt(c.batch))
}
