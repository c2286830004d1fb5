// transformer.cu: the kernels of device.TransformerKernels: the embedding
// lookup and its scatter-add adjoint, softmax over rows, layer norm, and
// fused causal attention with its recomputing backward pass.
//
// Like the other families, every sum runs in an order fixed by the shapes
// (lane-strided partial sums, butterfly shuffles, loops in order), never
// with float atomics, so results are the same on every run. module.cu
// includes this file after softmax.cu (WARP_ROWS) and random.cu (mix64).
#include "common.cuh"

// embed_id returns ids[i] as a row of a table of vocab rows, or -1 after
// recording i in *bad (the lowest bad position wins, so the Go side's
// panic names the same id every run) when it is not an integer in [0,
// vocab). The conversion saturates and maps NaN to 0, so every bad value
// fails the round trip.
__device__ __forceinline__ int embed_id(const void* ids, int idt, int i, int vocab, int* bad) {
	float v = ld(ids, idt, i);
	int id = (int)v;
	if ((float)id != v || id < 0 || id >= vocab) {
		atomicMin(bad, i);
		return -1;
	}
	return id;
}

// mp_embedding: dst[i, :] = table[ids[i], :]; NaN for a row with a bad id
// (the Go side panics).
extern "C" __global__ void mp_embedding(void* dst, int ddt, const void* table, int tdt, const void* ids, int idt,
                                        int n, int dim, int vocab, int* bad) {
	GRID_STRIDE(k, n * dim) {
		int i = k / dim;
		int id = embed_id(ids, idt, i, vocab, bad);
		st(dst, ddt, k, id < 0 ? __int_as_float(0x7fc00000) : ld(table, tdt, id * dim + (k - i * dim)));
	}
}

// EG_ROWS is how many table rows one block of mp_embedding_grad owns.
#define EG_ROWS 32

// mp_embedding_grad overwrites dtable (vocab, dim) with the scatter-add of
// dy's rows. A block owns EG_ROWS table rows and a strip of BLOCK columns,
// one column per thread, and accumulates them in float in shared memory:
// every thread walks all n ids in order of i and adds dy[i, col] into the
// row ids[i] names when the block owns it. Each accumulator is touched by
// one thread in order of i, so repeated ids add up in the same order on
// every run (the CPU's order) without atomics, and each element of dtable
// is rounded once. Bad ids are skipped after being recorded.
extern "C" __global__ void mp_embedding_grad(void* dtable, int ddt, const void* dy, int gdt, const void* ids, int idt,
                                             int n, int dim, int vocab, int* bad) {
	__shared__ float acc[EG_ROWS][BLOCK];
	__shared__ int sid[BLOCK];
	int t = threadIdx.x;
	int strips = (dim + BLOCK - 1) / BLOCK;
	int blocks = strips * ((vocab + EG_ROWS - 1) / EG_ROWS);
	for (int blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
		int col = (blk % strips) * BLOCK + t;
		int r0 = (blk / strips) * EG_ROWS;
		for (int r = 0; r < EG_ROWS; r++) {
			acc[r][t] = 0.0f;
		}
		for (int i0 = 0; i0 < n; i0 += BLOCK) {
			__syncthreads(); // every thread is done with the previous ids
			if (i0 + t < n) {
				sid[t] = embed_id(ids, idt, i0 + t, vocab, bad);
			}
			__syncthreads();
			int cnt = min(BLOCK, n - i0);
			if (col < dim) {
				for (int k = 0; k < cnt; k++) {
					// A bad id (-1) or another block's row falls outside [0, EG_ROWS).
					unsigned int r = (unsigned int)(sid[k] - r0);
					if (r < EG_ROWS) {
						acc[r][t] += ld(dy, gdt, (i0 + k) * dim + col);
					}
				}
			}
		}
		if (col < dim) {
			for (int r = 0; r < EG_ROWS && r0 + r < vocab; r++) {
				st(dtable, ddt, (r0 + r) * dim + col, acc[r][t]);
			}
		}
	}
}

