//go:build !purego

#include "textflag.h"

// Batch-norm loops of conv.go, sixteen elements a step with a masked step
// for the rest. Sums keep sixteen float64 partial sums, element j going to
// lane j%16, and combine them in a fixed tree (see lanes16 in normsimd.go,
// which the Go loops follow, so both give the same bits). The elementwise
// loops make the same float32 or float64 operations as the Go loops,
// unfused.

// NORMTAIL sets K1 to the last n%16 elements and CX to the whole steps.
#define NORMTAIL \
	MOVQ CX, R11; \
	ANDQ $15, R11; \
	MOVQ $-1, R12; \
	BZHIQ R11, R12, R12; \
	KMOVW R12, K1; \
	SHRQ $4, CX

// LANESUM16 reduces the partial sums in Z0 (lanes 0-7) and Z1 (8-15) to
// one float64 in X0: (l + l+8), then halves of 4, 2 and 1.
#define LANESUM16 \
	VADDPD Z1, Z0, Z0; \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPD Y1, Y0, Y0; \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPD X1, X0, X0; \
	VPERMILPD $1, X0, X1; \
	VADDSD X1, X0, X0

// func scaleShift32(dst, src *float32, n int, scale, shift float32)
// dst = src*scale + shift
TEXT ·scaleShift32(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Z2
	VBROADCASTSS shift+28(FP), Z3
	NORMTAIL
	TESTQ CX, CX
	JZ   ssTail

ssStep:
	VMULPS (SI), Z2, Z0
	VADDPS Z3, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  ssStep

ssTail:
	VMOVUPS.Z (SI), K1, Z0
	VMULPS Z2, Z0, Z0
	VADDPS Z3, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	VZEROUPPER
	RET

// WIDEN16 loads sixteen float32 at (SI) (masked by K when tail) as float64
// in Z4 (elements 0-7) and Z5 (8-15).
#define WIDEN16(src, lo, hi) \
	VCVTPS2PD 0(src), lo; \
	VCVTPS2PD 32(src), hi

// func sum64AVX512(x *float32, n int) float64
TEXT ·sum64AVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	NORMTAIL
	TESTQ CX, CX
	JZ   sTail

sStep:
	WIDEN16(SI, Z4, Z5)
	VADDPD Z4, Z0, Z0
	VADDPD Z5, Z1, Z1
	ADDQ $64, SI
	DECQ CX
	JNZ  sStep

sTail:
	VMOVUPS.Z (SI), K1, Z6
	KSHIFTRW $8, K1, K2
	VCVTPS2PD Y6, Z4
	VEXTRACTF32X8 $1, Z6, Y7
	VCVTPS2PD Y7, Z5
	VADDPD Z4, Z0, K1, Z0
	VADDPD Z5, Z1, K2, Z1
	LANESUM16
	VMOVSD X0, ret+16(FP)
	VZEROUPPER
	RET

// func sumSqDev64AVX512(x *float32, n int, mu float64) float64
// the sum of (float64(x) - mu)^2
TEXT ·sumSqDev64AVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD mu+16(FP), Z3
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	NORMTAIL
	TESTQ CX, CX
	JZ   qTail

qStep:
	WIDEN16(SI, Z4, Z5)
	VSUBPD Z3, Z4, Z4
	VSUBPD Z3, Z5, Z5
	VMULPD Z4, Z4, Z4
	VMULPD Z5, Z5, Z5
	VADDPD Z4, Z0, Z0
	VADDPD Z5, Z1, Z1
	ADDQ $64, SI
	DECQ CX
	JNZ  qStep

qTail:
	VMOVUPS.Z (SI), K1, Z6
	KSHIFTRW $8, K1, K2
	VCVTPS2PD Y6, Z4
	VEXTRACTF32X8 $1, Z6, Y7
	VCVTPS2PD Y7, Z5
	VSUBPD Z3, Z4, Z4
	VSUBPD Z3, Z5, Z5
	VMULPD Z4, Z4, Z4
	VMULPD Z5, Z5, Z5
	VADDPD Z4, Z0, K1, Z0
	VADDPD Z5, Z1, K2, Z1
	LANESUM16
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// BNSUMS adds float64(dy) (Z4, Z5) to Z0, Z1 and (dy*(x-mu))*is to Z2,
// Z3 (under masks ml, mh for the two halves); x as float64 in Z6, Z7.
#define BNSUMS(ml, mh) \
	VADDPD Z4, Z0, ml, Z0; \
	VADDPD Z5, Z1, mh, Z1; \
	VSUBPD Z8, Z6, Z6; \
	VSUBPD Z8, Z7, Z7; \
	VMULPD Z6, Z4, Z6; \
	VMULPD Z7, Z5, Z7; \
	VMULPD Z9, Z6, Z6; \
	VMULPD Z9, Z7, Z7; \
	VADDPD Z6, Z2, ml, Z2; \
	VADDPD Z7, Z3, mh, Z3

// func bnGradSumsAVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64)
TEXT ·bnGradSumsAVX512(SB), NOSPLIT, $0-56
	MOVQ dy+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	VBROADCASTSD mu+24(FP), Z8
	VBROADCASTSD is+32(FP), Z9
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	KXNORW K3, K3, K3            // all lanes, for the whole steps
	NORMTAIL
	TESTQ CX, CX
	JZ   gTail

gStep:
	WIDEN16(SI, Z4, Z5)
	WIDEN16(DX, Z6, Z7)
	BNSUMS(K3, K3)
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  gStep

gTail:
	KSHIFTRW $8, K1, K2
	VMOVUPS.Z (SI), K1, Z10
	VMOVUPS.Z (DX), K1, Z11
	VCVTPS2PD Y10, Z4
	VEXTRACTF32X8 $1, Z10, Y10
	VCVTPS2PD Y10, Z5
	VCVTPS2PD Y11, Z6
	VEXTRACTF32X8 $1, Z11, Y11
	VCVTPS2PD Y11, Z7
	BNSUMS(K1, K2)
	LANESUM16
	VMOVSD X0, sdy+40(FP)
	VMOVAPD Z2, Z0
	VMOVAPD Z3, Z1
	LANESUM16
	VMOVSD X0, sdyx+48(FP)
	VZEROUPPER
	RET

// BNOUT8 computes eight outputs from dy in lo (float64) and x in xs:
// float32(k * ((m*dy - sdy) - ((x-mu)*is)*sdyx)), into Y-half res.
#define BNOUT8(dyv, xs, res) \
	VMULPD  Z10, dyv, dyv; \
	VSUBPD  Z11, dyv, dyv; \
	VSUBPD  Z8, xs, xs; \
	VMULPD  Z9, xs, xs; \
	VMULPD  Z12, xs, xs; \
	VSUBPD  xs, dyv, dyv; \
	VMULPD  Z13, dyv, dyv; \
	VCVTPD2PS dyv, res

// func bnGradOutAVX512(dst, dy, x *float32, n int, c *bnGradConsts)
TEXT ·bnGradOutAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), AX
	VBROADCASTSD 0(AX), Z8       // mu
	VBROADCASTSD 8(AX), Z9       // is
	VBROADCASTSD 16(AX), Z10     // m
	VBROADCASTSD 24(AX), Z11     // sdy
	VBROADCASTSD 32(AX), Z12     // sdyx
	VBROADCASTSD 40(AX), Z13     // k
	NORMTAIL
	TESTQ CX, CX
	JZ   oTail

oStep:
	WIDEN16(SI, Z4, Z5)
	WIDEN16(DX, Z6, Z7)
	BNOUT8(Z4, Z6, Y0)
	BNOUT8(Z5, Z7, Y1)
	VINSERTF32X8 $1, Y1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  oStep

oTail:
	VMOVUPS.Z (SI), K1, Z14
	VMOVUPS.Z (DX), K1, Z15
	VCVTPS2PD Y14, Z4
	VEXTRACTF32X8 $1, Z14, Y14
	VCVTPS2PD Y14, Z5
	VCVTPS2PD Y15, Z6
	VEXTRACTF32X8 $1, Z15, Y15
	VCVTPS2PD Y15, Z7
	BNOUT8(Z4, Z6, Y0)
	BNOUT8(Z5, Z7, Y1)
	VINSERTF32X8 $1, Y1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	VZEROUPPER
	RET
