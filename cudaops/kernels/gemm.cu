// gemm.cu: the GEMM of a device that has no cuBLAS. It is included last in
// module.cu, so that adding it left the PTX of the other kernels as it was.
#include "common.cuh"

// mp_gemm is the GEMM of a device that has no cuBLAS (Open found none), as
// cuBLAS sees it: column-major, C = alpha*op(A)*op(B) + beta*C for each of
// nb batch entries at element strides sa, sb and sc, op(A) m x k and op(B)
// k x n, any storage dtype in and out, the products summed in float in
// order of l. One thread for each element of C: far slower than cuBLAS,
// and right.
extern "C" __global__ void mp_gemm(int ta, int tb, int m, int n, int k, float alpha,
                                   const void* a, int adt, int lda, int sa,
                                   const void* b, int bdt, int ldb, int sb,
                                   float beta, void* c, int cdt, int ldc, int sc, int nb) {
	int total = m * n * nb;
	GRID_STRIDE(idx, total) {
		int i = idx % m;
		int r = idx / m;
		int j = r % n;
		int e = r / n;
		int ao = e * sa, bo = e * sb;
		float s = 0.0f;
		for (int l = 0; l < k; l++) {
			float x = ld(a, adt, ao + (ta ? l + i * lda : i + l * lda));
			float y = ld(b, bdt, bo + (tb ? j + l * ldb : l + j * ldb));
			s = s + x * y;
		}
		int ci = e * sc + i + j * ldc;
		float v = alpha * s;
		if (beta != 0.0f) {
			v = v + beta * ld(c, cdt, ci);
		}
		st(c, cdt, ci, v);
	}
}

// rnd rounds v to dtype dt, as st then ld would.
__device__ __forceinline__ float rnd(int dt, float v) {
	if (dt == DT_F32) {
		return v;
	}
	return dt == DT_F16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v));
}

// mp_gemm_fold adds nb products into one C, as nb GEMMs into that C would
// in order (a batched Gemm whose entries share C, StrideC 0): t holds the
// products, mn floats each, and element i of C at off becomes, for each in
// turn, t[e*mn + i] + beta*C (t alone when beta is 0: C is not read),
// rounded to C's dtype each time. One thread an element, the entries in
// order: deterministic.
extern "C" __global__ void mp_gemm_fold(void* c, int cdt, int off, const float* t, int mn, int nb, float beta) {
	GRID_STRIDE(i, mn) {
		float v = beta == 0.0f ? 0.0f : ld(c, cdt, off + i);
		for (int e = 0; e < nb; e++) {
			float x = t[e * mn + i];
			v = rnd(cdt, beta == 0.0f ? x : x + beta * v);
		}
		st(c, cdt, off + i, v);
	}
}