// mp_softmax: dst = exp(src - max) / sum(exp(src - max)) per row, one warp
// a row. A row whose maximum is +-Inf or NaN comes out NaN, as the CPU's
// (and PyTorch's) does.
extern "C" __global__ void mp_softmax(void* dst, int ddt, const void* src, int sdt, int rows, int cols) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		float m = -INFINITY;
		for (int j = lane; j < cols; j += 32) {
			m = nan_max(m, ld(src, sdt, base + j));
		}
		m = warp_max(m);
		if (!is_finite(m)) {
			for (int j = lane; j < cols; j += 32) {
				st(dst, ddt, base + j, __int_as_float(0x7fc00000));
			}
			continue;
		}
		float s = 0.0f;
		for (int j = lane; j < cols; j += 32) {
			s += expf(ld(src, sdt, base + j) - m);
		}
		float inv = 1.0f / warp_sum(s);
		for (int j = lane; j < cols; j += 32) {
			st(dst, ddt, base + j, expf(ld(src, sdt, base + j) - m) * inv);
		}
	}
}

// mp_softmax_grad: dst = y * (dy - sum(dy * y)) per row.
extern "C" __global__ void mp_softmax_grad(void* dst, int ddt, const void* dy, int gdt, const void* y, int ydt,
                                           int rows, int cols) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		float s = 0.0f;
		for (int j = lane; j < cols; j += 32) {
			s += ld(dy, gdt, base + j) * ld(y, ydt, base + j);
		}
		s = warp_sum(s);
		for (int j = lane; j < cols; j += 32) {
			float yv = ld(y, ydt, base + j);
			st(dst, ddt, base + j, yv * (ld(dy, gdt, base + j) - s));
		}
	}
}

// warp_sum_d is warp_sum in double.
__device__ __forceinline__ double warp_sum_d(double v) {
	for (int m = 16; m > 0; m >>= 1) {
		v += __shfl_xor_sync(0xffffffffu, v, m);
	}
	return v;
}

// mp_layernorm: xhat = (x - mean) * rstd and y = xhat * w + b per row, one
// warp a row. The mean and then the biased variance around it (two passes,
// which keep a large mean's digits) are summed in double, and rstd =
// 1/sqrt(var + eps) is rounded to float once, as the CPU does; the affine
// transform is the CPU's float operations in its order. xhat (x̂ rounded to
// its dtype, for the backward pass) may be null, as may b (no bias).
extern "C" __global__ void mp_layernorm(void* y, int ydt, void* xhat, int hdt, float* rstd, const void* x, int xdt,
                                        const void* w, int wdt, const void* b, int bdt, int rows, int cols, float eps) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		double s = 0.0;
		for (int j = lane; j < cols; j += 32) {
			s += (double)ld(x, xdt, base + j);
		}
		double mu = warp_sum_d(s) / (double)cols;
		double q = 0.0;
		for (int j = lane; j < cols; j += 32) {
			double d = (double)ld(x, xdt, base + j) - mu;
			q += d * d;
		}
		q = warp_sum_d(q);
		float is = (float)(1.0 / sqrt(q / (double)cols + (double)eps));
		float m = (float)mu;
		if (lane == 0) {
			rstd[r] = is;
		}
		for (int j = lane; j < cols; j += 32) {
			float h = (ld(x, xdt, base + j) - m) * is;
			if (xhat) {
				st(xhat, hdt, base + j, h);
			}
			float v = h * ld(w, wdt, j);
			if (b) {
				v = v + ld(b, bdt, j);
			}
			st(y, ydt, base + j, v);
		}
	}
}

// mp_layernorm_grad: dx per row, one warp a row, from the forward pass's
// x̂: with g = dy * w, dx = rstd * ((g - mean(g)) - xhat * mean(g * xhat)).
extern "C" __global__ void mp_layernorm_grad(void* dx, int ddt, const void* dy, int gdt, const void* xhat, int hdt,
                                             const float* rstd, const void* w, int wdt, int rows, int cols) {
	WARP_ROWS(r, rows) {
		int base = r * cols;
		float is = rstd[r];
		float sg = 0.0f, sgh = 0.0f;
		for (int j = lane; j < cols; j += 32) {
			float h = ld(xhat, hdt, base + j);
			float g = ld(dy, gdt, base + j) * ld(w, wdt, j);
			sg += g;
			sgh += g * h;
		}
		float mg = warp_sum(sg) / (float)cols;
		float mgh = warp_sum(sgh) / (float)cols;
		for (int j = lane; j < cols; j += 32) {
			float h = ld(xhat, hdt, base + j);
			float g = ld(dy, gdt, base + j) * ld(w, wdt, j);
			st(dx, ddt, base + j, is * ((g - mg) - h * mgh));
		}
	}
}

