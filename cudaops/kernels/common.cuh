// common.cuh: what every kernel family shares. Storage dtypes are passed to
// kernels as codes (0 F32, 1 F16, 2 BF16, dtype.DType's values) and switched
// on per element: the branch is uniform across a warp, so it costs little,
// and one kernel per op keeps the PTX small and every mix of operand dtypes
// available. Values are loaded to float, computed on in float (or double
// where a row statistic is formed) and rounded to nearest even once, on
// store.
//
// Indices are 32-bit: the Go side refuses buffers of 2^31 - 2^24 elements
// or more, so an index plus a grid stride never overflows.
#ifndef MIXPREC_COMMON_CUH
#define MIXPREC_COMMON_CUH

#define DT_F32 0
#define DT_F16 1
#define DT_BF16 2

// Threads per block for every kernel. The block reductions below assume a
// power of two.
#define BLOCK 256

// MAXDIMS is the most dimensions a Dims holds after the Go side merged the
// contiguous ones.
#define MAXDIMS 8

// Dims is an iteration space of nd dimensions, outermost first, with two
// sets of strides (in elements) for the operands read through it. It is
// passed by value: 100 bytes, 4-aligned, the Go side's dimsParam.
struct Dims {
	int nd;
	int size[MAXDIMS];
	int sa[MAXDIMS];
	int sb[MAXDIMS];
};

// Offsets of the element with row-major linear index i of d's space.
__device__ __forceinline__ void dims_offsets(const Dims& d, int i, int* oa, int* ob) {
	int a = 0, b = 0;
#pragma unroll
	for (int k = MAXDIMS - 1; k >= 0; k--) {
		if (k < d.nd) {
			int n = d.size[k];
			int q = i % n;
			i /= n;
			a += q * d.sa[k];
			b += q * d.sb[k];
		}
	}
	*oa = a;
	*ob = b;
}

// F16 conversions with the PTX instructions themselves (no header needed):
// widening is exact, narrowing rounds to nearest even, keeps subnormals and
// overflows to infinity.
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}

__device__ __forceinline__ unsigned short f32_to_f16(float f) {
	unsigned short h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	return h;
}

// BF16 conversions with integer operations, so the compute_70 PTX (which has
// no bf16 instructions) behaves exactly as the compute_80 one and as
// dtype.F32ToBF16: a NaN stays a quiet NaN, everything else rounds to
// nearest even (a carry into the exponent is right, up to infinity).
__device__ __forceinline__ float bf16_to_f32(unsigned short h) {
	return __uint_as_float(((unsigned int)h) << 16);
}

__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
	unsigned int u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) {
		return (unsigned short)((u >> 16) | 0x40u);
	}
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ld reads element i of a buffer of dtype dt as float.
__device__ __forceinline__ float ld(const void* p, int dt, int i) {
	if (dt == DT_F32) {
		return ((const float*)p)[i];
	}
	unsigned short h = ((const unsigned short*)p)[i];
	return dt == DT_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// st rounds v to dt and writes it to element i.
__device__ __forceinline__ void st(void* p, int dt, int i, float v) {
	if (dt == DT_F32) {
		((float*)p)[i] = v;
	} else if (dt == DT_F16) {
		((unsigned short*)p)[i] = f32_to_f16(v);
	} else {
		((unsigned short*)p)[i] = f32_to_bf16(v);
	}
}

__device__ __forceinline__ bool is_nan(float x) { return x != x; }

// is_finite tests the exponent bits, which no compiler option can fold away.
__device__ __forceinline__ bool is_finite(float x) {
	return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u;
}

// grid_stride visits [0, n) with every thread of the grid.
#define GRID_STRIDE(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

// block_sum returns the sum of v over the block to every thread, by a fixed
// tree in shared memory: the order of additions depends on blockDim only,
// so results are the same on every run. sh holds blockDim.x floats.
__device__ __forceinline__ float block_sum(float v, float* sh) {
	int t = threadIdx.x;
	sh[t] = v;
	__syncthreads();
	for (int s = blockDim.x >> 1; s > 0; s >>= 1) {
		if (t < s) {
			sh[t] += sh[t + s];
		}
		__syncthreads();
	}
	float r = sh[0];
	__syncthreads();
	return r;
}

// warp_sum returns the sum of v over the warp to every lane. In the
// butterfly, the two lanes of a pair add the same two numbers, so every
// lane ends with the same bits.
__device__ __forceinline__ float warp_sum(float v) {
	for (int m = 16; m > 0; m >>= 1) {
		v += __shfl_xor_sync(0xffffffffu, v, m);
	}
	return v;
}

// nan_max is max with NaN winning, the rule of the CPU backend's logsumexp.
__device__ __forceinline__ float nan_max(float a, float b) {
	if (is_nan(a)) {
		return a;
	}
	if (is_nan(b)) {
		return b;
	}
	return a > b ? a : b;
}

__device__ __forceinline__ float warp_max(float v) {
	for (int m = 16; m > 0; m >>= 1) {
		v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, m));
	}
	return v;
}

#endif
