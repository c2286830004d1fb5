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

// func bnScaleShiftAVX512(dst, src *float32, n int, scale, shift float32)
// dst = src*scale + shift
TEXT ·bnScaleShiftAVX512(SB), NOSPLIT, $0-32
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

// func bnSum64AVX512(x *float32, n int) float64
TEXT ·bnSum64AVX512(SB), NOSPLIT, $0-24
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

// func bnSumSqDev64AVX512(x *float32, n int, mu float64) float64
// the sum of (float64(x) - mu)^2
TEXT ·bnSumSqDev64AVX512(SB), NOSPLIT, $0-32
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

// func bnGradSums64AVX512(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64)
TEXT ·bnGradSums64AVX512(SB), NOSPLIT, $0-56
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

// func bnGradOut32AVX512(dst, dy, x *float32, n int, c *bnGradConsts)
TEXT ·bnGradOut32AVX512(SB), NOSPLIT, $0-40
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

// The AVX2 loops: sixteen elements a step for the sums (in four registers
// of four float64, lanes 0-3, 4-7, 8-11, 12-15), eight for the others, and
// a tail of four-element groups loaded (and stored) through VMASKMOVPS
// under masks from n%16 or n%8. Each operation takes its operands in the
// order of the Go loops' compiled code, which decides a NaN's payload where
// both are NaNs. A sum's lanes that the tail leaves out add +0, which
// changes nothing: a sum that starts at +0 is never -0 (and a NaN sum is
// already quiet); the terms of sumSqDev and the dy*x sums are masked to +0
// first, as (0-mu)^2 need not be 0.

// normLanes is 0-15, one per 32-bit lane.
DATA normLanes<>+0(SB)/8, $0x0000000100000000
DATA normLanes<>+8(SB)/8, $0x0000000300000002
DATA normLanes<>+16(SB)/8, $0x0000000500000004
DATA normLanes<>+24(SB)/8, $0x0000000700000006
DATA normLanes<>+32(SB)/8, $0x0000000900000008
DATA normLanes<>+40(SB)/8, $0x0000000b0000000a
DATA normLanes<>+48(SB)/8, $0x0000000d0000000c
DATA normLanes<>+56(SB)/8, $0x0000000f0000000e
GLOBL normLanes<>(SB), RODATA|NOPTR, $64

// GROUPMASK sets X14 to the elements of tail group q (4q to 4q+3) that
// the tail holds (below the count in every lane of X15), as VMASKMOVPS
// masks.
#define GROUPMASK(q) \
	VPCMPGTD normLanes<>+(16*q)(SB), X15, X14

// LANESUM2 reduces the sixteen partial sums in a0-a3 to one float64 in
// x0 (a0's X register) as lanes16 does: s[l] = lane l + lane l+8, then
// s[l+4] + s[l], s[l+2] + s[l] and s[1] + s[0], the operands in the order
// of lanes16's compiled code. xt is scratch.
#define LANESUM2(a0, a1, a2, a3, x0, xt) \
	VADDPD    a2, a0, a0; \
	VADDPD    a3, a1, a1; \
	VADDPD    a0, a1, a0; \
	VEXTRACTF128 $1, a0, xt; \
	VADDPD    x0, xt, x0; \
	VPERMILPD $1, x0, xt; \
	VADDSD    x0, xt, x0

// func bnScaleShiftAVX2(dst, src *float32, n int, scale, shift float32)
// dst = src*scale + shift, eight a step.
TEXT ·bnScaleShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y2
	VBROADCASTSS shift+28(FP), Y3
	MOVQ CX, AX
	ANDQ $7, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VPCMPGTD normLanes<>(SB), Y15, Y15 // the last n%8 elements
	SHRQ $3, CX
	JZ   ssyTail

ssyStep:
	VMOVUPS (SI), Y0
	VMULPS  Y2, Y0, Y0           // x*scale
	VADDPS  Y3, Y0, Y0           // + shift
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  ssyStep

ssyTail:
	TESTQ AX, AX
	JZ   ssyDone
	VMASKMOVPS (SI), Y15, Y0
	VMULPS  Y2, Y0, Y0
	VADDPS  Y3, Y0, Y0
	VMASKMOVPS Y0, Y15, (DI)

ssyDone:
	VZEROUPPER
	RET

