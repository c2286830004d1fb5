// softmax.cu: LogSoftmax(+Grad), the fused CrossEntropy(+Grad) and Argmax.
// One warp per row: lanes stride along the row and combine with butterfly
// shuffles, in which every lane ends with the same bits, so the result does
// not depend on timing. A row's logsumexp is formed in double from a float
// sum of exponentials, and the final subtraction is done in double, as the
// CPU backend does.
#include "common.cuh"

// Row r, lane: the warp's row and the thread's lane; rows advance by the
// number of warps in the grid. The loop bound is the same for all lanes of
// a warp, so every shuffle has all 32 lanes.
#define WARP_ROWS(r, rows)                                                   \
	int lane = threadIdx.x & 31;                                             \
	int warps = (gridDim.x * blockDim.x) >> 5;                               \
	for (int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < (rows); r += warps)

// row_lse returns max + log(sum(exp(x - max))) of row x[base : base+cols],
// or the maximum itself when it is infinite or NaN (the CPU's rule).
__device__ double row_lse(const void* x, int xdt, int base, int cols, int lane) {
	float m = -INFINITY;
	for (int j = lane; j < cols; j += 32) {
		m = nan_max(m, ld(x, xdt, base + j));
	}
	m = warp_max(m);
	if (!is_finite(m)) {
		return (double)m;
	}
	float s = 0.0f;
	for (int j = lane; j < cols; j += 32) {
		s += expf(ld(x, xdt, base + j) - m);
	}
	s = warp_sum(s);
	return (double)m + log((double)s);
}

extern "C" __global__ void mp_log_softmax(void* dst, int ddt, const void* src, int sdt, int rows, int cols) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		double lse = row_lse(src, sdt, base, cols, lane);
		for (int j = lane; j < cols; j += 32) {
			st(dst, ddt, base + j, (float)((double)ld(src, sdt, base + j) - lse));
		}
	}
}

// mp_log_softmax_grad: dst = dy - exp(y) * sum(dy), y the forward output.
extern "C" __global__ void mp_log_softmax_grad(void* dst, int ddt, const void* dy, int gdt,
                                               const void* y, int ydt, int rows, int cols) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		float s = 0.0f;
		for (int j = lane; j < cols; j += 32) {
			s += ld(dy, gdt, base + j);
		}
		s = warp_sum(s);
		for (int j = lane; j < cols; j += 32) {
			st(dst, ddt, base + j, ld(dy, gdt, base + j) - expf(ld(y, ydt, base + j)) * s);
		}
	}
}

// label returns row r's class index, or -1 after recording r in *bad (the
// lowest bad row wins, so the Go side's panic names the same row every
// run) when the label is not an integer in [0, cols). The conversion
// saturates and maps NaN to 0, so every bad value fails the round trip.
__device__ int label(const void* labels, int ldt, int r, int cols, int lane, int* bad) {
	float l = ld(labels, ldt, r);
	int c = (int)l;
	if ((float)c != l || c < 0 || c >= cols) {
		if (lane == 0) {
			atomicMin(bad, r);
		}
		return -1;
	}
	return c;
}

// mp_cross_entropy: loss[r] = logsumexp(logits[r]) - logits[r, labels[r]];
// NaN for a row with a bad label (the Go side panics).
extern "C" __global__ void mp_cross_entropy(void* loss, int ldt, const void* logits, int xdt,
                                            const void* labels, int ydt, int rows, int cols, int* bad) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		double lse = row_lse(logits, xdt, base, cols, lane);
		int c = label(labels, ydt, r, cols, lane, bad);
		if (lane == 0) {
			float v = c < 0 ? __int_as_float(0x7fc00000) : (float)(lse - (double)ld(logits, xdt, base + c));
			st(loss, ldt, r, v);
		}
	}
}

// mp_cross_entropy_grad: dlogits[r,j] = dloss[r] * (softmax[r,j] - [j == label]).
extern "C" __global__ void mp_cross_entropy_grad(void* dlogits, int ddt, const void* logits, int xdt,
                                                 const void* labels, int ydt, const void* dloss, int gdt,
                                                 int rows, int cols, int* bad) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		double lse = row_lse(logits, xdt, base, cols, lane);
		int c = label(labels, ydt, r, cols, lane, bad);
		float g = ld(dloss, gdt, r);
		for (int j = lane; j < cols; j += 32) {
			float p = expf((float)((double)ld(logits, xdt, base + j) - lse));
			if (j == c) {
				p -= 1.0f;
			}
			st(dlogits, ddt, base + j, c < 0 ? __int_as_float(0x7fc00000) : g * p);
		}
	}
}

// argmax_take reports whether (v2, i2) beats (v, i): a NaN beats any
// number, a larger value beats a smaller one, and between equals (or two
// NaNs) the lower index wins. This order is total, so combining lanes in
// any tree gives the CPU's answer: the first maximum, or the first NaN.
__device__ __forceinline__ bool argmax_take(float v, int i, float v2, int i2) {
	bool n1 = is_nan(v), n2 = is_nan(v2);
	if (n1 || n2) {
		return n2 && (!n1 || i2 < i);
	}
	return v2 > v || (v2 == v && i2 < i);
}

extern "C" __global__ void mp_argmax(void* dst, int ddt, const void* src, int sdt, int rows, int cols) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		// A lane with no elements holds (-Inf, INT_MAX), which any element beats.
		float v = -INFINITY;
		int idx = 0x7fffffff;
		for (int j = lane; j < cols; j += 32) {
			float x = ld(src, sdt, base + j);
			if (argmax_take(v, idx, x, j)) {
				v = x;
				idx = j;
			}
		}
		for (int m = 16; m > 0; m >>= 1) {
			float v2 = __shfl_xor_sync(0xffffffffu, v, m);
			int i2 = __shfl_xor_sync(0xffffffffu, idx, m);
			if (argmax_take(v, idx, v2, i2)) {
				v = v2;
				idx = i2;
			}
		}
		if (lane == 0) {
			st(dst, ddt, r, (float)idx);
		}
	}
}
