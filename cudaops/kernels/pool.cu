// pool.cu: MaxPool and AvgPool with their gradients. Forward kernels run a
// thread per output; backward kernels a thread per input pixel, which
// visits the windows that cover it in the CPU backend's order (oh, ow
// ascending) and adds their contributions there, so overlapping windows
// need no atomics and the sums are bitwise the CPU's.
#include "common.cuh"

// Pool is device.PoolShape, as 12 ints (the Go side's poolParam).
struct Pool {
	int n, c, h, w;
	int kh, kw;
	int sh, sw;
	int ph, pw;
	int oh, ow;
};

// window is the CPU backend's: the input rows (or columns) [lo, hi) that
// output o reads, clipped to the input, and the unclipped extent (padding
// included, up to size+pad) that average pooling divides by.
__device__ __forceinline__ void window(int o, int stride, int pad, int k, int size, int* lo, int* hi, int* extent) {
	int l = o * stride - pad;
	int h = min(l + k, size + pad);
	*extent = h - l;
	*lo = max(l, 0);
	*hi = min(h, size);
}

// window_argmax returns the plane offset of the first maximum of the window,
// or of its last NaN when it holds any (PyTorch's rule), scanning rows then
// columns as the CPU does.
__device__ __forceinline__ int window_argmax(const void* x, int xdt, int plane, int w,
                                             int h0, int h1, int w0, int w1) {
	int best = h0 * w + w0;
	float bv = ld(x, xdt, plane + best);
	for (int y = h0; y < h1; y++) {
		for (int q = w0; q < w1; q++) {
			int j = y * w + q;
			float v = ld(x, xdt, plane + j);
			if (v > bv || is_nan(v)) {
				best = j;
				bv = v;
			}
		}
	}
	return best;
}

// first_cover returns the first output index whose window starts at or
// before i + pad - k + 1, i.e. the first window that can cover input i.
__device__ __forceinline__ int first_cover(int i, int stride, int pad, int k) {
	int t = i + pad - k + 1;
	return t <= 0 ? 0 : (t + stride - 1) / stride;
}

// mp_maxpool writes each window's maximum to y and, unless arg is null, its
// position in the window (kh*kw_size + kw from the unclipped corner) to arg.
extern "C" __global__ void mp_maxpool(void* y, int ydt, void* arg, int adt, const void* x, int xdt, Pool s,
                                      int total) {
	int hw = s.h * s.w, ohw = s.oh * s.ow;
	GRID_STRIDE(idx, total) {
		int i = idx / ohw;
		int o = idx - i * ohw;
		int oh = o / s.ow, ow = o - (o / s.ow) * s.ow;
		int h0, h1, w0, w1, e;
		window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1, &e);
		window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1, &e);
		int plane = i * hw;
		int best = window_argmax(x, xdt, plane, s.w, h0, h1, w0, w1);
		st(y, ydt, idx, ld(x, xdt, plane + best));
		if (arg != nullptr) {
			int kh = best / s.w - (oh * s.sh - s.ph);
			int kw = best - (best / s.w) * s.w - (ow * s.sw - s.pw);
			st(arg, adt, idx, (float)(kh * s.kw + kw));
		}
	}
}

// mp_maxpool_grad: dx[pixel] = the sum, in (oh, ow) order as the CPU adds
// them, of dy over the windows whose recorded position (arg) is that
// pixel. total is n*c*h*w.
extern "C" __global__ void mp_maxpool_grad(void* dx, int ddt, const void* dy, int gdt, const void* arg, int adt,
                                           Pool s, int total) {
	int hw = s.h * s.w, ohw = s.oh * s.ow;
	GRID_STRIDE(idx, total) {
		int i = idx / hw;
		int pix = idx - i * hw;
		int ih = pix / s.w, iw = pix - (pix / s.w) * s.w;
		float sum = 0.0f;
		int ohEnd = min(s.oh - 1, (ih + s.ph) / s.sh);
		int owEnd = min(s.ow - 1, (iw + s.pw) / s.sw);
		for (int oh = first_cover(ih, s.sh, s.ph, s.kh); oh <= ohEnd; oh++) {
			int kh = ih - (oh * s.sh - s.ph);
			if (kh < 0 || kh >= s.kh) {
				continue;
			}
			for (int ow = first_cover(iw, s.sw, s.pw, s.kw); ow <= owEnd; ow++) {
				int kw = iw - (ow * s.sw - s.pw);
				if (kw < 0 || kw >= s.kw) {
					continue;
				}
				int o = i * ohw + oh * s.ow + ow;
				if (ld(arg, adt, o) == (float)(kh * s.kw + kw)) {
					sum += ld(dy, gdt, o);
				}
			}
		}
		st(dx, ddt, idx, sum);
	}
}

// mp_avgpool: the window's sum, rows then columns, divided by the extent
// with padding counted (PyTorch's count_include_pad=True).
extern "C" __global__ void mp_avgpool(void* y, int ydt, const void* x, int xdt, Pool s, int total) {
	int hw = s.h * s.w, ohw = s.oh * s.ow;
	GRID_STRIDE(idx, total) {
		int i = idx / ohw;
		int o = idx - i * ohw;
		int oh = o / s.ow, ow = o - (o / s.ow) * s.ow;
		int h0, h1, eh, w0, w1, ew;
		window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1, &eh);
		window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1, &ew);
		int plane = i * hw;
		float sum = 0.0f;
		for (int yy = h0; yy < h1; yy++) {
			for (int q = w0; q < w1; q++) {
				sum += ld(x, xdt, plane + yy * s.w + q);
			}
		}
		st(y, ydt, idx, sum / (float)(eh * ew));
	}
}

// mp_avgpool_grad: dx[pixel] = sum over the windows covering it of
// dy / extent. total is n*c*h*w.
extern "C" __global__ void mp_avgpool_grad(void* dx, int ddt, const void* dy, int gdt, Pool s, int total) {
	int hw = s.h * s.w, ohw = s.oh * s.ow;
	GRID_STRIDE(idx, total) {
		int i = idx / hw;
		int pix = idx - i * hw;
		int ih = pix / s.w, iw = pix - (pix / s.w) * s.w;
		float sum = 0.0f;
		int ohEnd = min(s.oh - 1, (ih + s.ph) / s.sh);
		int owEnd = min(s.ow - 1, (iw + s.pw) / s.sw);
		for (int oh = first_cover(ih, s.sh, s.ph, s.kh); oh <= ohEnd; oh++) {
			int h0, h1, eh;
			window(oh, s.sh, s.ph, s.kh, s.h, &h0, &h1, &eh);
			if (ih < h0 || ih >= h1) {
				continue;
			}
			for (int ow = first_cover(iw, s.sw, s.pw, s.kw); ow <= owEnd; ow++) {
				int w0, w1, ew;
				window(ow, s.sw, s.pw, s.kw, s.w, &w0, &w1, &ew);
				if (iw < w0 || iw >= w1) {
					continue;
				}
				sum += ld(dy, gdt, i * ohw + oh * s.ow + ow) / (float)(eh * ew);
			}
		}
		st(dx, ddt, idx, sum);
	}
}
