// norm.cu: batch-norm statistics (Moments) and batch norm's affine map and
// gradient, with the residual add and ReLU fused in where asked: BatchNorm
// and BatchNormGrad are mp_batchnorm_act and mp_batchnorm_act_grad with
// neither.
// The per-channel sums run one block per channel, each thread summing a
// fixed stride of the channel's n*hw elements in float and a fixed tree
// combining them: deterministic, and two-pass for the variance, which a
// one-pass E[x^2]-E[x]^2 in float would lose when the mean is large.
#include "common.cuh"

// The element t in [0, n*hw) of channel ch sits at (t/hw*c + ch)*hw + t%hw.
__device__ __forceinline__ int chan_index(int t, int ch, int c, int hw) {
	int i = t / hw;
	return (i * c + ch) * hw + (t - i * hw);
}

// mp_moments: mean[ch] and the biased variance[ch] of x (n, c, hw), both F32.
extern "C" __global__ void mp_moments(float* mean, float* var, const void* x, int xdt, int n, int c, int hw) {
	__shared__ float sh[BLOCK];
	int m = n * hw;
	for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
		float s = 0.0f;
		for (int t = threadIdx.x; t < m; t += blockDim.x) {
			s += ld(x, xdt, chan_index(t, ch, c, hw));
		}
		float mu = block_sum(s, sh) / (float)m;
		float q = 0.0f;
		for (int t = threadIdx.x; t < m; t += blockDim.x) {
			float d = ld(x, xdt, chan_index(t, ch, c, hw)) - mu;
			q += d * d;
		}
		q = block_sum(q, sh);
		if (threadIdx.x == 0) {
			mean[ch] = mu;
			var[ch] = q / (float)m;
		}
	}
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

// mp_batchnorm_act_grad: per channel, with dz = bn_dz(dy, y) (y is not read
// without relu), sdy = sum dz and sdyx = sum dz*xhat, then dx =
// gamma*invstd/m * (m*dz - sdy - xhat*sdyx); dgamma = sdyx and dbeta = sdy
// are written when not null, dz into dres (the residual's gradient) when it
// is not null; gamma may be null (1).
extern "C" __global__ void mp_batchnorm_act_grad(void* dx, int ddt, void* dres, int rdt, float* dgamma, float* dbeta,
                                                 const void* dy, int gdt, const void* y, int ydt,
                                                 const void* x, int xdt, const float* mean, const float* invstd,
                                                 const float* gamma, int n, int c, int hw, int relu) {
	__shared__ float sh[BLOCK];
	int m = n * hw;
	float fm = (float)m;
	for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
		float mu = mean[ch], is = invstd[ch];
		float sdy = 0.0f, sdyx = 0.0f;
		for (int t = threadIdx.x; t < m; t += blockDim.x) {
			int j = chan_index(t, ch, c, hw);
			float g = bn_dz(dy, gdt, y, ydt, j, relu);
			if (dres) {
				st(dres, rdt, j, g);
			}
			sdy += g;
			sdyx += g * ((ld(x, xdt, j) - mu) * is);
		}
		sdy = block_sum(sdy, sh);
		sdyx = block_sum(sdyx, sh);
		if (threadIdx.x == 0) {
			if (dgamma) {
				dgamma[ch] = sdyx;
			}
			if (dbeta) {
				dbeta[ch] = sdy;
			}
		}
		float k = (gamma ? gamma[ch] : 1.0f) * is / fm;
		for (int t = threadIdx.x; t < m; t += blockDim.x) {
			int j = chan_index(t, ch, c, hw);
			float xhat = (ld(x, xdt, j) - mu) * is;
			st(dx, ddt, j, k * ((fm * bn_dz(dy, gdt, y, ydt, j, relu) - sdy) - xhat * sdyx));
		}
	}
}
