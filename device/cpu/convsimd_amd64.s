//go:build !purego

#include "textflag.h"

// The 2x2, stride-2 max-pooling of conv.go's maxPool2x2, sixteen windows at
// a time. It makes the same comparisons in the same order as the Go loop
// (a later element wins when it is greater, or when it is a NaN), so it
// picks the same element and copies its bits.

// Lane i of poolEven/poolOdd picks element 2i/2i+1 of a 32-float pair of
// registers (VPERMI2PS indices).
DATA poolEven<>+0(SB)/8, $0x0000000200000000
DATA poolEven<>+8(SB)/8, $0x0000000600000004
DATA poolEven<>+16(SB)/8, $0x0000000a00000008
DATA poolEven<>+24(SB)/8, $0x0000000e0000000c
DATA poolEven<>+32(SB)/8, $0x0000001200000010
DATA poolEven<>+40(SB)/8, $0x0000001600000014
DATA poolEven<>+48(SB)/8, $0x0000001a00000018
DATA poolEven<>+56(SB)/8, $0x0000001e0000001c
GLOBL poolEven<>(SB), RODATA|NOPTR, $64

DATA poolOdd<>+0(SB)/8, $0x0000000300000001
DATA poolOdd<>+8(SB)/8, $0x0000000700000005
DATA poolOdd<>+16(SB)/8, $0x0000000b00000009
DATA poolOdd<>+24(SB)/8, $0x0000000f0000000d
DATA poolOdd<>+32(SB)/8, $0x0000001300000011
DATA poolOdd<>+40(SB)/8, $0x0000001700000015
DATA poolOdd<>+48(SB)/8, $0x0000001b00000019
DATA poolOdd<>+56(SB)/8, $0x0000001f0000001d
GLOBL poolOdd<>(SB), RODATA|NOPTR, $64

