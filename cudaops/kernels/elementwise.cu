// elementwise.cu: Fill, Copy (with dtype conversion), Axpby, Binary with
// broadcasting strides, Unary and UnaryGrad. One thread per element, grid
// stride. The ops of Binary, Unary and UnaryGrad are ops.cuh's, generated
// from device's op tables. Each mirrors device/cpu/elementwise.go operation for operation;
// nvcc runs with -fmad=false so a*x+b*y rounds twice, as Go does on amd64.
#include "common.cuh"
#include "ops.cuh"

extern "C" __global__ void mp_fill(void* dst, int ddt, int n, float v) {
	GRID_STRIDE(i, n) {
		st(dst, ddt, i, v);
	}
}

// mp_copy copies nb blocks of cnt elements: block b reads src from
// soff + b*sstride and writes dst from doff + b*dstride, converting dtypes.
// Copy is nb = 1; Gemm uses the blocks to move matrices in and out of
// temporaries.
extern "C" __global__ void mp_copy(void* dst, int ddt, int doff, int dstride,
                                   const void* src, int sdt, int soff, int sstride,
                                   int cnt, int nb) {
	int total = cnt * nb;
	GRID_STRIDE(i, total) {
		int b = i / cnt;
		int j = i - b * cnt;
		st(dst, ddt, doff + b * dstride + j, ld(src, sdt, soff + b * sstride + j));
	}
}

// mp_gemm_scale is Gemm when K == 0 or Alpha == 0: C = Beta*C, and 0 (not
// 0*C, which would keep a NaN) when Beta == 0, as the CPU backend does.
extern "C" __global__ void mp_gemm_scale(void* c, int cdt, int off, int stride, int mn, int nb, float beta) {
	int total = mn * nb;
	GRID_STRIDE(i, total) {
		int b = i / mn;
		int j = off + b * stride + (i - b * mn);
		st(c, cdt, j, beta == 0.0f ? 0.0f : beta * ld(c, cdt, j));
	}
}

extern "C" __global__ void mp_axpby(void* dst, int ddt, const void* x, int xdt, const void* y, int ydt,
                                    int n, float alpha, float beta) {
	GRID_STRIDE(i, n) {
		float v = alpha * ld(x, xdt, i);
		if (beta != 0.0f) {
			// dst may be x or y: each element is read before it is written,
			// by the same thread.
			v = v + beta * ld(y, ydt, i);
		}
		st(dst, ddt, i, v);
	}
}

// mp_binary computes dst[i] = op(a[oa], b[ob]) over the n elements of d's
// space, dst contiguous, a and b read through d.sa and d.sb.
extern "C" __global__ void mp_binary(int op, void* dst, int ddt, const void* a, int adt,
                                     const void* b, int bdt, int n, Dims d) {
	GRID_STRIDE(i, n) {
		int oa, ob;
		dims_offsets(d, i, &oa, &ob);
		st(dst, ddt, i, binary_op(op, ld(a, adt, oa), ld(b, bdt, ob)));
	}
}

// The transcendental functions are CUDA's float versions (within 2 ulp of
// the float64 ones the CPU backend rounds, inside the F32 tolerance); the
// build does not use --use_fast_math, so division and sqrt are correctly
// rounded and subnormals are kept.
extern "C" __global__ void mp_unary(int op, void* dst, int ddt, const void* src, int sdt, int n, float alpha) {
	GRID_STRIDE(i, n) {
		st(dst, ddt, i, unary_op(op, ld(src, sdt, i), alpha));
	}
}

// mp_unary_grad computes dst = dy * op'(x), from in: the forward input or
// output, as op's row keeps, or null for an op that keeps nothing.
extern "C" __global__ void mp_unary_grad(int op, void* dst, int ddt, const void* dy, int gdt,
                                         const void* in, int idt, int n, float alpha) {
	GRID_STRIDE(i, n) {
		float v = in != nullptr ? ld(in, idt, i) : 0.0f;
		st(dst, ddt, i, unary_grad_op(op, ld(dy, gdt, i), v, alpha));
	}
}
