package cpu

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu/internal/gemm"
	"github.com/mixprec/mixprec/dtype"
)

// operand describes a buffer's matrix starting at off with leading
// dimension ld for the packed GEMM, which reads 16-bit storage directly.
func operand(b *Buffer, off, ld int) gemm.Operand {
	if b.dt == dtype.F32 {
		return gemm.Operand{F32: b.f32, Off: off, LD: ld}
	}
	return gemm.Operand{U16: b.u16, BF16: b.dt == dtype.BF16, Off: off, LD: ld}
}

// Gemm computes dst = Alpha*op(a)*op(b) + Beta*dst for each batch entry.
// The packed GEMM reads operands of any dtype where they lie: 16-bit ones
// are widened as they are packed, with no separate pass, and two bfloat16
// operands are multiplied natively where the CPU has AVX512_BF16. The
// accumulator is float32; a 16-bit dst is rounded once, from it, tile by
// tile as the GEMM stores it.
func (d *Device) Gemm(dst, a, b device.Buffer, p device.GemmParams) {
	cb := d.buf(dst, "Gemm")
	d.gemm("Gemm", cb, a, b, p, cb.dt)
}

// GemmNarrow is Gemm into an F32 dst whose results are rounded once to via
// (F16 or BF16) and stored widened (device.NarrowGemmer): the GEMM's tiles
// are rounded as for a 16-bit dst and widened while they are in cache, so
// the bits are those of Gemm into a via-typed buffer and a Copy back.
func (d *Device) GemmNarrow(dst, a, b device.Buffer, p device.GemmParams, via dtype.DType) {
	cb := d.buf(dst, "GemmNarrow")
	if cb.dt != dtype.F32 || via == dtype.F32 {
		panic(fmt.Sprintf("cpu: GemmNarrow into %v through %v; want an f32 dst and a 16-bit dtype", cb.dt, via))
	}
	d.gemm("GemmNarrow", cb, a, b, p, via)
}

// GemmNarrowUnscale is GemmNarrow with each result then multiplied by inv
// (device.UnscalingGemmer): the GEMM's kernels unscale each tile as they
// store it (gemm.Out16.Unscale).
func (d *Device) GemmNarrowUnscale(dst, a, b device.Buffer, p device.GemmParams, via dtype.DType, inv float32) bool {
	cb := d.buf(dst, "GemmNarrowUnscale")
	if cb.dt != dtype.F32 || via == dtype.F32 || p.Batches() > 1 || p.Beta != 0 || inv == 0 {
		panic(fmt.Sprintf("cpu: GemmNarrowUnscale into %v through %v, %d products, beta %v, inv %v; want an f32 dst, a 16-bit dtype, one product, beta 0 and inv not 0", cb.dt, via, p.Batches(), p.Beta, inv))
	}
	ao, bo, _ := d.operands("GemmNarrowUnscale", cb, a, b, p)
	c := gemm.Out16{F32: cb.f32, BF16: via == dtype.BF16, Off: p.OffC, LD: max(p.N, 1), Unscale: inv}
	return gemm.Gemm16(p.TransA, p.TransB, p.M, p.N, p.K, p.Alpha, ao, bo, 0, c)
}

// gemm runs Gemm with results rounded to out: a 16-bit cb's own dtype, or
// a 16-bit out with an F32 cb, which receives them widened.
func (d *Device) gemm(name string, cb *Buffer, a, b device.Buffer, p device.GemmParams, out dtype.DType) {
	ao, bo, bt := d.operands(name, cb, a, b, p)
	m, n, k := p.M, p.N, p.K
	if out != dtype.F32 {
		// A 16-bit result: the GEMM rounds each block of its float32
		// accumulator into dst as it finishes it (and widens dst's old
		// values block by block when Beta reads them).
		c := gemm.Out16{BF16: out == dtype.BF16, Off: p.OffC, LD: max(n, 1)}
		if cb.dt == dtype.F32 {
			c.F32 = cb.f32
		} else {
			c.U16 = cb.u16
		}
		gemm.Gemm16Batch(p.TransA, p.TransB, m, n, k, p.Alpha, ao, bo, p.Beta, c, bt)
		return
	}
	// A batch of products (a convolution's images) is shared out among the
	// cores whole where that pays (gemm.GemmBatch), with the bits of one
	// product after another.
	gemm.GemmBatch(p.TransA, p.TransB, m, n, k, p.Alpha, ao, bo, p.Beta, cb.f32[p.OffC:], max(n, 1), bt)
}

// operands checks p against the buffers and returns the GEMM's view of a
// and b and of p's batch.
func (d *Device) operands(name string, cb *Buffer, a, b device.Buffer, p device.GemmParams) (ao, bo gemm.Operand, bt gemm.Batch) {
	ab, bb := d.buf(a, name), d.buf(b, name)
	nb := p.Batches()
	m, n, k := p.M, p.N, p.K
	last := func(off, stride, size int) int { return off + (nb-1)*stride + size }
	if m < 0 || n < 0 || k < 0 || last(p.OffA, p.StrideA, m*k) > ab.n || last(p.OffB, p.StrideB, k*n) > bb.n || last(p.OffC, p.StrideC, m*n) > cb.n {
		panic(fmt.Sprintf("cpu: %s %+v out of range of buffers a[%d] b[%d] c[%d]", name, p, ab.n, bb.n, cb.n))
	}
	lda, ldb := k, n
	if p.TransA {
		lda = m
	}
	if p.TransB {
		ldb = k
	}
	return operand(ab, p.OffA, max(lda, 1)), operand(bb, p.OffB, max(ldb, 1)),
		gemm.Batch{Count: nb, StrideA: p.StrideA, StrideB: p.StrideB, StrideC: p.StrideC}
}
