// conv.cu: Im2Col and Col2Im, the convolution helpers (the GEMM itself goes
// to cuBLAS). Col2Im gathers: one thread per pixel adds the column entries
// that read it in the CPU backend's order (kh, kw ascending), so the sums
// are bitwise the CPU's and need no atomics.
#include "common.cuh"

// Conv is device.ConvShape, as 14 ints (the Go side's convParam).
struct Conv {
	int n, c, h, w;
	int kh, kw;
	int sh, sw;
	int ph, pw;
	int oh, ow;
	int n0, nb;
};

// mp_im2col writes col (nb, c*kh*kw, oh*ow): element
// ((i*kh + y)*kw + x)*oh*ow + p*ow + q, for image plane i = (image-n0)*c +
// channel, holds input pixel (p*sh - ph + y, q*sw - pw + x), or 0 in the
// padding.
extern "C" __global__ void mp_im2col(void* col, int cdt, const void* x, int xdt, Conv s, int total) {
	GRID_STRIDE(idx, total) {
		int t = idx;
		int q = t % s.ow;
		t /= s.ow;
		int p = t % s.oh;
		t /= s.oh;
		int kx = t % s.kw;
		t /= s.kw;
		int ky = t % s.kh;
		int i = t / s.kh;
		int ih = p * s.sh - s.ph + ky;
		int iw = q * s.sw - s.pw + kx;
		float v = 0.0f;
		if (ih >= 0 && ih < s.h && iw >= 0 && iw < s.w) {
			v = ld(x, xdt, (s.n0 * s.c + i) * s.h * s.w + ih * s.w + iw);
		}
		st(col, cdt, idx, v);
	}
}

// mp_col2im overwrites images [n0, n0+nb) of dx with the sum of the col
// entries that read each pixel; total is nb*c*h*w.
extern "C" __global__ void mp_col2im(void* dx, int ddt, const void* col, int cdt, Conv s, int total) {
	int hw = s.h * s.w, ohw = s.oh * s.ow;
	GRID_STRIDE(idx, total) {
		int i = idx / hw;
		int pix = idx - i * hw;
		int ih = pix / s.w;
		int iw = pix - ih * s.w;
		float sum = 0.0f;
		for (int ky = 0; ky < s.kh; ky++) {
			int th = ih + s.ph - ky; // = p*sh for the output row p that reads ih
			if (th < 0 || th % s.sh != 0 || th / s.sh >= s.oh) {
				continue;
			}
			int p = th / s.sh;
			for (int kx = 0; kx < s.kw; kx++) {
				int tw = iw + s.pw - kx;
				if (tw < 0 || tw % s.sw != 0 || tw / s.sw >= s.ow) {
					continue;
				}
				int q = tw / s.sw;
				sum += ld(col, cdt, ((i * s.kh + ky) * s.kw + kx) * ohw + p * s.ow + q);
			}
		}
		st(dx, ddt, s.n0 * s.c * hw + idx, sum);
	}
}
