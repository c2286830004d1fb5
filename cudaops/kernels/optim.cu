// optim.cu: the SGD and Adam(W) updates and GradScaler's fused unscale and
// non-finite check, all on F32 buffers. Each is the CPU backend's loop body
// with the same operations in the same order (and no fused multiply-adds),
// and the host computes the per-step scalars exactly as the CPU does, so
// the results are bitwise the CPU's.
#include "common.cuh"

extern "C" __global__ void mp_sgd(float* p, const float* g, float* mom, int n, float lr, float momentum,
                                  float dampening, float wd, int nesterov, int first) {
	GRID_STRIDE(i, n) {
		float gi = g[i];
		if (wd != 0.0f) {
			gi += wd * p[i];
		}
		if (momentum != 0.0f) {
			float m;
			if (first) {
				m = gi;
			} else {
				m = momentum * mom[i] + (1.0f - dampening) * gi;
			}
			mom[i] = m;
			if (nesterov) {
				gi += momentum * m;
			} else {
				gi = m;
			}
		}
		p[i] -= lr * gi;
	}
}

// mp_adam: step_size = lr/(1-beta1^t), bc2sqrt = sqrt(1-beta2^t) and decay =
// 1 - lr*wd come from the host.
extern "C" __global__ void mp_adam(float* p, const float* g, float* m, float* v, int n, float beta1, float beta2,
                                   float eps, float wd, int decoupled, float step_size, float bc2sqrt, float decay) {
	GRID_STRIDE(i, n) {
		float gi = g[i];
		float pi = p[i];
		if (wd != 0.0f) {
			if (decoupled) {
				pi *= decay;
			} else {
				gi += wd * pi;
			}
		}
		float mi = m[i];
		mi += (1.0f - beta1) * (gi - mi);
		float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		float denom = sqrtf(vi) / bc2sqrt + eps;
		p[i] = pi - step_size * mi / denom;
	}
}

// mp_unscale multiplies every element by inv and sets *found when a product
// is Inf or NaN (an Inf or NaN input gives one too: Inf*0 is NaN). Several
// threads may store 1; none stores anything else, so the result does not
// depend on their order.
extern "C" __global__ void mp_unscale(float* g, int n, float inv, int* found) {
	GRID_STRIDE(i, n) {
		float v = g[i] * inv;
		g[i] = v;
		if (!is_finite(v)) {
			*found = 1;
		}
	}
}
