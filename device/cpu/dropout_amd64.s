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
