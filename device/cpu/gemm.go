package cpu

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Gemm computes dst = Alpha*op(a)*op(b) + Beta*dst for each batch entry.
// 16-bit operands are widened to float32; a 16-bit dst is accumulated in
// float32 and rounded once.
func (d *Device) Gemm(dst, a, b device.Buffer, p device.GemmParams) {
	cb, ab, bb := d.buf(dst, "Gemm"), d.buf(a, "Gemm"), d.buf(b, "Gemm")
	nb := p.Batches()
	m, n, k := p.M, p.N, p.K
	last := func(off, stride, size int) int { return off + (nb-1)*stride + size }
	if m < 0 || n < 0 || k < 0 || last(p.OffA, p.StrideA, m*k) > ab.n || last(p.OffB, p.StrideB, k*n) > bb.n || last(p.OffC, p.StrideC, m*n) > cb.n {
		panic(fmt.Sprintf("cpu: Gemm %+v out of range of buffers a[%d] b[%d] c[%d]", p, ab.n, bb.n, cb.n))
	}
	lda, ldb := k, n
	if p.TransA {
		lda = m
	}
	if p.TransB {
		ldb = k
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	if p.TransA {
		ta = blas.Trans
	}
	if p.TransB {
		tb = blas.Trans
	}
	for i := range nb {
		oa, ob, oc := p.OffA+i*p.StrideA, p.OffB+i*p.StrideB, p.OffC+i*p.StrideC
		av, bv := read(ab, oa, oa+m*k), read(bb, ob, ob+k*n)
		var cv view
		if p.Beta != 0 {
			cv = read(cb, oc, oc+m*n)
			if cv.tmp == nil && cb.dt == dtype.F32 {
				cv = view{v: cb.f32[oc : oc+m*n]}
			}
		} else {
			cv = writeView(cb, oc, oc+m*n)
		}
		if m > 0 && n > 0 {
			if k == 0 || p.Alpha == 0 {
				for j := range cv.v {
					if p.Beta == 0 {
						cv.v[j] = 0
					} else {
						cv.v[j] *= p.Beta
					}
				}
			} else {
				gonum.Implementation{}.Sgemm(ta, tb, m, n, k, p.Alpha, av.v, lda, bv.v, ldb, p.Beta, cv.v, n)
			}
		}
		av.done()
		bv.done()
		commit(cb, oc, cv)
	}
}
