// random.cu: Dropout with the counter-based generator of device.Mix64 and
// device.Uniform, reproduced bit for bit with 64-bit integer operations, so
// a mask on the GPU is the mask on the CPU.
#include "common.cuh"

__device__ __forceinline__ unsigned long long mix64(unsigned long long seed, unsigned long long counter) {
	unsigned long long z = seed ^ (counter * 0x9e3779b97f4a7c15ull);
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

// mp_dropout: dst[i] = src[i]*scale where Uniform(key, i) >= p, else 0.
// scale is 1/(1-p) computed by the host in float32, as the CPU does. The
// top 24 bits convert to float exactly, and the multiply by 2^-24 is exact.
extern "C" __global__ void mp_dropout(void* dst, int ddt, const void* src, int sdt, int n, float p, float scale,
                                      unsigned long long seed, unsigned long long offset) {
	GRID_STRIDE(i, n) {
		float u = (float)(mix64(seed, offset + (unsigned long long)i) >> 40) * (1.0f / 16777216.0f);
		float x = ld(src, sdt, i);
		st(dst, ddt, i, u >= p ? x * scale : 0.0f);
	}
}
