//go:build !purego

#include "textflag.h"

// ReLU and its gradient on the bit patterns, sixteen float32 or thirty-two
// 16-bit lanes at a time in AVX-512, eight or sixteen in AVX2 (relu.go has
// the rules and the Go loops these replace, bit for bit). n is a multiple
// of the lane count; the caller does the tail.

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

// The AVX2 loops have no mask registers and only signed compares. An
// unsigned a > b is a^sign > b^sign signed, so the AVX-512 loops' test
// x^sign >u +Inf becomes x >s -Inf (the pattern +Inf^sign): true for every
// x with the sign clear and for the negative NaNs. The magnitude tests
// compare values below the sign bit, where signed and unsigned agree.

// func reluF32AVX2(dst, src *uint32, n int)
// dst = src, or +0 where src is negative or -0 (not a NaN).
TEXT ·reluF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0xff800000, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9 // -Inf
	SHRQ $3, CX
	JZ   relu2Done

relu2Loop:
	VMOVDQU  (SI), Y0
	VPCMPGTD Y9, Y0, Y1 // keep: x >s -Inf, i.e. not (negative and not NaN)
	VPAND    Y1, Y0, Y0
	VMOVDQU  Y0, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DI
	DECQ     CX
	JNZ      relu2Loop

relu2Done:
	VZEROUPPER
	RET

// func reluGradF32AVX2(dst, gr, yv *uint32, n int)
// dst = g where y > 0 or y is a NaN, else +0: y >s -Inf keeps the sign-clear
// patterns and the negative NaNs, of which +0 is the one to drop.
TEXT ·reluGradF32AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ yv+16(FP), DX
	MOVQ n+24(FP), CX
	MOVL $0xff800000, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9 // -Inf
	VPXOR Y8, Y8, Y8
	SHRQ $3, CX
	JZ   rg2Done

rg2Loop:
	VMOVDQU  (DX), Y0
	VPCMPGTD Y9, Y0, Y1 // y >s -Inf
	VPCMPEQD Y8, Y0, Y2 // y is +0
	VPAND    (SI), Y1, Y1
	VPANDN   Y1, Y2, Y1 // g where y >s -Inf and y != +0
	VMOVDQU  Y1, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DX
	ADDQ     $32, DI
	DECQ     CX
	JNZ      rg2Loop

rg2Done:
	VZEROUPPER
	RET

// func relu16AVX2(dst, src *uint16, n int, inf, quiet uint32)
// relu16AVX512 in sixteen lanes: inf is +Inf's pattern and quiet the quiet
// bit, each repeated in both halves.
TEXT ·relu16AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS inf+24(FP), Y9
	VBROADCASTSS quiet+28(FP), Y10
	MOVL $0x80008000, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	VPOR Y8, Y9, Y8 // -Inf
	MOVL $0x7fff7fff, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	SHRQ $4, CX
	JZ   r162Done

r162Loop:
	VMOVDQU  (SI), Y0
	VPCMPGTW Y8, Y0, Y1 // keep
	VPAND    Y11, Y0, Y2
	VPCMPGTW Y9, Y2, Y2 // NaN
	VPAND    Y10, Y2, Y2
	VPOR     Y2, Y0, Y0 // NaNs quieted
	VPAND    Y1, Y0, Y0
	VMOVDQU  Y0, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DI
	DECQ     CX
	JNZ      r162Loop

r162Done:
	VZEROUPPER
	RET

// func reluGrad16AVX2(dst, gr, yv *uint16, n int, inf, quiet uint32)
// reluGradF32AVX2's test on y, relu16AVX2's quieting of g.
TEXT ·reluGrad16AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ gr+8(FP), SI
	MOVQ yv+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS inf+32(FP), Y9
	VBROADCASTSS quiet+36(FP), Y10
	MOVL $0x80008000, AX
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	VPOR Y8, Y9, Y8 // -Inf
	MOVL $0x7fff7fff, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	VPXOR Y7, Y7, Y7
	SHRQ $4, CX
	JZ   rg162Done

rg162Loop:
	VMOVDQU  (DX), Y0
	VPCMPGTW Y8, Y0, Y1 // y >s -Inf
	VPCMPEQW Y7, Y0, Y2 // y is +0
	VMOVDQU  (SI), Y3
	VPAND    Y11, Y3, Y4
	VPCMPGTW Y9, Y4, Y4 // g is a NaN: quieted
	VPAND    Y10, Y4, Y4
	VPOR     Y4, Y3, Y3
	VPAND    Y1, Y3, Y3
	VPANDN   Y3, Y2, Y3 // g where y >s -Inf and y != +0
	VMOVDQU  Y3, (DI)
	ADDQ     $32, SI
	ADDQ     $32, DX
	ADDQ     $32, DI
	DECQ     CX
	JNZ      rg162Loop

rg162Done:
	VZEROUPPER
	RET
