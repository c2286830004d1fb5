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