// A block of mp_layernorm_grad_wb takes LN_COLS columns and splits the rows
// into LN_GROUPS groups: thread t sums column t % LN_COLS over the rows
// t / LN_COLS, + LN_GROUPS, ... (a warp reads LN_COLS adjacent elements of
// each of 32 / LN_COLS rows at a time).
#define LN_COLS 8
#define LN_GROUPS (BLOCK / LN_COLS)

// mp_layernorm_grad_wb: dw = sum over rows of dy * xhat and db = sum of dy
// (both F32; db may be null). Each thread sums its group's rows in float,
// and one thread per column adds the groups' partial sums in order, in
// double: a fixed order, and enough threads per column that a few hundred
// columns keep the GPU busy.
extern "C" __global__ void mp_layernorm_grad_wb(float* dw, float* db, const void* dy, int gdt, const void* xhat, int hdt,
                                                int rows, int cols) {
	__shared__ float pw[LN_GROUPS][LN_COLS], pb[LN_GROUPS][LN_COLS];
	int c = threadIdx.x % LN_COLS, g = threadIdx.x / LN_COLS;
	int strips = (cols + LN_COLS - 1) / LN_COLS;
	for (int s = blockIdx.x; s < strips; s += gridDim.x) {
		int j = s * LN_COLS + c;
		float sw = 0.0f, sb = 0.0f;
		if (j < cols) {
			for (int r = g; r < rows; r += LN_GROUPS) {
				float gv = ld(dy, gdt, r * cols + j);
				float h = ld(xhat, hdt, r * cols + j);
				sw += gv * h;
				sb += gv;
			}
		}
		__syncthreads(); // the previous strip's partial sums are read
		pw[g][c] = sw;
		pb[g][c] = sb;
		__syncthreads();
		if (g == 0 && j < cols) {
			double tw = 0.0, tb = 0.0;
			for (int k = 0; k < LN_GROUPS; k++) {
				tw += (double)pw[k][c];
				tb += (double)pb[k][c];
			}
			dw[j] = (float)tw;
			if (db) {
				db[j] = (float)tb;
			}
		}
	}
}

// Fused attention on packed qkv (B, T, 3, H, D), after flash attention:
// a block takes a tile of one (batch, head) pair's queries (forward, dq) or
// keys (dk, dv) and walks the other side in tiles of ATT_KEYS rows staged
// in shared memory as float. Scores are computed one per lane (lane j
// holds key j of the tile and takes the whole dot product over D, so no
// shuffles), and products with a row of a tile run with lane x holding
// elements x, x+32, ... of the head. Nothing of size T x T is ever stored:
// the forward pass keeps a running maximum and sum per query row (online
// softmax, float) and writes each row's logsumexp; backward recomputes the
// probabilities from q, k and lse. The probabilities that multiply v, and
// the scores' gradient, are rounded to the operands' dtype first, as the
// CPU's kernels (and a GPU's flash attention with 16-bit operands) do.
//
// The limits: D <= ATT_MAXD (the Go side panics beyond it); shared memory
// is about 42 KB a block, under the 48 KB of static shared memory.

#define ATT_MAXD 128
#define ATT_LANE_D (ATT_MAXD / 32)     // head elements per lane
#define ATT_KEYS 32                    // keys (or, for dk and dv, queries) per tile
#define ATT_WARPS (BLOCK / 32)
#define ATT_FWD_ROWS 2                 // forward: query rows per warp
#define ATT_FWD_TILE (ATT_WARPS * ATT_FWD_ROWS)
#define ATT_KV_KEYS (ATT_KEYS / ATT_WARPS) // dk, dv: keys per warp

// qkv_at is the offset of element x of head h's query (which 0), key (1)
// or value (2) at position t of batch b.
__device__ __forceinline__ int qkv_at(int b, int t, int which, int h, int x, int T, int H, int D) {
	return ((b * T + t) * 3 + which) * H * D + h * D + x;
}

