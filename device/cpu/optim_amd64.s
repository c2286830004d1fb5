//go:build !purego

#include "textflag.h"

// The optimiser loops of optim.go, sixteen float32 lanes at a time in
// AVX-512 and eight in AVX2. Each performs the same float32 operations in
// the same order as the Go loop it replaces (separate multiplies and adds,
// never fused), so the results are bitwise equal to it. n is a multiple of
// the lane count; the caller does the tail.

// func sgdMomentumAVX512(p, gr, m *float32, n int, mom, damp, lr float32)
// m = mom*m + damp*g; p = p - lr*m
TEXT ·sgdMomentumAVX512(SB), NOSPLIT, $0-44
	MOVQ p+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS mom+32(FP), Z1
	VBROADCASTSS damp+36(FP), Z2
	VBROADCASTSS lr+40(FP), Z3
	SHRQ $4, CX
	JZ   sgdmDone

sgdmLoop:
	VMOVUPS (DX), Z4
	VMOVUPS (SI), Z5
	VMULPS  Z1, Z4, Z4 // mom*m
	VMULPS  Z2, Z5, Z5 // damp*g
	VADDPS  Z5, Z4, Z4 // m'
	VMOVUPS Z4, (DX)
	VMULPS  Z3, Z4, Z4 // lr*m'
	VMOVUPS (DI), Z6
	VSUBPS  Z4, Z6, Z6 // p - lr*m'
	VMOVUPS Z6, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	ADDQ    $64, DX
	DECQ    CX
	JNZ     sgdmLoop

sgdmDone:
	VZEROUPPER
	RET

// func sgdPlainAVX512(p, gr *float32, n int, lr float32)
// p = p - lr*g
TEXT ·sgdPlainAVX512(SB), NOSPLIT, $0-28
	MOVQ p+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS lr+24(FP), Z3
	SHRQ $4, CX
	JZ   sgdpDone

sgdpLoop:
	VMOVUPS (SI), Z5
	VMULPS  Z3, Z5, Z5
	VMOVUPS (DI), Z6
	VSUBPS  Z5, Z6, Z6
	VMOVUPS Z6, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	DECQ    CX
	JNZ     sgdpLoop

sgdpDone:
	VZEROUPPER
	RET