// SUMTAIL4 loads tail group q (four float32 at 16q(SI), under X14) as
// float64 into Y4.
#define SUMTAIL4(q) \
	GROUPMASK(q); \
	VMASKMOVPS (16*q)(SI), X14, X4; \
	VCVTPS2PD  X4, Y4

// func bnSum64AVX2(x *float32, n int) float64
TEXT ·bnSum64AVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	MOVQ CX, AX
	ANDQ $15, AX
	VMOVD AX, X15
	VPBROADCASTD X15, X15
	SHRQ $4, CX
	JZ   syTail

syStep:
	VCVTPS2PD 0(SI), Y4
	VCVTPS2PD 16(SI), Y5
	VCVTPS2PD 32(SI), Y6
	VCVTPS2PD 48(SI), Y7
	VADDPD Y0, Y4, Y0            // x + acc
	VADDPD Y1, Y5, Y1
	VADDPD Y2, Y6, Y2
	VADDPD Y3, Y7, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ  syStep

syTail:
	TESTQ AX, AX
	JZ   sySum
	SUMTAIL4(0)
	VADDPD Y0, Y4, Y0
	SUMTAIL4(1)
	VADDPD Y1, Y4, Y1
	SUMTAIL4(2)
	VADDPD Y2, Y4, Y2
	SUMTAIL4(3)
	VADDPD Y3, Y4, Y3

sySum:
	LANESUM2(Y0, Y1, Y2, Y3, X0, X4)
	VMOVSD X0, ret+16(FP)
	VZEROUPPER
	RET

// SQDEV sets v to (v-mu)^2 (mu in Y8).
#define SQDEV(v) \
	VSUBPD Y8, v, v; \
	VMULPD v, v, v

// SQTAIL4 adds tail group q's masked (x-mu)^2 to acc.
#define SQTAIL4(q, acc) \
	SUMTAIL4(q); \
	SQDEV(Y4); \
	VPMOVSXDQ X14, Y5; \
	VANDPD    Y5, Y4, Y4; \
	VADDPD    acc, Y4, acc

// func bnSumSqDev64AVX2(x *float32, n int, mu float64) float64
// the sum of (float64(x) - mu)^2
TEXT ·bnSumSqDev64AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD mu+16(FP), Y8
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	MOVQ CX, AX
	ANDQ $15, AX
	VMOVD AX, X15
	VPBROADCASTD X15, X15
	SHRQ $4, CX
	JZ   qyTail

qyStep:
	VCVTPS2PD 0(SI), Y4
	VCVTPS2PD 16(SI), Y5
	VCVTPS2PD 32(SI), Y6
	VCVTPS2PD 48(SI), Y7
	SQDEV(Y4)
	SQDEV(Y5)
	SQDEV(Y6)
	SQDEV(Y7)
	VADDPD Y0, Y4, Y0            // dx*dx + acc
	VADDPD Y1, Y5, Y1
	VADDPD Y2, Y6, Y2
	VADDPD Y3, Y7, Y3
	ADDQ $64, SI
	DECQ CX
	JNZ  qyStep

qyTail:
	TESTQ AX, AX
	JZ   qySum
	SQTAIL4(0, Y0)
	SQTAIL4(1, Y1)
	SQTAIL4(2, Y2)
	SQTAIL4(3, Y3)

qySum:
	LANESUM2(Y0, Y1, Y2, Y3, X0, X4)
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// BNSUMS4 adds the four float64 dy in dyv to a, and ((x-mu)*dy)*is (x in
// xv; mu in Y8, is in Y9) to b.
#define BNSUMS4(dyv, xv, a, b) \
	VADDPD dyv, a, a; \
	VSUBPD Y8, xv, xv; \
	VMULPD dyv, xv, xv; \
	VMULPD Y9, xv, xv; \
	VADDPD xv, b, b

// BNTAIL4 is BNSUMS4 for tail group q, masked.
#define BNTAIL4(q, a, b) \
	GROUPMASK(q); \
	VMASKMOVPS (16*q)(SI), X14, X10; \
	VMASKMOVPS (16*q)(DX), X14, X11; \
	VCVTPS2PD  X10, Y10; \
	VCVTPS2PD  X11, Y11; \
	VPMOVSXDQ  X14, Y12; \
	VADDPD     Y10, a, a; \
	VSUBPD     Y8, Y11, Y11; \
	VMULPD     Y10, Y11, Y11; \
	VMULPD     Y9, Y11, Y11; \
	VANDPD     Y12, Y11, Y11; \
	VADDPD     Y11, b, b