// round_to rounds v to the storage dtype dt and back.
__device__ __forceinline__ float round_to(int dt, float v) {
	if (dt == DT_F16) {
		return f16_to_f32(f32_to_f16(v));
	}
	if (dt == DT_BF16) {
		return bf16_to_f32(f32_to_bf16(v));
	}
	return v;
}

// att_kept reports whether dropout keeps weight (bh, i, j): its draw,
// device.Uniform(key, DropIndex(bh, i, j)), is not below p.
__device__ __forceinline__ bool att_kept(unsigned long long seed, unsigned long long offset, int bh, int T, int i,
                                         int j, float p) {
	unsigned long long idx = ((unsigned long long)bh * (unsigned long long)T + (unsigned long long)i) *
	                             (unsigned long long)T +
	                         (unsigned long long)j;
	float u = (float)(mix64(seed, offset + idx) >> 40) * (1.0f / 16777216.0f);
	return u >= p;
}

// dot_sh is the float dot product of two rows of D elements in shared memory.
__device__ __forceinline__ float dot_sh(const float* a, const float* b, int D) {
	float s = 0.0f;
	for (int x = 0; x < D; x++) {
		s += a[x] * b[x];
	}
	return s;
}

// att_load stages rows t0 .. t0+n-1 of operand which (0 q, 1 k, 2 v) of
// head (b, h) into dst (row stride ld), zeros past T. Every thread of the
// block takes part.
__device__ __forceinline__ void att_load(float* dst, int ld_, const void* qkv, int qdt, int b, int h, int which,
                                         int t0, int n, int T, int H, int D) {
	for (int e = threadIdx.x; e < n * D; e += BLOCK) {
		int r = e / D, x = e - r * D;
		dst[r * ld_ + x] = t0 + r < T ? ld(qkv, qdt, qkv_at(b, t0 + r, which, h, x, T, H, D)) : 0.0f;
	}
}

// att_load_rows stages rows t0 .. t0+n-1 of head h of a (B, T, H, D)
// buffer likewise.
__device__ __forceinline__ void att_load_rows(float* dst, int ld_, const void* src, int sdt, int b, int h, int t0,
                                              int n, int T, int H, int D) {
	for (int e = threadIdx.x; e < n * D; e += BLOCK) {
		int r = e / D, x = e - r * D;
		dst[r * ld_ + x] = t0 + r < T ? ld(src, sdt, ((b * T + t0 + r) * H + h) * D + x) : 0.0f;
	}
}

