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
