//go:build !purego

#include "textflag.h"

// The optimiser loops of optim.go, sixteen float32 lanes at a time. Each
// performs the same float32 operations in the same order as the Go loop it
// replaces (separate multiplies and adds, never fused), so the results are
// bitwise equal to it. n is a multiple of 16; the caller does the tail.

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

// func unscaleAVX512(s *float32, n int, inv float32) (nonFinite bool)
// s = s*inv; reports whether any product is Inf or NaN. x-x is +0 for
// every finite x and NaN otherwise, so OR-ing the differences together
// leaves a non-zero lane exactly when some element was not finite.
TEXT ·unscaleAVX512(SB), NOSPLIT, $0-25
	MOVQ s+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS inv+16(FP), Z1
	VPXORD Z2, Z2, Z2
	SHRQ $4, CX
	JZ   unsDone

unsLoop:
	VMOVUPS (DI), Z3
	VMULPS  Z1, Z3, Z3
	VMOVUPS Z3, (DI)
	VSUBPS  Z3, Z3, Z4
	VPORD   Z4, Z2, Z2
	ADDQ    $64, DI
	DECQ    CX
	JNZ     unsLoop

unsDone:
	VPTESTMD Z2, Z2, K1
	KMOVW    K1, AX
	TESTL    AX, AX
	SETNE    nonFinite+24(FP)
	VZEROUPPER
	RET
