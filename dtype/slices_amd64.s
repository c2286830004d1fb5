//go:build !purego

#include "textflag.h"

// Each kernel converts n elements, n a positive multiple of 8: 16 per loop
// iteration, then one step of 8 if n%16 == 8. Loads and stores are unaligned.
// Y15 is left alone because ABIInternal reserves X15 as its zero register.

// func encodeF16F16C(dst *uint16, src *float32, n int)
TEXT ·encodeF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $16
	JB   f16enc8

f16enc16:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	// Immediate 0: round to nearest even, whatever MXCSR.RC says. The
	// register form and a separate store: the memory form of VCVTPS2PH is
	// slower on AMD Zen 4 and 5 (measured on this project's Zen 5 class
	// machine: 0.06 against 0.04 ns an element on long slices).
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VMOVDQU   X0, (DI)
	VMOVDQU   X1, 16(DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	CMPQ CX, $16
	JAE  f16enc16

f16enc8:
	TESTQ CX, CX
	JZ    f16encdone
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, X0
	VMOVDQU   X0, (DI)

f16encdone:
	VZEROUPPER
	RET

// func decodeF16F16C(dst *float32, src *uint16, n int)
TEXT ·decodeF16F16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $16
	JB   f16dec8

f16dec16:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	CMPQ CX, $16
	JAE  f16dec16

f16dec8:
	TESTQ CX, CX
	JZ    f16decdone
	VCVTPH2PS (SI), Y0
	VMOVUPS Y0, (DI)

f16decdone:
	VZEROUPPER
	RET

// func decodeBF16AVX2(dst *float32, src *uint16, n int)
TEXT ·decodeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $16
	JB   bf16dec8

bf16dec16:
	// bfloat16 is the top half of a binary32: widen and shift.
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	SUBQ $16, CX
	CMPQ CX, $16
	JAE  bf16dec16

bf16dec8:
	TESTQ CX, CX
	JZ    bf16decdone
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)

bf16decdone:
	VZEROUPPER
	RET

// BF16ROUND rounds the 8 binary32 bit patterns in x to bfloat16, leaving each
// result in the low half of its lane; t1 and t2 are scratch. It is F32ToBF16
// lane by lane: add 0x7fff plus the lowest kept bit and drop the low 16 bits
// (round to nearest even, carrying into the exponent up to Inf), except that a
// NaN (|x| > 0x7f800000, a signed compare that is safe once the sign is
// cleared) keeps its top half with the quiet bit set.
// Constants: Y8 = 1, Y9 = 0x7fff, Y10 = 0x40, Y11 = 0x7fffffff, Y12 = 0x7f800000.
#define BF16ROUND(x, t1, t2) \
	VPSRLD    $16, x, t1;    \
	VPAND     Y8, t1, t2;    \
	VPADDD    t2, x, t2;     \
	VPADDD    Y9, t2, t2;    \
	VPSRLD    $16, t2, t2;   \
	VPOR      Y10, t1, t1;   \
	VPAND     Y11, x, x;     \
	VPCMPGTD  Y12, x, x;     \
	VPBLENDVB x, t1, t2, x

// func encodeBF16AVX2(dst *uint16, src *float32, n int)
TEXT ·encodeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

	MOVL         $1, AX
	VMOVQ        AX, X8
	VPBROADCASTD X8, Y8
	MOVL         $0x7fff, AX
	VMOVQ        AX, X9
	VPBROADCASTD X9, Y9
	MOVL         $0x40, AX
	VMOVQ        AX, X10
	VPBROADCASTD X10, Y10
	MOVL         $0x7fffffff, AX
	VMOVQ        AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x7f800000, AX
	VMOVQ        AX, X12
	VPBROADCASTD X12, Y12

	CMPQ CX, $16
	JB   bf16enc8

bf16enc16:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	BF16ROUND(Y0, Y2, Y3)
	BF16ROUND(Y1, Y4, Y5)
	// Every lane is <= 0xffff, so the unsigned-saturating pack is a plain
	// narrowing; it interleaves 128-bit halves, which VPERMQ puts back in order.
	VPACKUSDW Y1, Y0, Y0
	VPERMQ    $0xD8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	CMPQ CX, $16
	JAE  bf16enc16

bf16enc8:
	TESTQ CX, CX
	JZ    bf16encdone
	VMOVDQU (SI), Y0
	BF16ROUND(Y0, Y2, Y3)
	VEXTRACTI128 $1, Y0, X1
	VPACKUSDW    X1, X0, X0
	VMOVDQU      X0, (DI)

bf16encdone:
	VZEROUPPER
	RET

// The AVX-512 converters take any length: sixteen elements per step, then
// one masked step for the rest (masked-off lanes are neither read nor
// written, so nothing past the end is touched and nothing faults), so
// short rows need no Go tail loop. Each lane does what the AVX2 converters
// do. They convert rows of a matrix; a slice is one row.

