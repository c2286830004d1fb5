//go:build !purego

#include "textflag.h"

// ReLU and its gradient on the bit patterns, sixteen float32 or thirty-two
// 16-bit lanes at a time (relu.go has the rules and the Go loops these
// replace, bit for bit). n is a multiple of the lane count; the caller does
// the tail.

// func reluF32AVX512(dst, src *uint32, n int)
// dst = src, or +0 where src is negative or -0 (not a NaN).
TEXT ·reluF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z8
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z9
	SHRQ $4, CX
	JZ   reluDone

reluLoop:
	VMOVDQU32   (SI), Z0
	VPXORD      Z8, Z0, Z1
	VPCMPUD     $6, Z9, Z1, K1 // keep: x^sign > +Inf, i.e. not (negative and not NaN)
	VMOVDQU32.Z Z0, K1, Z2
	VMOVDQU32   Z2, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JNZ         reluLoop

reluDone:
	VZEROUPPER
	RET

// func reluGradF32AVX512(dst, gr, yv *uint32, n int)
// dst = g where y > 0 or y is a NaN, else +0.
TEXT ·reluGradF32AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ yv+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL $1, AX
	VPBROADCASTD AX, Z8
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z9
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z10
	SHRQ $4, CX
	JZ   rgDone

rgLoop:
	VMOVDQU32   (DX), Z0
	VPSUBD      Z8, Z0, Z1
	VPCMPUD     $1, Z9, Z1, K1 // y-1 < 0x7fffffff: y != 0 with the sign clear
	VPANDD      Z9, Z0, Z2
	VPCMPUD     $6, Z10, Z2, K2 // |y| > +Inf: a NaN
	KORW        K1, K2, K1
	VMOVDQU32   (SI), Z3
	VMOVDQU32.Z Z3, K1, Z4
	VMOVDQU32   Z4, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DX
	ADDQ        $64, DI
	DECQ        CX
	JNZ         rgLoop

rgDone:
	VZEROUPPER
	RET

// func relu16AVX512(dst, src *uint16, n int, inf, quiet uint32)
// The 16-bit ReLU: inf is +Inf's pattern and quiet the quiet bit, each
// repeated in both halves. A NaN comes out quiet, as widening and
// rounding make it.
TEXT ·relu16AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL inf+24(FP), AX
	VPBROADCASTD AX, Z9
	MOVL quiet+28(FP), AX
	VPBROADCASTD AX, Z10
	MOVL $0x80008000, AX
	VPBROADCASTD AX, Z8
	MOVL $0x7fff7fff, AX
	VPBROADCASTD AX, Z11
	SHRQ $5, CX
	JZ   r16Done

r16Loop:
	VMOVDQU16   (SI), Z0
	VPXORD      Z8, Z0, Z1
	VPCMPUW     $6, Z9, Z1, K1 // keep
	VPANDD      Z11, Z0, Z2
	VPCMPUW     $6, Z9, Z2, K2 // NaN
	VPMOVM2W    K2, Z3
	VPANDD      Z10, Z3, Z3
	VPORD       Z3, Z0, Z0
	VMOVDQU16.Z Z0, K1, Z4
	VMOVDQU16   Z4, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JNZ         r16Loop

r16Done:
	VZEROUPPER
	RET

// func reluGrad16AVX512(dst, gr, yv *uint16, n int, inf, quiet uint32)
TEXT ·reluGrad16AVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ yv+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL inf+32(FP), AX
	VPBROADCASTD AX, Z9
	MOVL quiet+36(FP), AX
	VPBROADCASTD AX, Z10
	MOVL $0x00010001, AX
	VPBROADCASTD AX, Z8
	MOVL $0x7fff7fff, AX
	VPBROADCASTD AX, Z11
	SHRQ $5, CX
	JZ   rg16Done

rg16Loop:
	VMOVDQU16   (DX), Z0
	VPSUBW      Z8, Z0, Z1
	VPCMPUW     $1, Z11, Z1, K1 // y != 0 with the sign clear
	VPANDD      Z11, Z0, Z2
	VPCMPUW     $6, Z9, Z2, K2 // y is a NaN
	KORD        K1, K2, K1
	VMOVDQU16   (SI), Z3
	VPANDD      Z11, Z3, Z5
	VPCMPUW     $6, Z9, Z5, K3 // g is a NaN: quieted
	VPMOVM2W    K3, Z6
	VPANDD      Z10, Z6, Z6
	VPORD       Z6, Z3, Z3
	VMOVDQU16.Z Z3, K1, Z4
	VMOVDQU16   Z4, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DX
	ADDQ        $64, DI
	DECQ        CX
	JNZ         rg16Loop

rg16Done:
	VZEROUPPER
	RET
