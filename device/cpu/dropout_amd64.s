//go:build !purego

#include "textflag.h"

// func dropoutAVX512(dst, src *float32, n int, seed, start, thresh uint64, scale float32)
// dst[i] = src[i]*scale where Mix64(seed, start+i)>>40 >= thresh, else +0:
// Dropout's rule (device.Uniform(key, i) >= p, with thresh the least 24-bit
// draw that passes) on sixteen lanes, the hash in two vectors of eight
// 64-bit counters. n is a multiple of 16.
TEXT ·dropoutAVX512(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTQ seed+24(FP), Z20
	VPBROADCASTQ thresh+40(FP), Z21
	VBROADCASTSS scale+48(FP), Z22
	MOVQ $0x9e3779b97f4a7c15, AX
	VPBROADCASTQ AX, Z23
	MOVQ $0xbf58476d1ce4e5b9, AX
	VPBROADCASTQ AX, Z24
	MOVQ $0x94d049bb133111eb, AX
	VPBROADCASTQ AX, Z25
	MOVQ $16, AX
	VPBROADCASTQ AX, Z26
	// Z0 = start + 0..7, Z1 = start + 8..15
	VPBROADCASTQ start+32(FP), Z0
	MOVQ $0, AX
	MOVQ $1, BX
	VMOVQ AX, X2
	VPINSRQ $1, BX, X2, X2
	MOVQ $2, AX
	MOVQ $3, BX
	VMOVQ AX, X3
	VPINSRQ $1, BX, X3, X3
	VINSERTI128 $1, X3, Y2, Y2
	MOVQ $4, AX
	MOVQ $5, BX
	VMOVQ AX, X3
	VPINSRQ $1, BX, X3, X3
	MOVQ $6, AX
	MOVQ $7, BX
	VMOVQ AX, X4
	VPINSRQ $1, BX, X4, X4
	VINSERTI128 $1, X4, Y3, Y3
	VINSERTI64X4 $1, Y3, Z2, Z2
	VPADDQ Z2, Z0, Z0
	MOVQ $8, AX
	VPBROADCASTQ AX, Z2
	VPADDQ Z2, Z0, Z1
	SHRQ $4, CX
	JZ   doDone

doLoop:
	// z = seed ^ (c * G) + G
	VPMULLQ Z23, Z0, Z4
	VPMULLQ Z23, Z1, Z5
	VPXORQ  Z20, Z4, Z4
	VPXORQ  Z20, Z5, Z5
	VPADDQ  Z23, Z4, Z4
	VPADDQ  Z23, Z5, Z5
	// z = (z ^ z>>30) * M1
	VPSRLQ  $30, Z4, Z6
	VPSRLQ  $30, Z5, Z7
	VPXORQ  Z6, Z4, Z4
	VPXORQ  Z7, Z5, Z5
	VPMULLQ Z24, Z4, Z4
	VPMULLQ Z24, Z5, Z5
	// z = (z ^ z>>27) * M2
	VPSRLQ  $27, Z4, Z6
	VPSRLQ  $27, Z5, Z7
	VPXORQ  Z6, Z4, Z4
	VPXORQ  Z7, Z5, Z5
	VPMULLQ Z25, Z4, Z4
	VPMULLQ Z25, Z5, Z5
	// z ^= z>>31; the draw is z>>40
	VPSRLQ  $31, Z4, Z6
	VPSRLQ  $31, Z5, Z7
	VPXORQ  Z6, Z4, Z4
	VPXORQ  Z7, Z5, Z5
	VPSRLQ  $40, Z4, Z4
	VPSRLQ  $40, Z5, Z5
	VPCMPUQ $5, Z21, Z4, K1 // draw >= thresh: kept
	VPCMPUQ $5, Z21, Z5, K2
	KUNPCKBW K1, K2, K3     // K3 = K2:K1, lanes 0-7 from K1
	VMULPS   (SI), Z22, Z8
	VMOVUPS.Z Z8, K3, Z9
	VMOVUPS  Z9, (DI)
	VPADDQ   Z26, Z0, Z0
	VPADDQ   Z26, Z1, Z1
	ADDQ     $64, SI
	ADDQ     $64, DI
	DECQ     CX
	JNZ      doLoop

doDone:
	VZEROUPPER
	RET

// Mix64's multiplier and the two of its finaliser (M1, M2), as the low and
// high halves VPMULUDQ multiplies by (each in the low 32 bits of a 64-bit
// lane), and 8G, which moves eight counters' products on.
DATA dropM1<>+0(SB)/8, $0xbf58476d1ce4e5b9
DATA dropM1<>+8(SB)/8, $0xbf58476d1ce4e5b9
DATA dropM1<>+16(SB)/8, $0xbf58476d1ce4e5b9
DATA dropM1<>+24(SB)/8, $0xbf58476d1ce4e5b9
GLOBL dropM1<>(SB), RODATA|NOPTR, $32

DATA dropM1hi<>+0(SB)/8, $0xbf58476d
DATA dropM1hi<>+8(SB)/8, $0xbf58476d
DATA dropM1hi<>+16(SB)/8, $0xbf58476d
DATA dropM1hi<>+24(SB)/8, $0xbf58476d
GLOBL dropM1hi<>(SB), RODATA|NOPTR, $32

DATA dropM2<>+0(SB)/8, $0x94d049bb133111eb
DATA dropM2<>+8(SB)/8, $0x94d049bb133111eb
DATA dropM2<>+16(SB)/8, $0x94d049bb133111eb
DATA dropM2<>+24(SB)/8, $0x94d049bb133111eb
GLOBL dropM2<>(SB), RODATA|NOPTR, $32

DATA dropM2hi<>+0(SB)/8, $0x94d049bb
DATA dropM2hi<>+8(SB)/8, $0x94d049bb
DATA dropM2hi<>+16(SB)/8, $0x94d049bb
DATA dropM2hi<>+24(SB)/8, $0x94d049bb
GLOBL dropM2hi<>(SB), RODATA|NOPTR, $32

// MUL64 sets z = z*M mod 2⁶⁴ in each 64-bit lane from 32-bit products:
// lo(z)*lo(M) + (lo(z)*hi(M) + hi(z)*lo(M))<<32. t1, t2 are scratch.
#define MUL64(z, lo, hi, t1, t2) \
	VPMULUDQ hi, z, t1; \
	VPSRLQ   $32, z, t2; \
	VPMULUDQ lo, t2, t2; \
	VPADDQ   t2, t1, t1; \
	VPSLLQ   $32, t1, t1; \
	VPMULUDQ lo, z, z; \
	VPADDQ   t1, z, z

// func dropoutAVX2(dst, src *float32, n int, seed, start, thresh uint64, scale float32)
// dropoutAVX512 for AVX2, eight lanes a step in two vectors of four 64-bit
// counters: Y0 the even elements' (start+2j), Y1 the odd ones'. AVX2 has
// no 64-bit lane multiply, so the counters are kept as c*G (moved on by
// 8G a step, mod 2⁶⁴ as Mix64 multiplies) and the finaliser's two
// multiplies are MUL64. The last z ^= z>>31 leaves z>>40, the draw, as it
// is, so it is left out. The even draws (z>>40) land in the low 32 bits of
// their lanes, the odd ones (z>>8) in the high, and one VPBLENDD puts the
// eight in element order for a signed compare with thresh-1 (thresh <=
// 2²⁴). n is a multiple of 8.
TEXT ·dropoutAVX2(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTQ seed+24(FP), Y10
	MOVQ thresh+40(FP), AX
	DECQ AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11        // thresh-1: a draw is kept when greater
	VBROADCASTSS scale+48(FP), Y12
	MOVQ $0x9e3779b97f4a7c15, R9 // G
	VMOVQ R9, X13
	VPBROADCASTQ X13, Y13
	MOVQ R9, AX
	SHLQ $3, AX
	VMOVQ AX, X14
	VPBROADCASTQ X14, Y14        // 8G
	// Y0 = (start + 0, 2, 4, 6)*G, Y1 = (start + 1, 3, 5, 7)*G
	MOVQ start+32(FP), AX
	IMULQ R9, AX
	LEAQ (AX)(R9*2), BX
	VMOVQ AX, X0
	VPINSRQ $1, BX, X0, X0
	LEAQ (AX)(R9*4), AX
	LEAQ (AX)(R9*2), BX
	VMOVQ AX, X1
	VPINSRQ $1, BX, X1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPADDQ Y13, Y0, Y1
	SHRQ $3, CX
	JZ   doyDone

doyLoop:
	// z = seed ^ (c * G) + G
	VPXOR   Y10, Y0, Y2
	VPXOR   Y10, Y1, Y3
	VPADDQ  Y13, Y2, Y2
	VPADDQ  Y13, Y3, Y3
	// z = (z ^ z>>30) * M1
	VPSRLQ  $30, Y2, Y4
	VPSRLQ  $30, Y3, Y5
	VPXOR   Y4, Y2, Y2
	VPXOR   Y5, Y3, Y3
	MUL64(Y2, dropM1<>(SB), dropM1hi<>(SB), Y4, Y6)
	MUL64(Y3, dropM1<>(SB), dropM1hi<>(SB), Y5, Y7)
	// z = (z ^ z>>27) * M2
	VPSRLQ  $27, Y2, Y4
	VPSRLQ  $27, Y3, Y5
	VPXOR   Y4, Y2, Y2
	VPXOR   Y5, Y3, Y3
	MUL64(Y2, dropM2<>(SB), dropM2hi<>(SB), Y4, Y6)
	MUL64(Y3, dropM2<>(SB), dropM2hi<>(SB), Y5, Y7)
	// the draws, in element order
	VPSRLQ   $40, Y2, Y2
	VPSRLQ   $8, Y3, Y3
	VPBLENDD $0xaa, Y3, Y2, Y2
	VPCMPGTD Y11, Y2, Y2         // draw >= thresh: kept
	VMULPS   (SI), Y12, Y8
	VPAND    Y8, Y2, Y8
	VMOVUPS  Y8, (DI)
	VPADDQ   Y14, Y0, Y0
	VPADDQ   Y14, Y1, Y1
	ADDQ     $32, SI
	ADDQ     $32, DI
	DECQ     CX
	JNZ      doyLoop

doyDone:
	VZEROUPPER
	RET