// MASKTAIL sets K1 to the low CX bits (CX < 16).
#define MASKTAIL \
	MOVL  $1, AX; \
	SHLL  CX, AX; \
	DECL  AX;     \
	KMOVW AX, K1

// BF16ROUND512 is BF16ROUND on sixteen lanes, the result in the low half of
// each lane of x: a NaN (|x| > 0x7f800000) takes its top half with the quiet
// bit set, any other value the rounded sum.
// Constants: Z8 = 1, Z9 = 0x7fff, Z10 = 0x40, Z11 = 0x7fffffff, Z12 = 0x7f800000.
#define BF16ROUND512(x, t1, t2) \
	VPSRLD      $16, x, t1;     \
	VPANDD      Z8, t1, t2;     \
	VPADDD      t2, x, t2;      \
	VPADDD      Z9, t2, t2;     \
	VPSRLD      $16, t2, t2;    \
	VPORD       Z10, t1, t1;    \
	VPANDD      Z11, x, x;      \
	VPCMPUD     $6, Z12, x, K2; \
	VMOVDQU32   t1, K2, t2;     \
	VMOVDQA32   t2, x

// The Rows converters convert rows of cols elements, dst's rows ldd
// elements apart and src's lds, in one call (a blocked GEMM converts its
// blocks row by row, and a call per row cost more than the conversion on
// short rows). K1 holds the tail mask of cols%16 for every row.

// ROWSETUP, after the arguments are loaded (DI dst, R8 ldd, SI src, R9
// lds, R10 rows, R11 cols), turns the strides into bytes (shifts dsh and
// ssh) and puts the tail mask in K1.
#define ROWSETUP(dsh, ssh) \
	SHLQ $dsh, R8; \
	SHLQ $ssh, R9; \
	MOVQ R11, CX;  \
	ANDQ $15, CX;  \
	MASKTAIL

// func encodeF16RowsAVX512(dst *uint16, ldd int, src *float32, lds, rows, cols int)
TEXT ·encodeF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ rows+32(FP), R10
	MOVQ cols+40(FP), R11
	ROWSETUP(1, 2)
	TESTQ R10, R10
	JZ    e16rDone

e16rRow:
	MOVQ DI, R12
	MOVQ SI, R13
	MOVQ R11, CX
	CMPQ CX, $16
	JB   e16rTail

e16rLoop:
	VMOVUPS   (R13), Z0
	VCVTPS2PH $0, Z0, Y0 // not the memory form: see encodeF16F16C
	VMOVDQU   Y0, (R12)
	ADDQ      $64, R13
	ADDQ      $32, R12
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       e16rLoop

e16rTail:
	TESTQ CX, CX
	JZ    e16rNext
	VMOVUPS.Z (R13), K1, Z0
	VCVTPS2PH $0, Z0, Y1
	VMOVDQU16 Y1, K1, (R12)

e16rNext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ R10
	JNZ  e16rRow

e16rDone:
	VZEROUPPER
	RET

// func decodeF16RowsAVX512(dst *float32, ldd int, src *uint16, lds, rows, cols int)
TEXT ·decodeF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ rows+32(FP), R10
	MOVQ cols+40(FP), R11
	ROWSETUP(2, 1)
	TESTQ R10, R10
	JZ    d16rDone

d16rRow:
	MOVQ DI, R12
	MOVQ SI, R13
	MOVQ R11, CX
	CMPQ CX, $16
	JB   d16rTail

d16rLoop:
	VCVTPH2PS (R13), Z0
	VMOVUPS   Z0, (R12)
	ADDQ      $32, R13
	ADDQ      $64, R12
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       d16rLoop

d16rTail:
	TESTQ CX, CX
	JZ    d16rNext
	VMOVDQU16.Z (R13), K1, Y0
	VCVTPH2PS   Y0, Z1
	VMOVUPS     Z1, K1, (R12)

d16rNext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ R10
	JNZ  d16rRow

d16rDone:
	VZEROUPPER
	RET

// func decodeBF16RowsAVX512(dst *float32, ldd int, src *uint16, lds, rows, cols int)
TEXT ·decodeBF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ rows+32(FP), R10
	MOVQ cols+40(FP), R11
	ROWSETUP(2, 1)
	TESTQ R10, R10
	JZ    db16rDone

db16rRow:
	MOVQ DI, R12
	MOVQ SI, R13
	MOVQ R11, CX
	CMPQ CX, $16
	JB   db16rTail

db16rLoop:
	VPMOVZXWD (R13), Z0
	VPSLLD    $16, Z0, Z0
	VMOVDQU32 Z0, (R12)
	ADDQ      $32, R13
	ADDQ      $64, R12
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       db16rLoop

