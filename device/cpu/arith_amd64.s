//go:build !purego

#include "textflag.h"

// func arithAVX512(op int, out, a, b *float32, n int)
// out = a op b elementwise for op 0 (+), 1 (-), 2 (*) or 3 (/), sixteen
// lanes a step with a masked step for the rest: one IEEE operation an
// element, the bits of the Go loops of binaryRow.
TEXT ·arithAVX512(SB), NOSPLIT, $0-40
	MOVQ op+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ CX, R11
	ANDQ $15, R11
	MOVQ $-1, R12
	BZHIQ R11, R12, R12
	KMOVW R12, K1
	SHRQ $4, CX
	CMPQ AX, $1
	JEQ  sub
	CMPQ AX, $2
	JEQ  mul
	CMPQ AX, $3
	JEQ  div

add:
	TESTQ CX, CX
	JZ   addTail
addStep:
	VMOVUPS (SI), Z0
	VADDPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  addStep
addTail:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	VZEROUPPER
	RET

sub:
	TESTQ CX, CX
	JZ   subTail
subStep:
	VMOVUPS (SI), Z0
	VSUBPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  subStep
subTail:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VSUBPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	VZEROUPPER
	RET

mul:
	TESTQ CX, CX
	JZ   mulTail
mulStep:
	VMOVUPS (SI), Z0
	VMULPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  mulStep
mulTail:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VMULPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	VZEROUPPER
	RET

div:
	TESTQ CX, CX
	JZ   divTail
divStep:
	VMOVUPS (SI), Z0
	VDIVPS (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  divStep
divTail:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z1
	VDIVPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)
	VZEROUPPER
	RET
