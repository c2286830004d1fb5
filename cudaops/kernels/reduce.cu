// reduce.cu: Reduce and Expand. Reduce splits the source's dimensions into
// kept ones (a destination stride other than 0) and reduced ones (stride 0).
// Every destination element is summed by one thread or one block in an
// order fixed by the shapes, never with atomics, so results are the same on
// every run.
#include "common.cuh"

// For both reduce kernels: kept.sa are the source strides and kept.sb the
// destination strides of the kept dimensions (nkept elements in all);
// red.sa are the source strides of the reduced ones (nred elements). dst
// gets alpha times each sum, in float.

// mp_reduce_thread gives each destination element to one thread, which
// sums its nred terms in order: for short reductions, where adjacent
// threads read adjacent source elements.
extern "C" __global__ void mp_reduce_thread(void* dst, int ddt, const void* src, int sdt,
                                            int nkept, Dims kept, int nred, Dims red, float alpha) {
	GRID_STRIDE(k, nkept) {
		int ks, kd, rs, unused;
		dims_offsets(kept, k, &ks, &kd);
		float s = 0.0f;
		for (int r = 0; r < nred; r++) {
			dims_offsets(red, r, &rs, &unused);
			s += ld(src, sdt, ks + rs);
		}
		st(dst, ddt, kd, alpha * s);
	}
}

// mp_reduce_block gives each destination element to one block: thread t
// sums terms t, t+BLOCK, ... and a fixed tree adds the partial sums.
extern "C" __global__ void mp_reduce_block(void* dst, int ddt, const void* src, int sdt,
                                           int nkept, Dims kept, int nred, Dims red, float alpha) {
	__shared__ float sh[BLOCK];
	for (int k = blockIdx.x; k < nkept; k += gridDim.x) {
		int ks, kd, rs, unused;
		dims_offsets(kept, k, &ks, &kd);
		float s = 0.0f;
		for (int r = threadIdx.x; r < nred; r += blockDim.x) {
			dims_offsets(red, r, &rs, &unused);
			s += ld(src, sdt, ks + rs);
		}
		s = block_sum(s, sh);
		if (threadIdx.x == 0) {
			st(dst, ddt, kd, alpha * s);
		}
	}
}

// mp_expand writes dst[i] = alpha * src[offset(i)] over the n elements of
// d's space (d.sa the source strides, 0 where it broadcasts).
extern "C" __global__ void mp_expand(void* dst, int ddt, const void* src, int sdt, int n, Dims d, float alpha) {
	GRID_STRIDE(i, n) {
		int os, unused;
		dims_offsets(d, i, &os, &unused);
		st(dst, ddt, i, alpha * ld(src, sdt, os));
	}
}