// mp_attention: y (B, T, H, D) and lse (B, H, T, F32). A block takes
// ATT_FWD_TILE query rows of one head, ATT_FWD_ROWS per warp, and walks
// the keys they see in tiles of ATT_KEYS: per tile and row, lane j scores
// key j, the warp updates the row's running maximum m and sum l (of the
// probabilities before dropout), rescales the row's output by exp(m_old -
// m) and adds the tile's probabilities (after dropout, scaled by dscale =
// 1/(1-drop) and rounded to the operands' dtype) times v.
extern "C" __global__ void mp_attention(void* y, int ydt, float* lse, const void* qkv, int qdt, int B, int T, int H,
                                        int D, float scale, int causal, float drop, float dscale,
                                        unsigned long long seed, unsigned long long offset) {
	__shared__ float qs[ATT_FWD_TILE * ATT_MAXD];
	__shared__ float ks[ATT_KEYS * (ATT_MAXD + 1)];
	__shared__ float vs[ATT_KEYS * ATT_MAXD];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	int kst = D | 1; // ks's row stride: odd, so that 32 lanes reading 32 rows hit 32 banks
	int qtiles = (T + ATT_FWD_TILE - 1) / ATT_FWD_TILE;
	for (int tile = blockIdx.x; tile < B * H * qtiles; tile += gridDim.x) {
		int bh = tile / qtiles, i0 = (tile - bh * qtiles) * ATT_FWD_TILE;
		int b = bh / H, h = bh - b * H;
		int i1 = min(i0 + ATT_FWD_TILE, T);
		__syncthreads(); // the previous tile is done with qs, ks and vs
		att_load(qs, D, qkv, qdt, b, h, 0, i0, ATT_FWD_TILE, T, H, D);
		float m[ATT_FWD_ROWS], l[ATT_FWD_ROWS], o[ATT_FWD_ROWS][ATT_LANE_D];
#pragma unroll
		for (int rr = 0; rr < ATT_FWD_ROWS; rr++) {
			m[rr] = -INFINITY;
			l[rr] = 0.0f;
#pragma unroll
			for (int u = 0; u < ATT_LANE_D; u++) {
				o[rr][u] = 0.0f;
			}
		}
		int nkeys = causal ? i1 : T;
		for (int j0 = 0; j0 < nkeys; j0 += ATT_KEYS) {
			__syncthreads(); // every warp is done with the previous key tile
			att_load(ks, kst, qkv, qdt, b, h, 1, j0, ATT_KEYS, T, H, D);
			att_load(vs, D, qkv, qdt, b, h, 2, j0, ATT_KEYS, T, H, D);
			__syncthreads();
#pragma unroll
			for (int rr = 0; rr < ATT_FWD_ROWS; rr++) {
				int r = wp * ATT_FWD_ROWS + rr;
				int i = i0 + r;
				if (i >= T) {
					continue; // the same for the whole warp
				}
				int jend = min(ATT_KEYS, (causal ? i + 1 : T) - j0); // the row's keys in this tile
				int j = j0 + lane;
				bool vis = lane < jend;
				float s = -INFINITY;
				if (vis) {
					s = dot_sh(&qs[r * D], &ks[lane * kst], D) * scale;
				}
				float mnew = nan_max(m[rr], warp_max(s));
				// With no key seen yet, mnew is -Inf and nothing is added.
				float corr = mnew == -INFINITY ? 1.0f : expf(m[rr] - mnew);
				float p = vis ? expf(s - mnew) : 0.0f;
				l[rr] = l[rr] * corr + warp_sum(p);
				m[rr] = mnew;
				if (drop > 0.0f && vis) {
					p = att_kept(seed, offset, bh, T, i, j, drop) ? p * dscale : 0.0f;
				}
				p = round_to(qdt, p);
#pragma unroll
				for (int u = 0; u < ATT_LANE_D; u++) {
					o[rr][u] *= corr;
				}
				for (int jj = 0; jj < jend; jj++) {
					float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
					for (int u = 0; u < ATT_LANE_D; u++) {
						int x = lane + 32 * u;
						if (x < D) {
							o[rr][u] += pj * vs[jj * D + x];
						}
					}
				}
			}
		}
#pragma unroll
		for (int rr = 0; rr < ATT_FWD_ROWS; rr++) {
			int i = i0 + wp * ATT_FWD_ROWS + rr;
			if (i >= T) {
				continue;
			}
			float inv = 1.0f / l[rr];
#pragma unroll
			for (int u = 0; u < ATT_LANE_D; u++) {
				int x = lane + 32 * u;
				if (x < D) {
					st(y, ydt, ((b * T + i) * H + h) * D + x, o[rr][u] * inv);
				}
			}
			if (lane == 0) {
				lse[bh * T + i] = m[rr] + (float)log((double)l[rr]);
			}
		}
	}
}

// att_di is Di = rowsum(dy * y) of row i of head (b, h), the dy row staged
// in shared memory at g, summed by the warp (every lane gets it).
__device__ __forceinline__ float att_di(const float* g, const void* y, int ydt, int b, int h, int i, int T, int H,
                                        int D, int lane) {
	float s = 0.0f;
	for (int x = lane; x < D; x += 32) {
		s += g[x] * ld(y, ydt, ((b * T + i) * H + h) * D + x);
	}
	return warp_sum(s);
}

