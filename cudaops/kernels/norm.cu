// norm.cu: batch-norm statistics (Moments) and batch norm's affine map and
// gradient, with the residual add and ReLU fused in where asked: BatchNorm
// and BatchNormGrad are mp_batchnorm_act and the gradient kernels with
// neither.
// The per-channel sums are cut into P parts of a channel's n*hw elements,
// a block each (mp_bn_sums: each thread sums a fixed stride of its part in
// float, a fixed tree combines them), and mp_bn_combine adds a channel's P
// parts in order: deterministic, with P fixed by the shape alone (one part
// where a channel is small, as the one block per channel of before), and
// enough blocks to fill the GPU where channels are few and large. The
// variance is two-pass, which a one-pass E[x^2]-E[x]^2 in float would lose
// when the mean is large.
#include "common.cuh"

// The element t in [0, n*hw) of channel ch sits at (t/hw*c + ch)*hw + t%hw.
__device__ __forceinline__ int chan_index(int t, int ch, int c, int hw) {
	int i = t / hw;
	return (i * c + ch) * hw + (t - i * hw);
}

// bn_part is the range [t0, t1) of part p of P of a channel's m elements.
__device__ __forceinline__ void bn_part(int m, int p, int P, int* t0, int* t1) {
	int chunk = (m + P - 1) / P;
	*t0 = p * chunk;
	*t1 = min(m, *t0 + chunk);
}

// bn_relu is ReLU as the CPU's: x where x > 0 or x is NaN, else +0.
__device__ __forceinline__ float bn_relu(float x) { return (x > 0.0f || is_nan(x)) ? x : 0.0f; }

// bn_dz is the gradient reaching batch norm's output: dy, or with relu dy
// where ReLU's output y passed it (y > 0 or NaN), else +0.
__device__ __forceinline__ float bn_dz(const void* dy, int gdt, const void* y, int ydt, int j, int relu) {
	float g = ld(dy, gdt, j);
	if (relu && ld(y, ydt, j) <= 0.0f) {
		return 0.0f;
	}
	return g;
}

// mp_batchnorm_act: y = relu(x*scale + shift + res) with scale =
// invstd*gamma and shift = beta - mean*scale (the CPU's operations in the
// CPU's order; gamma and beta may be null, 1 and 0), the residual res (null
// for none) added and ReLU applied when relu, all in float and rounded once
// into y.
extern "C" __global__ void mp_batchnorm_act(void* y, int ydt, const void* x, int xdt, const void* res, int rdt,
                                            const float* mean, const float* invstd, const float* gamma,
                                            const float* beta, int c, int hw, int total, int relu) {
	GRID_STRIDE(idx, total) {
		int ch = (idx / hw) % c;
		float g = gamma ? gamma[ch] : 1.0f;
		float b = beta ? beta[ch] : 0.0f;
		float scale = invstd[ch] * g;
		float shift = b - mean[ch] * scale;
		float v = ld(x, xdt, idx) * scale + shift;
		if (res) {
			v += ld(res, rdt, idx);
		}
		if (relu) {
			v = bn_relu(v);
		}
		st(y, ydt, idx, v);
	}
}

// mp_bn_sums writes the sums of part p of channel ch (block b = ch*P + p)
// into part: what = 0, x (part[b]); 1, (x - mean[ch])^2 (part[b]); 2,
// batch norm's gradient sums, with dz = bn_dz(dy, y) (y is not read
// without relu), sum dz into part[2b] and sum dz*xhat into part[2b+1],
// dz also stored into dres when it is not null.
extern "C" __global__ void mp_bn_sums(float* part, int what, const void* dy, int gdt, const void* y, int ydt,
                                      const void* x, int xdt, const float* mean, const float* invstd,
                                      void* dres, int rdt, int n, int c, int hw, int P, int relu) {
	__shared__ float sh[BLOCK];
	int m = n * hw;
	for (int b = blockIdx.x; b < c * P; b += gridDim.x) {
		int ch = b / P, t0, t1;
		bn_part(m, b - ch * P, P, &t0, &t1);
		float s = 0.0f, s2 = 0.0f;
		float mu = what == 0 ? 0.0f : mean[ch];
		float is = what == 2 ? invstd[ch] : 0.0f;
		for (int t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
			int j = chan_index(t, ch, c, hw);
			if (what == 0) {
				s += ld(x, xdt, j);
			} else if (what == 1) {
				float d = ld(x, xdt, j) - mu;
				s += d * d;
			} else {
				float g = bn_dz(dy, gdt, y, ydt, j, relu);
				if (dres) {
					st(dres, rdt, j, g);
				}
				s += g;
				s2 += g * ((ld(x, xdt, j) - mu) * is);
			}
		}
		s = block_sum(s, sh);
		if (what == 2) {
			s2 = block_sum(s2, sh);
		}
		if (threadIdx.x == 0) {
			if (what == 2) {
				part[2 * b] = s;
				part[2 * b + 1] = s2;
			} else {
				part[b] = s;
			}
		}
	}
}

// mp_bn_combine adds each channel's P parts in order: with pairs 0,
// tot[ch] = sum/div (a mean or a variance); with pairs 1, the gradient's
// two sums, tot[ch] = sum dz and tot[c+ch] = sum dz*xhat, copied into dbeta
// and dgamma when they are not null.
extern "C" __global__ void mp_bn_combine(float* tot, float* dbeta, float* dgamma, const float* part,
                                         int c, int P, int pairs, float div) {
	GRID_STRIDE(ch, c) {
		float s = 0.0f, s2 = 0.0f;
		for (int p = 0; p < P; p++) {
			int b = ch * P + p;
			if (pairs) {
				s += part[2 * b];
				s2 += part[2 * b + 1];
			} else {
				s += part[b];
			}
		}
		if (!pairs) {
			tot[ch] = s / div;
			continue;
		}
		tot[ch] = s;
		tot[c + ch] = s2;
		if (dbeta) {
			dbeta[ch] = s;
		}
		if (dgamma) {
			dgamma[ch] = s2;
		}
	}
}

// mp_bn_grad_apply: dx = gamma*invstd/m * (m*dz - sdy - xhat*sdyx), with
// sdy = tot[ch] and sdyx = tot[c+ch] from mp_bn_combine; gamma may be null
// (1). One thread an element.
extern "C" __global__ void mp_bn_grad_apply(void* dx, int ddt, const void* dy, int gdt, const void* y, int ydt,
                                            const void* x, int xdt, const float* mean, const float* invstd,
                                            const float* gamma, const float* tot, int n, int c, int hw, int relu) {
	int total = n * c * hw;
	float fm = (float)(n * hw);
	GRID_STRIDE(j, total) {
		int ch = (j / hw) % c;
		float is = invstd[ch];
		float k = (gamma ? gamma[ch] : 1.0f) * is / fm;
		float xhat = (ld(x, xdt, j) - mean[ch]) * is;
		st(dx, ddt, j, k * ((fm * bn_dz(dy, gdt, y, ydt, j, relu) - tot[ch]) - xhat * tot[c + ch]));
	}
}