db16rTail:
	TESTQ CX, CX
	JZ    db16rNext
	VMOVDQU16.Z (R13), K1, Y0
	VPMOVZXWD   Y0, Z1
	VPSLLD      $16, Z1, Z1
	VMOVDQU32   Z1, K1, (R12)

db16rNext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ R10
	JNZ  db16rRow

db16rDone:
	VZEROUPPER
	RET

// func encodeBF16RowsAVX512(dst *uint16, ldd int, src *float32, lds, rows, cols int)
TEXT ·encodeBF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ rows+32(FP), R10
	MOVQ cols+40(FP), R11
	ROWSETUP(1, 2)
	MOVL $1, AX
	VPBROADCASTD AX, Z8
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z9
	MOVL $0x40, AX
	VPBROADCASTD AX, Z10
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z11
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z12
	TESTQ R10, R10
	JZ    eb16rDone

eb16rRow:
	MOVQ DI, R12
	MOVQ SI, R13
	MOVQ R11, CX
	CMPQ CX, $16
	JB   eb16rTail

eb16rLoop:
	VMOVDQU32 (R13), Z0
	BF16ROUND512(Z0, Z2, Z3)
	VPMOVDW   Z0, (R12)
	ADDQ      $64, R13
	ADDQ      $32, R12
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       eb16rLoop

eb16rTail:
	TESTQ CX, CX
	JZ    eb16rNext
	VMOVDQU32.Z (R13), K1, Z0
	BF16ROUND512(Z0, Z2, Z3)
	VPMOVDW     Z0, K1, (R12)

eb16rNext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ R10
	JNZ  eb16rRow

eb16rDone:
	VZEROUPPER
	RET

// BF16CVT16 converts Z0's sixteen float32 to bfloat16 in the word lanes
// of Y1 with VCVTNEPS2BF16 (written as bytes, which Go's assembler does not
// spell: EVEX.512.F3.0F38.W0 72 /r, ymm1 <- zmm0), which rounds to nearest even and quiets a NaN as
// BF16ROUND does but flushes a subnormal input to zero; lanes holding a
// subnormal (exponent 0, mantissa not 0), rare in training data, are then
// patched with BF16ROUND512's result, so every lane is F32ToBF16's. t1-t3,
// Y2 and K2-K4 clobbered; Z13 = 0x7f800000, Z14 = 0x007fffff, with
// BF16ROUND512's constants.
#define BF16CVT16(t1, t2, t3, lbl) \
	BYTE $0x62; BYTE $0xf2; BYTE $0x7e; BYTE $0x48; BYTE $0x72; BYTE $0xc8; \
	VPTESTNMD     Z13, Z0, K3; \
	VPTESTMD      Z14, Z0, K4; \
	KANDW         K3, K4, K3;  \
	KORTESTW      K3, K3;      \
	JZ            lbl;         \
	VMOVDQA32     Z0, t1;      \
	BF16ROUND512(t1, t2, t3);  \
	VPMOVDW       t1, Y2;      \
	VMOVDQU16     Y2, K3, Y1;  \
lbl:

// func encodeBF16RowsCvtAVX512(dst *uint16, ldd int, src *float32, lds, rows, cols int)
//
// encodeBF16RowsAVX512 with AVX512_BF16's conversion (BF16CVT16): the same
// bits in one instruction for sixteen lanes where there are no subnormals.
TEXT ·encodeBF16RowsCvtAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ rows+32(FP), R10
	MOVQ cols+40(FP), R11
	ROWSETUP(1, 2)
	MOVL $1, AX
	VPBROADCASTD AX, Z8
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z9
	MOVL $0x40, AX
	VPBROADCASTD AX, Z10
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z11
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z12
	VMOVDQA32 Z12, Z13
	MOVL $0x007fffff, AX
	VPBROADCASTD AX, Z14
	TESTQ R10, R10
	JZ    ebcDone

ebcRow:
	MOVQ DI, R12
	MOVQ SI, R13
	MOVQ R11, CX
	CMPQ CX, $16
	JB   ebcTail

ebcLoop:
	VMOVDQU32 (R13), Z0
	BF16CVT16(Z5, Z3, Z4, ebcLoopDone)
	VMOVDQU   Y1, (R12)
	ADDQ      $64, R13
	ADDQ      $32, R12
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       ebcLoop

ebcTail:
	TESTQ CX, CX
	JZ    ebcNext
	VMOVDQU32.Z (R13), K1, Z0
	BF16CVT16(Z5, Z3, Z4, ebcTailDone)
	VMOVDQU16   Y1, K1, (R12)

ebcNext:
	ADDQ R8, DI
	ADDQ R9, SI
	DECQ R10
	JNZ  ebcRow

ebcDone:
	VZEROUPPER
	RET