// func maxPool2x2AVX512(y, pos, x *float32, w, oh, ow int)
// y, pos (oh, ow); x rows of w floats, 2*oh of them read. pos may be nil.
TEXT ·maxPool2x2AVX512(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ pos+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ w+24(FP), R12
	MOVQ oh+32(FP), R13
	MOVQ ow+40(FP), R14
	SHLQ $2, R12                 // input row, bytes
	VMOVDQU32 poolEven<>(SB), Z30
	VMOVDQU32 poolOdd<>(SB), Z31
	MOVL $0x3f800000, AX         // 1.0, 2.0, 3.0: the positions
	VPBROADCASTD AX, Z27
	MOVL $0x40000000, AX
	VPBROADCASTD AX, Z28
	MOVL $0x40400000, AX
	VPBROADCASTD AX, Z29
	MOVQ $-1, R10
	TESTQ R13, R13
	JZ   mpDone

mpRow:
	MOVQ SI, AX                  // row 2r
	LEAQ (SI)(R12*1), DX         // row 2r+1
	MOVQ DI, BX                  // y row
	MOVQ R8, R11                 // pos row
	MOVQ R14, CX                 // windows left in the row

mpCol:
	// K5: the min(CX, 16) windows of this step; K1, K2: their 2*min
	// inputs in each row, split in two registers of 16.
	MOVQ    $16, R9
	CMPQ    CX, R9
	CMOVQLT CX, R9
	BZHIQ   R9, R10, R15
	KMOVW   R15, K5
	ADDQ    R9, R9
	MOVQ    $16, R15
	CMPQ    R9, R15
	CMOVQLT R9, R15
	SUBQ    R15, R9
	BZHIQ   R15, R10, R15
	KMOVW   R15, K1
	BZHIQ   R9, R10, R15
	KMOVW   R15, K2

	VMOVUPS (AX), K1, Z0
	VMOVUPS 64(AX), K2, Z1
	VMOVUPS (DX), K1, Z2
	VMOVUPS 64(DX), K2, Z3
	VMOVAPS   Z30, Z4
	VPERMI2PS Z1, Z0, Z4         // a: top left, the running maximum
	VMOVAPS   Z31, Z5
	VPERMI2PS Z1, Z0, Z5         // b: top right
	VMOVAPS   Z30, Z6
	VPERMI2PS Z3, Z2, Z6         // c: bottom left
	VMOVAPS   Z31, Z7
	VPERMI2PS Z3, Z2, Z7         // d: bottom right
	VXORPS    Z8, Z8, Z8         // positions, 0 for a

	VCMPPS  $0x1e, Z4, Z5, K3    // b > max (ordered)
	VCMPPS  $3, Z5, Z5, K4       // b is NaN
	KORW    K4, K3, K3
	VMOVAPS Z5, K3, Z4
	VMOVAPS Z27, K3, Z8
	VCMPPS  $0x1e, Z4, Z6, K3
	VCMPPS  $3, Z6, Z6, K4
	KORW    K4, K3, K3
	VMOVAPS Z6, K3, Z4
	VMOVAPS Z28, K3, Z8
	VCMPPS  $0x1e, Z4, Z7, K3
	VCMPPS  $3, Z7, Z7, K4
	KORW    K4, K3, K3
	VMOVAPS Z7, K3, Z4
	VMOVAPS Z29, K3, Z8

	VMOVUPS Z4, K5, (BX)
	TESTQ   R8, R8
	JZ      mpNoPos
	VMOVUPS Z8, K5, (R11)
	ADDQ    $64, R11

mpNoPos:
	ADDQ $128, AX
	ADDQ $128, DX
	ADDQ $64, BX
	SUBQ $16, CX
	JG   mpCol

	LEAQ (SI)(R12*2), SI         // two input rows down
	LEAQ (DI)(R14*4), DI         // one output row down
	TESTQ R8, R8
	JZ   mpNext
	LEAQ (R8)(R14*4), R8

mpNext:
	DECQ R13
	JNZ  mpRow

mpDone:
	VZEROUPPER
	RET

// Im2Col's and Col2Im's row loops: rows of n elements, dst rows ds and src
// rows ss elements apart, sixteen float32 (or thirty-two 16-bit) elements
// a step and a masked step for the rest.

// func copyRows32(dst, src *float32, n, rows, ds, ss int)
TEXT ·copyRows32(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $2, R9
	SHLQ $2, R10
	MOVQ CX, R11
	ANDQ $15, R11
	MOVQ $-1, R12
	BZHIQ R11, R12, R12
	KMOVW R12, K1                // the last n%16 elements
	SHRQ $4, CX                  // whole steps
	TESTQ R8, R8
	JZ   c32Done

c32Row:
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ CX, DX
	TESTQ DX, DX
	JZ   c32Tail

c32Step:
	VMOVUPS (BX), Z0
	VMOVUPS Z0, (AX)
	ADDQ $64, AX
	ADDQ $64, BX
	DECQ DX
	JNZ  c32Step

c32Tail:
	VMOVUPS (BX), K1, Z0
	VMOVUPS Z0, K1, (AX)
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  c32Row

c32Done:
	VZEROUPPER
	RET

// func copyRows16(dst, src *uint16, n, rows, ds, ss int)
TEXT ·copyRows16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $1, R9
	SHLQ $1, R10
	MOVQ CX, R11
	ANDQ $31, R11
	MOVQ $-1, R12
	BZHIQ R11, R12, R12
	KMOVD R12, K1                // the last n%32 elements
	SHRQ $5, CX
	TESTQ R8, R8
	JZ   c16Done

c16Row:
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ CX, DX
	TESTQ DX, DX
	JZ   c16Tail

c16Step:
	VMOVDQU16 (BX), Z0
	VMOVDQU16 Z0, (AX)
	ADDQ $64, AX
	ADDQ $64, BX
	DECQ DX
	JNZ  c16Step

c16Tail:
	VMOVDQU16 (BX), K1, Z0
	VMOVDQU16 Z0, K1, (AX)
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  c16Row

c16Done:
	VZEROUPPER
	RET

// func addRows32(dst, src *float32, n, rows, ds, ss int)
// dst += src, one float32 addition per element as the Go loop does.
TEXT ·addRows32(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $2, R9
	SHLQ $2, R10
	MOVQ CX, R11
	ANDQ $15, R11
	MOVQ $-1, R12
	BZHIQ R11, R12, R12
	KMOVW R12, K1
	SHRQ $4, CX
	TESTQ R8, R8
	JZ   a32Done

a32Row:
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ CX, DX
	TESTQ DX, DX
	JZ   a32Tail

a32Step:
	VMOVUPS (AX), Z0
	VADDPS  (BX), Z0, Z0
	VMOVUPS Z0, (AX)
	ADDQ $64, AX
	ADDQ $64, BX
	DECQ DX
	JNZ  a32Step

a32Tail:
	VMOVUPS (AX), K1, Z0
	VMOVUPS (BX), K1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, K1, (AX)
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  a32Row

a32Done:
	VZEROUPPER
	RET
