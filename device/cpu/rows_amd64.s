//go:build !purego

#include "textflag.h"

// func addWidenAVX512(dst *float64, src *float32, n int)
// dst[i] += float64(src[i]), eight lanes at a time; n is a multiple of 8.
// Each element gets the one addition the Go loop gives it, so the sums are
// bitwise equal to it whatever the lane count.
TEXT ·addWidenAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   awDone

awLoop:
	VCVTPS2PD (SI), Z0
	VADDPD    (DI), Z0, Z0
	VMOVUPD   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       awLoop

awDone:
	VZEROUPPER
	RET

// func addWidenAVX2(dst *float64, src *float32, n int)
// addWidenAVX512 four lanes at a time; n is a multiple of 4.
TEXT ·addWidenAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $2, CX
	JZ   aw2Done

aw2Loop:
	VCVTPS2PD (SI), Y0
	VADDPD    (DI), Y0, Y0
	VMOVUPD   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       aw2Loop

aw2Done:
	VZEROUPPER
	RET

// func sumBlocksAVX512(src *float32, n int) float64
// sumBlocksGo: partial j of the 32 is lane j%8 of Z(j/8); n is a positive
// multiple of 32. The combination follows combinePartials.
TEXT ·sumBlocksAVX512(SB), NOSPLIT, $0-24
	MOVQ   src+0(FP), SI
	MOVQ   n+8(FP), CX
	SHRQ   $5, CX
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3

sbLoop:
	VCVTPS2PD (SI), Z4
	VCVTPS2PD 32(SI), Z5
	VCVTPS2PD 64(SI), Z6
	VCVTPS2PD 96(SI), Z7
	VADDPD    Z4, Z0, Z0
	VADDPD    Z5, Z1, Z1
	VADDPD    Z6, Z2, Z2
	VADDPD    Z7, Z3, Z3
	ADDQ      $128, SI
	DECQ      CX
	JNZ       sbLoop

	VADDPD       Z1, Z0, Z0 // (0+1)
	VADDPD       Z3, Z2, Z2 // (2+3)
	VADDPD       Z2, Z0, Z0 // q
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPD       Y1, Y0, Y0 // q[k] + q[k+4]
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0 // + q[k+2]
	VPERMILPD    $1, X0, X1
	VADDSD       X1, X0, X0 // q[0] + q[1]
	VMOVSD       X0, ret+16(FP)
	VZEROUPPER
	RET

// func sumBlocksAVX2(src *float32, n int) float64
// sumBlocksAVX512 with each Z accumulator as two Y ones: partial j is lane
// j%4 of Y(j/4); n is a positive multiple of 32.
TEXT ·sumBlocksAVX2(SB), NOSPLIT, $0-24
	MOVQ   src+0(FP), SI
	MOVQ   n+8(FP), CX
	SHRQ   $5, CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7

sb2Loop:
	VCVTPS2PD (SI), Y8
	VCVTPS2PD 16(SI), Y9
	VCVTPS2PD 32(SI), Y10
	VCVTPS2PD 48(SI), Y11
	VADDPD    Y8, Y0, Y0
	VADDPD    Y9, Y1, Y1
	VADDPD    Y10, Y2, Y2
	VADDPD    Y11, Y3, Y3
	VCVTPS2PD 64(SI), Y8
	VCVTPS2PD 80(SI), Y9
	VCVTPS2PD 96(SI), Y10
	VCVTPS2PD 112(SI), Y11
	VADDPD    Y8, Y4, Y4
	VADDPD    Y9, Y5, Y5
	VADDPD    Y10, Y6, Y6
	VADDPD    Y11, Y7, Y7
	ADDQ      $128, SI
	DECQ      CX
	JNZ       sb2Loop

	// Z0 = (Y0, Y1), Z1 = (Y2, Y3), Z2 = (Y4, Y5), Z3 = (Y6, Y7).
	VADDPD       Y2, Y0, Y0 // (0+1), low half
	VADDPD       Y3, Y1, Y1 // (0+1), high half
	VADDPD       Y6, Y4, Y4 // (2+3), low
	VADDPD       Y7, Y5, Y5 // (2+3), high
	VADDPD       Y4, Y0, Y0 // q[0:4]
	VADDPD       Y5, Y1, Y1 // q[4:8]
	VADDPD       Y1, Y0, Y0 // q[k] + q[k+4]
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0 // + q[k+2]
	VPERMILPD    $1, X0, X1
	VADDSD       X1, X0, X0 // q[0] + q[1]
	VMOVSD       X0, ret+16(FP)
	VZEROUPPER
	RET