// func bnGradSums64AVX2(dy, x *float32, n int, mu, is float64) (sdy, sdyx float64)
TEXT ·bnGradSums64AVX2(SB), NOSPLIT, $0-56
	MOVQ dy+0(FP), SI
	MOVQ x+8(FP), DX
	MOVQ n+16(FP), CX
	VBROADCASTSD mu+24(FP), Y8
	VBROADCASTSD is+32(FP), Y9
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	MOVQ CX, AX
	ANDQ $15, AX
	VMOVD AX, X15
	VPBROADCASTD X15, X15
	SHRQ $4, CX
	JZ   gyTail

gyStep:
	VCVTPS2PD 0(SI), Y10
	VCVTPS2PD 0(DX), Y11
	BNSUMS4(Y10, Y11, Y0, Y4)
	VCVTPS2PD 16(SI), Y12
	VCVTPS2PD 16(DX), Y13
	BNSUMS4(Y12, Y13, Y1, Y5)
	VCVTPS2PD 32(SI), Y10
	VCVTPS2PD 32(DX), Y11
	BNSUMS4(Y10, Y11, Y2, Y6)
	VCVTPS2PD 48(SI), Y12
	VCVTPS2PD 48(DX), Y13
	BNSUMS4(Y12, Y13, Y3, Y7)
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ  gyStep

gyTail:
	TESTQ AX, AX
	JZ   gySum
	BNTAIL4(0, Y0, Y4)
	BNTAIL4(1, Y1, Y5)
	BNTAIL4(2, Y2, Y6)
	BNTAIL4(3, Y3, Y7)

gySum:
	LANESUM2(Y0, Y1, Y2, Y3, X0, X8)
	VMOVSD X0, sdy+40(FP)
	LANESUM2(Y4, Y5, Y6, Y7, X4, X8)
	VMOVSD X4, sdyx+48(FP)
	VZEROUPPER
	RET

// BNOUT4 computes four outputs from dy (float64) in dyv and x in xs:
// float32(k * ((dy*m - sdy) - ((x-mu)*is)*sdyx)), into X(dyv).
#define BNOUT4(dyv, xs, xdyv) \
	VMULPD  Y10, dyv, dyv; \
	VSUBPD  Y11, dyv, dyv; \
	VSUBPD  Y8, xs, xs; \
	VMULPD  Y9, xs, xs; \
	VMULPD  Y12, xs, xs; \
	VSUBPD  xs, dyv, dyv; \
	VMULPD  Y13, dyv, dyv; \
	VCVTPD2PSY dyv, xdyv

// OUTTAIL4 is BNOUT4 for tail group q, loaded and stored under X14.
#define OUTTAIL4(q) \
	GROUPMASK(q); \
	VMASKMOVPS (16*q)(SI), X14, X0; \
	VMASKMOVPS (16*q)(DX), X14, X1; \
	VCVTPS2PD  X0, Y0; \
	VCVTPS2PD  X1, Y1; \
	BNOUT4(Y0, Y1, X0); \
	VMASKMOVPS X0, X14, (16*q)(DI)

// func bnGradOut32AVX2(dst, dy, x *float32, n int, c *bnGradConsts)
TEXT ·bnGradOut32AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ dy+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ c+32(FP), AX
	VBROADCASTSD 0(AX), Y8       // mu
	VBROADCASTSD 8(AX), Y9       // is
	VBROADCASTSD 16(AX), Y10     // m
	VBROADCASTSD 24(AX), Y11     // sdy
	VBROADCASTSD 32(AX), Y12     // sdyx
	VBROADCASTSD 40(AX), Y13     // k
	MOVQ CX, AX
	ANDQ $7, AX
	VMOVD AX, X15
	VPBROADCASTD X15, X15
	SHRQ $3, CX
	JZ   oyTail

oyStep:
	VCVTPS2PD 0(SI), Y0
	VCVTPS2PD 0(DX), Y1
	BNOUT4(Y0, Y1, X0)
	VCVTPS2PD 16(SI), Y2
	VCVTPS2PD 16(DX), Y3
	BNOUT4(Y2, Y3, X2)
	VINSERTF128 $1, X2, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  oyStep

oyTail:
	TESTQ AX, AX
	JZ   oyDone
	OUTTAIL4(0)
	CMPQ AX, $4
	JLE  oyDone
	OUTTAIL4(1)

oyDone:
	VZEROUPPER
	RET