// func adamAVX512(p, gr, m, v *float32, n int, k *adamConsts)
//
// mode 1 (Adam with weight decay): g = g + wd*p
// mode 2 (AdamW with weight decay): p = p*decay
// m = m + omb1*(g-m)
// v = b2*v + (omb2*g)*g
// p = p - (stepSize*m) / (sqrt(v)/bc2sqrt + eps)
TEXT ·adamAVX512(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	VBROADCASTSS 0(AX), Z1  // omb1
	VBROADCASTSS 4(AX), Z2  // b2
	VBROADCASTSS 8(AX), Z3  // omb2
	VBROADCASTSS 12(AX), Z4 // stepSize
	VBROADCASTSS 16(AX), Z5 // bc2sqrt
	VBROADCASTSS 20(AX), Z6 // eps
	VBROADCASTSS 24(AX), Z7 // decay
	VBROADCASTSS 28(AX), Z8 // wd
	MOVL 32(AX), BX         // mode
	SHRQ $4, CX
	JZ   adamDone

adamLoop:
	VMOVUPS (SI), Z10 // g
	VMOVUPS (DI), Z11 // p
	CMPL    BX, $1
	JNE     adamNotCoupled
	VMULPS  Z11, Z8, Z12 // wd*p
	VADDPS  Z12, Z10, Z10
	JMP     adamMoments

adamNotCoupled:
	CMPL    BX, $2
	JNE     adamMoments
	VMULPS  Z7, Z11, Z11 // p*decay

adamMoments:
	VMOVUPS (DX), Z12    // m
	VSUBPS  Z12, Z10, Z13 // g-m
	VMULPS  Z13, Z1, Z13  // omb1*(g-m)
	VADDPS  Z13, Z12, Z12 // m'
	VMOVUPS Z12, (DX)
	VMOVUPS (R8), Z14     // v
	VMULPS  Z14, Z2, Z14  // b2*v
	VMULPS  Z10, Z3, Z15  // omb2*g
	VMULPS  Z10, Z15, Z15 // (omb2*g)*g
	VADDPS  Z15, Z14, Z14 // v'
	VMOVUPS Z14, (R8)
	VSQRTPS Z14, Z14
	VDIVPS  Z5, Z14, Z14  // sqrt(v')/bc2sqrt
	VADDPS  Z6, Z14, Z14  // + eps
	VMULPS  Z12, Z4, Z12  // stepSize*m'
	VDIVPS  Z14, Z12, Z12 // /denom
	VSUBPS  Z12, Z11, Z11 // p - ...
	VMOVUPS Z11, (DI)
	ADDQ    $64, DI
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, R8
	DECQ    CX
	JNZ     adamLoop

adamDone:
	VZEROUPPER
	RET

// The AVX2 loops are the AVX-512 ones on YMM registers, instruction for
// instruction.

// func sgdMomentumAVX2(p, gr, m *float32, n int, mom, damp, lr float32)
// m = mom*m + damp*g; p = p - lr*m
TEXT ·sgdMomentumAVX2(SB), NOSPLIT, $0-44
	MOVQ p+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS mom+32(FP), Y1
	VBROADCASTSS damp+36(FP), Y2
	VBROADCASTSS lr+40(FP), Y3
	SHRQ $3, CX
	JZ   sgdm2Done

sgdm2Loop:
	VMOVUPS (DX), Y4
	VMOVUPS (SI), Y5
	VMULPS  Y1, Y4, Y4 // mom*m
	VMULPS  Y2, Y5, Y5 // damp*g
	VADDPS  Y5, Y4, Y4 // m'
	VMOVUPS Y4, (DX)
	VMULPS  Y3, Y4, Y4 // lr*m'
	VMOVUPS (DI), Y6
	VSUBPS  Y4, Y6, Y6 // p - lr*m'
	VMOVUPS Y6, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     sgdm2Loop

sgdm2Done:
	VZEROUPPER
	RET

// func sgdPlainAVX2(p, gr *float32, n int, lr float32)
// p = p - lr*g
TEXT ·sgdPlainAVX2(SB), NOSPLIT, $0-28
	MOVQ p+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS lr+24(FP), Y3
	SHRQ $3, CX
	JZ   sgdp2Done

sgdp2Loop:
	VMOVUPS (SI), Y5
	VMULPS  Y3, Y5, Y5
	VMOVUPS (DI), Y6
	VSUBPS  Y5, Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	DECQ    CX
	JNZ     sgdp2Loop

sgdp2Done:
	VZEROUPPER
	RET

// func adamAVX2(p, gr, m, v *float32, n int, k *adamConsts)
// adamAVX512's steps in eight lanes.
TEXT ·adamAVX2(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ m+16(FP), DX
	MOVQ v+24(FP), R8
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	VBROADCASTSS 0(AX), Y1  // omb1
	VBROADCASTSS 4(AX), Y2  // b2
	VBROADCASTSS 8(AX), Y3  // omb2
	VBROADCASTSS 12(AX), Y4 // stepSize
	VBROADCASTSS 16(AX), Y5 // bc2sqrt
	VBROADCASTSS 20(AX), Y6 // eps
	VBROADCASTSS 24(AX), Y7 // decay
	VBROADCASTSS 28(AX), Y8 // wd
	MOVL 32(AX), BX         // mode
	SHRQ $3, CX
	JZ   adam2Done

adam2Loop:
	VMOVUPS (SI), Y10 // g
	VMOVUPS (DI), Y11 // p
	CMPL    BX, $1
	JNE     adam2NotCoupled
	VMULPS  Y11, Y8, Y12 // wd*p
	VADDPS  Y12, Y10, Y10
	JMP     adam2Moments

adam2NotCoupled:
	CMPL    BX, $2
	JNE     adam2Moments
	VMULPS  Y7, Y11, Y11 // p*decay

adam2Moments:
	VMOVUPS (DX), Y12    // m
	VSUBPS  Y12, Y10, Y13 // g-m
	VMULPS  Y13, Y1, Y13  // omb1*(g-m)
	VADDPS  Y13, Y12, Y12 // m'
	VMOVUPS Y12, (DX)
	VMOVUPS (R8), Y14     // v
	VMULPS  Y14, Y2, Y14  // b2*v
	VMULPS  Y10, Y3, Y15  // omb2*g
	VMULPS  Y10, Y15, Y15 // (omb2*g)*g
	VADDPS  Y15, Y14, Y14 // v'
	VMOVUPS Y14, (R8)
	VSQRTPS Y14, Y14
	VDIVPS  Y5, Y14, Y14  // sqrt(v')/bc2sqrt
	VADDPS  Y6, Y14, Y14  // + eps
	VMULPS  Y12, Y4, Y12  // stepSize*m'
	VDIVPS  Y14, Y12, Y12 // /denom
	VSUBPS  Y12, Y11, Y11 // p - ...
	VMOVUPS Y11, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, R8
	DECQ    CX
	JNZ     adam2Loop

adam2Done:
	VZEROUPPER
	RET