// mp_attention_grad_q: dq of dqkv. A block takes ATT_WARPS query rows of
// one head, one per warp, and walks the keys they see: per tile, lane j
// recomputes P_ij = exp(q_i k_j * scale - lse_i) and dP_ij = dy_i v_j
// (times the dropout mask and dscale), dS_ij = P_ij (dP_ij - D_i) rounded
// to the operands' dtype, and the warp adds dS_i k into the row's dq,
// which is scaled once at the end.
extern "C" __global__ void mp_attention_grad_q(void* dqkv, int ddt, const void* dy, int gdt, const void* qkv, int qdt,
                                               const void* y, int ydt, const float* lse, int B, int T, int H, int D,
                                               float scale, int causal, float drop, float dscale,
                                               unsigned long long seed, unsigned long long offset) {
	__shared__ float qs[ATT_WARPS * ATT_MAXD];
	__shared__ float gs[ATT_WARPS * ATT_MAXD];
	__shared__ float ks[ATT_KEYS * (ATT_MAXD + 1)];
	__shared__ float vs[ATT_KEYS * (ATT_MAXD + 1)];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	int kst = D | 1;
	int qtiles = (T + ATT_WARPS - 1) / ATT_WARPS;
	for (int tile = blockIdx.x; tile < B * H * qtiles; tile += gridDim.x) {
		int bh = tile / qtiles, i0 = (tile - bh * qtiles) * ATT_WARPS;
		int b = bh / H, h = bh - b * H;
		int i = i0 + wp;
		__syncthreads();
		att_load(qs, D, qkv, qdt, b, h, 0, i0, ATT_WARPS, T, H, D);
		att_load_rows(gs, D, dy, gdt, b, h, i0, ATT_WARPS, T, H, D);
		__syncthreads();
		float di = 0.0f, li = 0.0f;
		if (i < T) {
			di = att_di(&gs[wp * D], y, ydt, b, h, i, T, H, D, lane);
			li = lse[bh * T + i];
		}
		float dq[ATT_LANE_D];
#pragma unroll
		for (int u = 0; u < ATT_LANE_D; u++) {
			dq[u] = 0.0f;
		}
		int nkeys = causal ? min(i0 + ATT_WARPS, T) : T;
		for (int j0 = 0; j0 < nkeys; j0 += ATT_KEYS) {
			__syncthreads();
			att_load(ks, kst, qkv, qdt, b, h, 1, j0, ATT_KEYS, T, H, D);
			att_load(vs, kst, qkv, qdt, b, h, 2, j0, ATT_KEYS, T, H, D);
			__syncthreads();
			if (i >= T) {
				continue; // the same for the whole warp
			}
			int jend = min(ATT_KEYS, (causal ? i + 1 : T) - j0);
			float ds = 0.0f;
			if (lane < jend) {
				float p = expf(dot_sh(&qs[wp * D], &ks[lane * kst], D) * scale - li);
				float dp = dot_sh(&gs[wp * D], &vs[lane * kst], D);
				if (drop > 0.0f) {
					dp = att_kept(seed, offset, bh, T, i, j0 + lane, drop) ? dp * dscale : 0.0f;
				}
				ds = round_to(qdt, p * (dp - di));
			}
			for (int jj = 0; jj < jend; jj++) {
				float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
				for (int u = 0; u < ATT_LANE_D; u++) {
					int x = lane + 32 * u;
					if (x < D) {
						dq[u] += dsj * ks[jj * kst + x];
					}
				}
			}
		}
		if (i < T) {
#pragma unroll
			for (int u = 0; u < ATT_LANE_D; u++) {
				int x = lane + 32 * u;
				if (x < D) {
					st(dqkv, ddt, qkv_at(b, i, 0, h, x, T, H, D), scale * dq[u]);
				}
			}
		}
	}
}

