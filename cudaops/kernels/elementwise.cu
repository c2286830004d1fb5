// elementwise.cu: Fill, Copy (with dtype conversion), Axpby, Binary with
// broadcasting strides, Unary and UnaryGrad. One thread per element, grid
// stride. Each mirrors device/cpu/elementwise.go operation for operation;
// nvcc runs with -fmad=false so a*x+b*y rounds twice, as Go does on amd64.
#include "common.cuh"

extern "C" __global__ void mp_fill(void* dst, int ddt, int n, float v) {
	GRID_STRIDE(i, n) {
		st(dst, ddt, i, v);
	}
}

// mp_copy copies nb blocks of cnt elements: block b reads src from
// soff + b*sstride and writes dst from doff + b*dstride, converting dtypes.
// Copy is nb = 1; Gemm uses the blocks to move matrices in and out of
// temporaries.
extern "C" __global__ void mp_copy(void* dst, int ddt, int doff, int dstride,
                                   const void* src, int sdt, int soff, int sstride,
                                   int cnt, int nb) {
	int total = cnt * nb;
	GRID_STRIDE(i, total) {
		int b = i / cnt;
		int j = i - b * cnt;
		st(dst, ddt, doff + b * dstride + j, ld(src, sdt, soff + b * sstride + j));
	}
}

// mp_gemm_scale is Gemm when K == 0 or Alpha == 0: C = Beta*C, and 0 (not
// 0*C, which would keep a NaN) when Beta == 0, as the CPU backend does.
extern "C" __global__ void mp_gemm_scale(void* c, int cdt, int off, int stride, int mn, int nb, float beta) {
	int total = mn * nb;
	GRID_STRIDE(i, total) {
		int b = i / mn;
		int j = off + b * stride + (i - b * mn);
		st(c, cdt, j, beta == 0.0f ? 0.0f : beta * ld(c, cdt, j));
	}
}

extern "C" __global__ void mp_axpby(void* dst, int ddt, const void* x, int xdt, const void* y, int ydt,
                                    int n, float alpha, float beta) {
	GRID_STRIDE(i, n) {
		float v = alpha * ld(x, xdt, i);
		if (beta != 0.0f) {
			// dst may be x or y: each element is read before it is written,
			// by the same thread.
			v = v + beta * ld(y, ydt, i);
		}
		st(dst, ddt, i, v);
	}
}

// Binary operation codes: device.BinaryOp's values.
#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3
#define OP_MAXIMUM 4
#define OP_MINIMUM 5

__device__ __forceinline__ float binary_op(int op, float x, float y) {
	switch (op) {
	case OP_ADD:
		return x + y;
	case OP_SUB:
		return x - y;
	case OP_MUL:
		return x * y;
	case OP_DIV:
		return x / y;
	case OP_MAXIMUM:
		// NaN propagates (torch.maximum); on a tie y is returned, as on the CPU.
		return (is_nan(x) || x > y) ? x : y;
	default: // OP_MINIMUM
		return (is_nan(x) || x < y) ? x : y;
	}
}

// mp_binary computes dst[i] = op(a[oa], b[ob]) over the n elements of d's
// space, dst contiguous, a and b read through d.sa and d.sb.
extern "C" __global__ void mp_binary(int op, void* dst, int ddt, const void* a, int adt,
                                     const void* b, int bdt, int n, Dims d) {
	GRID_STRIDE(i, n) {
		int oa, ob;
		dims_offsets(d, i, &oa, &ob);
		st(dst, ddt, i, binary_op(op, ld(a, adt, oa), ld(b, bdt, ob)));
	}
}

// Unary operation codes: device.UnaryOp's values.
#define U_SCALE 0
#define U_ADDCONST 1
#define U_NEG 2
#define U_EXP 3
#define U_LOG 4
#define U_SQRT 5
#define U_RSQRT 6
#define U_SQUARE 7
#define U_POW 8
#define U_RELU 9
#define U_GELU 10
#define U_TANH 11
#define U_SIGMOID 12
#define U_RECIP 13

// The transcendental functions are CUDA's float versions (within 2 ulp of
// the float64 ones the CPU backend rounds, inside the F32 tolerance); the
// build does not use --use_fast_math, so division and sqrt are correctly
// rounded and subnormals are kept.
__device__ __forceinline__ float unary_op(int op, float x, float alpha) {
	switch (op) {
	case U_SCALE:
		return alpha * x;
	case U_ADDCONST:
		return x + alpha;
	case U_NEG:
		return -x;
	case U_EXP:
		return expf(x);
	case U_LOG:
		return logf(x);
	case U_SQRT:
		return sqrtf(x);
	case U_RSQRT:
		return 1.0f / sqrtf(x + alpha);
	case U_SQUARE:
		return x * x;
	case U_POW:
		return powf(x, alpha);
	case U_RELU:
		// A NaN of either sign stays NaN (PyTorch propagates it); negative
		// values and -0 become +0.
		return (x > 0.0f || is_nan(x)) ? x : 0.0f;
	case U_GELU:
		// normcdff is accurate in the tails, where 1+erf(x/sqrt2) cancels.
		return x * normcdff(x);
	case U_TANH:
		return tanhf(x);
	case U_SIGMOID:
		return 1.0f / (1.0f + expf(-x));
	default: // U_RECIP
		return 1.0f / x;
	}
}

extern "C" __global__ void mp_unary(int op, void* dst, int ddt, const void* src, int sdt, int n, float alpha) {
	GRID_STRIDE(i, n) {
		st(dst, ddt, i, unary_op(op, ld(src, sdt, i), alpha));
	}
}

// mp_unary_grad computes dst = dy * op'(in): in is the forward output for
// ReLU, Tanh and Sigmoid and the input for GELU. The Go side rejects other
// ops before launching.
extern "C" __global__ void mp_unary_grad(int op, void* dst, int ddt, const void* dy, int gdt,
                                         const void* in, int idt, int n) {
	GRID_STRIDE(i, n) {
		float g = ld(dy, gdt, i);
		float x = ld(in, idt, i);
		float o;
		switch (op) {
		case U_RELU:
			// PyTorch's threshold_backward: zero where y <= 0, which a NaN y
			// is not, so the gradient passes there.
			o = x <= 0.0f ? 0.0f : g;
			break;
		case U_TANH:
			o = g * (1.0f - x * x);
			break;
		case U_SIGMOID:
			o = g * x * (1.0f - x);
			break;
		default: { // U_GELU
			float cdf = normcdff(x);
			float pdf = expf(-0.5f * x * x) * 0.398942280401432678f; // 1/sqrt(2*pi)
			o = g * (cdf + x * pdf);
			break;
		}
		}
		st(dst, ddt, i, o);
	}
}