// mp_attention_grad_kv: dk and dv of dqkv. A block takes ATT_KEYS keys of
// one head and walks the query rows that see them, ATT_WARPS at a time:
// thread (warp r, lane j) recomputes P, dP and dS for query r and key j
// into shared memory (Pd = P times the dropout mask and dscale, and dS,
// both rounded to the operands' dtype), then warp w adds, for its
// ATT_KV_KEYS keys, Pd_rj dy_r into dv and dS_rj q_r into dk, lane x
// holding elements x, x+32, ... Every key's sums run over the queries in
// order, so dk and dv need no atomics; dk is scaled once at the end.
extern "C" __global__ void mp_attention_grad_kv(void* dqkv, int ddt, const void* dy, int gdt, const void* qkv,
                                                int qdt, const void* y, int ydt, const float* lse, int B, int T,
                                                int H, int D, float scale, int causal, float drop, float dscale,
                                                unsigned long long seed, unsigned long long offset) {
	__shared__ float ks[ATT_KEYS * (ATT_MAXD + 1)];
	__shared__ float vs[ATT_KEYS * (ATT_MAXD + 1)];
	__shared__ float qs[ATT_WARPS * ATT_MAXD];
	__shared__ float gs[ATT_WARPS * ATT_MAXD];
	__shared__ float pd[ATT_WARPS][ATT_KEYS];
	__shared__ float dss[ATT_WARPS][ATT_KEYS];
	int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
	int kst = D | 1;
	int ktiles = (T + ATT_KEYS - 1) / ATT_KEYS;
	for (int tile = blockIdx.x; tile < B * H * ktiles; tile += gridDim.x) {
		int bh = tile / ktiles, j0 = (tile - bh * ktiles) * ATT_KEYS;
		int b = bh / H, h = bh - b * H;
		__syncthreads();
		att_load(ks, kst, qkv, qdt, b, h, 1, j0, ATT_KEYS, T, H, D);
		att_load(vs, kst, qkv, qdt, b, h, 2, j0, ATT_KEYS, T, H, D);
		float dk[ATT_KV_KEYS][ATT_LANE_D], dv[ATT_KV_KEYS][ATT_LANE_D];
#pragma unroll
		for (int kk = 0; kk < ATT_KV_KEYS; kk++) {
#pragma unroll
			for (int u = 0; u < ATT_LANE_D; u++) {
				dk[kk][u] = 0.0f;
				dv[kk][u] = 0.0f;
			}
		}
		int j = j0 + lane;
		// Under the causal mask, queries before j0 see none of these keys.
		for (int q0 = causal ? j0 : 0; q0 < T; q0 += ATT_WARPS) {
			__syncthreads(); // the previous rows' pd, dss, qs and gs are used
			att_load(qs, D, qkv, qdt, b, h, 0, q0, ATT_WARPS, T, H, D);
			att_load_rows(gs, D, dy, gdt, b, h, q0, ATT_WARPS, T, H, D);
			__syncthreads();
			int i = q0 + wp;
			float p = 0.0f, ds = 0.0f;
			if (i < T) {
				float di = att_di(&gs[wp * D], y, ydt, b, h, i, T, H, D, lane);
				if (j < T && (!causal || j <= i)) {
					p = expf(dot_sh(&qs[wp * D], &ks[lane * kst], D) * scale - lse[bh * T + i]);
					float dp = dot_sh(&gs[wp * D], &vs[lane * kst], D);
					float pdrop = p;
					if (drop > 0.0f) {
						bool kept = att_kept(seed, offset, bh, T, i, j, drop);
						pdrop = kept ? p * dscale : 0.0f;
						dp = kept ? dp * dscale : 0.0f;
					}
					ds = p * (dp - di);
					p = pdrop;
				}
			}
			pd[wp][lane] = round_to(qdt, p);
			dss[wp][lane] = round_to(qdt, ds);
			__syncthreads();
			int rend = min(ATT_WARPS, T - q0);
			for (int r = 0; r < rend; r++) {
#pragma unroll
				for (int kk = 0; kk < ATT_KV_KEYS; kk++) {
					float pv = pd[r][wp * ATT_KV_KEYS + kk];
					float dsv = dss[r][wp * ATT_KV_KEYS + kk];
#pragma unroll
					for (int u = 0; u < ATT_LANE_D; u++) {
						int x = lane + 32 * u;
						if (x < D) {
							dv[kk][u] += pv * gs[r * D + x];
							dk[kk][u] += dsv * qs[r * D + x];
						}
					}
				}
			}
		}
#pragma unroll
		for (int kk = 0; kk < ATT_KV_KEYS; kk++) {
			int jk = j0 + wp * ATT_KV_KEYS + kk;
			if (jk >= T) {
				continue;
			}
#pragma unroll
			for (int u = 0; u < ATT_LANE_D; u++) {
				int x = lane + 32 * u;
				if (x < D) {
					st(dqkv, ddt, qkv_at(b, jk, 1, h, x, T, H, D), scale * dk[kk][u]);
					st(dqkv, ddt, qkv_at(b, jk, 2, h, x, T, H, D), dv[kk][u]);
				}
			}
		}
	}
}
