//go:build !purego

#include "textflag.h"

// The 2x2, stride-2 max-pooling of conv.go's maxPool2x2, sixteen windows at
// a time, in the input's own storage: F32, or F16 and BF16 widened in
// registers for the comparisons while the chosen element's own bits are
// stored. Each makes the same comparisons in the same order as the Go loop
// (a later element wins when it is greater, or when it is a NaN), so it
// picks the same element. Positions are stored as F16 (0, 1.0, 2.0, 3.0).

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

// poolWords (VPERMW indices) puts the even 16-bit words of a register in
// its low half and the odd ones in its high half.
DATA poolWords<>+0(SB)/8, $0x0006000400020000
DATA poolWords<>+8(SB)/8, $0x000e000c000a0008
DATA poolWords<>+16(SB)/8, $0x0016001400120010
DATA poolWords<>+24(SB)/8, $0x001e001c001a0018
DATA poolWords<>+32(SB)/8, $0x0007000500030001
DATA poolWords<>+40(SB)/8, $0x000f000d000b0009
DATA poolWords<>+48(SB)/8, $0x0017001500130011
DATA poolWords<>+56(SB)/8, $0x001f001d001b0019
GLOBL poolWords<>(SB), RODATA|NOPTR, $64

// POOLSETUP loads the arguments and the F16 positions 1.0, 2.0, 3.0 (Z27,
// Z28, Z29, one per 32-bit lane), and sets R10 to all ones for BZHI.
#define POOLSETUP \
	MOVQ y+0(FP), DI; \
	MOVQ pos+8(FP), R8; \
	MOVQ x+16(FP), SI; \
	MOVQ w+24(FP), R12; \
	MOVQ oh+32(FP), R13; \
	MOVQ ow+40(FP), R14; \
	MOVL $0x3c00, AX; \
	VPBROADCASTD AX, Z27; \
	MOVL $0x4000, AX; \
	VPBROADCASTD AX, Z28; \
	MOVL $0x4200, AX; \
	VPBROADCASTD AX, Z29; \
	MOVQ $-1, R10

// POOLMASKS sets K5 to the min(CX, 16) windows of this step and R9 to
// their 2*min(CX, 16) inputs in each row.
#define POOLMASKS \
	MOVQ    $16, R9; \
	CMPQ    CX, R9; \
	CMOVQLT CX, R9; \
	BZHIQ   R9, R10, R15; \
	KMOVW   R15, K5; \
	ADDQ    R9, R9

// TAKE makes element (f: value as float32, raw: what is stored) the
// running maximum (Z4 value, Z20 stored, Z8 position) where it is greater,
// or a NaN, and records its position p.
#define TAKE(f, raw, p) \
	VCMPPS    $0x1e, Z4, f, K3; \
	VCMPPS    $3, f, f, K4; \
	KORW      K4, K3, K3; \
	VMOVAPS   f, K3, Z4; \
	VMOVDQA32 raw, K3, Z20; \
	VMOVDQA32 p, K3, Z8

// func maxPool2x2F32(y *float32, pos *uint16, x *float32, w, oh, ow int)
// y, pos (oh, ow); x rows of w floats, 2*oh of them read. pos may be nil.
TEXT ·maxPool2x2F32(SB), NOSPLIT, $0-48
	POOLSETUP
	SHLQ $2, R12                 // input row, bytes
	VMOVDQU32 poolEven<>(SB), Z30
	VMOVDQU32 poolOdd<>(SB), Z31
	TESTQ R13, R13
	JZ   mpfDone

mpfRow:
	MOVQ SI, AX                  // row 2r
	LEAQ (SI)(R12*1), DX         // row 2r+1
	MOVQ DI, BX                  // y row
	MOVQ R8, R11                 // pos row
	MOVQ R14, CX                 // windows left in the row

mpfCol:
	POOLMASKS
	// K1, K2: the 2*min inputs of each row, in two registers of 16.
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
	VPXORD    Z8, Z8, Z8         // position 0, a's
	VMOVDQA32 Z4, Z20
	TAKE(Z5, Z5, Z27)
	TAKE(Z6, Z6, Z28)
	TAKE(Z7, Z7, Z29)

	VMOVUPS Z4, K5, (BX)
	TESTQ   R8, R8
	JZ      mpfNoPos
	VPMOVDW Z8, K5, (R11)
	ADDQ    $32, R11

mpfNoPos:
	ADDQ $128, AX
	ADDQ $128, DX
	ADDQ $64, BX
	SUBQ $16, CX
	JG   mpfCol

	LEAQ (SI)(R12*2), SI         // two input rows down
	LEAQ (DI)(R14*4), DI         // one output row down
	TESTQ R8, R8
	JZ   mpfNext
	LEAQ (R8)(R14*2), R8

mpfNext:
	DECQ R13
	JNZ  mpfRow

mpfDone:
	VZEROUPPER
	RET

// func maxPool2x2U16(y, pos, x *uint16, w, oh, ow int, bf16 bool)
// maxPool2x2F32 for F16 (bf16 false) or BF16 x and y.
TEXT ·maxPool2x2U16(SB), NOSPLIT, $0-49
	POOLSETUP
	MOVBLZX bf16+48(FP), AX
	KMOVW AX, K7                 // every general register is taken
	SHLQ $1, R12                 // input row, bytes
	VMOVDQU16 poolWords<>(SB), Z30
	TESTQ R13, R13
	JZ   mphDone

mphRow:
	MOVQ SI, AX                  // row 2r
	LEAQ (SI)(R12*1), DX         // row 2r+1
	MOVQ DI, BX                  // y row
	MOVQ R8, R11                 // pos row
	MOVQ R14, CX                 // windows left in the row

mphCol:
	POOLMASKS
	BZHIQ R9, R10, R15
	KMOVD R15, K1                // the 2*min inputs of each row

	VMOVDQU16 (AX), K1, Z0
	VMOVDQU16 (DX), K1, Z1
	VPERMW Z0, Z30, Z0           // even words (left) low, odd (right) high
	VPERMW Z1, Z30, Z1
	VEXTRACTI64X4 $1, Z0, Y2
	VEXTRACTI64X4 $1, Z1, Y3
	VPMOVZXWD Y0, Z20            // a's bits: the running maximum's
	VPMOVZXWD Y2, Z5             // b
	VPMOVZXWD Y1, Z6             // c
	VPMOVZXWD Y3, Z7             // d
	KORTESTW K7, K7
	JNZ   mphBF16
	VCVTPH2PS Y0, Z4
	VCVTPH2PS Y2, Z9
	VCVTPH2PS Y1, Z10
	VCVTPH2PS Y3, Z11
	JMP   mphTake

mphBF16:
	VPSLLD $16, Z20, Z4
	VPSLLD $16, Z5, Z9
	VPSLLD $16, Z6, Z10
	VPSLLD $16, Z7, Z11

mphTake:
	VPXORD Z8, Z8, Z8            // position 0, a's
	TAKE(Z9, Z5, Z27)
	TAKE(Z10, Z6, Z28)
	TAKE(Z11, Z7, Z29)

	VPMOVDW Z20, K5, (BX)
	TESTQ   R8, R8
	JZ      mphNoPos
	VPMOVDW Z8, K5, (R11)
	ADDQ    $32, R11

mphNoPos:
	ADDQ $64, AX
	ADDQ $64, DX
	ADDQ $32, BX
	SUBQ $16, CX
	JG   mphCol

	LEAQ (SI)(R12*2), SI         // two input rows down
	LEAQ (DI)(R14*2), DI         // one output row down
	TESTQ R8, R8
	JZ   mphNext
	LEAQ (R8)(R14*2), R8

mphNext:
	DECQ R13
	JNZ  mphRow

mphDone:
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

// wordsEven (VPERMI2W indices) picks the even words of a pair of
// registers: word 2i of the 64.
DATA wordsEven<>+0(SB)/8, $0x0006000400020000
DATA wordsEven<>+8(SB)/8, $0x000e000c000a0008
DATA wordsEven<>+16(SB)/8, $0x0016001400120010
DATA wordsEven<>+24(SB)/8, $0x001e001c001a0018
DATA wordsEven<>+32(SB)/8, $0x0026002400220020
DATA wordsEven<>+40(SB)/8, $0x002e002c002a0028
DATA wordsEven<>+48(SB)/8, $0x0036003400320030
DATA wordsEven<>+56(SB)/8, $0x003e003c003a0038
GLOBL wordsEven<>(SB), RODATA|NOPTR, $64

// func copyStride2x32(dst, src *float32, n, rows, ds, ss int)
// dst[r*ds + j] = src[r*ss + 2j] for j < n: Im2Col's rows at stride 2.
// The loads stop at the last element read (2n-1 per row).
TEXT ·copyStride2x32(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $2, R9
	SHLQ $2, R10
	MOVQ $-1, R12
	VMOVDQU32 poolEven<>(SB), Z30
	TESTQ R8, R8
	JZ   s2fDone

s2fRow:
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ n+16(FP), CX

s2fStep:
	// K5: min(CX, 16) outputs; K1, K2: their 2*min-1 inputs.
	MOVQ    $16, R11
	CMPQ    CX, R11
	CMOVQLT CX, R11
	BZHIQ   R11, R12, R13
	KMOVW   R13, K5
	LEAQ    -1(R11)(R11*1), R11
	MOVQ    $16, R13
	CMPQ    R11, R13
	CMOVQLT R11, R13
	SUBQ    R13, R11
	BZHIQ   R13, R12, R13
	KMOVW   R13, K1
	BZHIQ   R11, R12, R13
	KMOVW   R13, K2
	VMOVUPS.Z (BX), K1, Z0
	VMOVUPS.Z 64(BX), K2, Z1
	VMOVAPS   Z30, Z2
	VPERMI2PS Z1, Z0, Z2
	VMOVUPS   Z2, K5, (AX)
	ADDQ $64, AX
	ADDQ $128, BX
	SUBQ $16, CX
	JG   s2fStep

	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  s2fRow

s2fDone:
	VZEROUPPER
	RET

// func copyStride2x16(dst, src *uint16, n, rows, ds, ss int)
// copyStride2x32 for 16-bit storage, 32 outputs a step.
TEXT ·copyStride2x16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $1, R9
	SHLQ $1, R10
	MOVQ $-1, R12
	VMOVDQU16 wordsEven<>(SB), Z30
	TESTQ R8, R8
	JZ   s2hDone

s2hRow:
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ n+16(FP), CX

s2hStep:
	MOVQ    $32, R11
	CMPQ    CX, R11
	CMOVQLT CX, R11
	BZHIQ   R11, R12, R13
	KMOVD   R13, K5
	LEAQ    -1(R11)(R11*1), R11
	MOVQ    $32, R13
	CMPQ    R11, R13
	CMOVQLT R11, R13
	SUBQ    R13, R11
	BZHIQ   R13, R12, R13
	KMOVD   R13, K1
	BZHIQ   R11, R12, R13
	KMOVD   R13, K2
	VMOVDQU16.Z (BX), K1, Z0
	VMOVDQU16.Z 64(BX), K2, Z1
	VMOVDQA64 Z30, Z2
	VPERMI2W  Z1, Z0, Z2
	VMOVDQU16 Z2, K5, (AX)
	ADDQ $64, AX
	ADDQ $128, BX
	SUBQ $32, CX
	JG   s2hStep

	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  s2hRow

s2hDone:
	VZEROUPPER
	RET

// func addRowsAt32(dst, src *float32, off, n, rows, ds, ss int)
// dst[r*ds + off + j] += src[r*ss + j] for j < n. The sixteen-lane steps
// are aligned to the start of each dst row, not to off, so calls that add
// into the same rows at different offsets (Col2Im's taps) read and write
// each step at the same address: the load after an earlier call's store
// then forwards from it instead of waiting for it to reach the cache.
TEXT ·addRowsAt32(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off+16(FP), R14
	MOVQ n+24(FP), R15
	MOVQ rows+32(FP), R8
	MOVQ ds+40(FP), R9
	MOVQ ss+48(FP), R10
	SHLQ $2, R9
	SHLQ $2, R10
	ADDQ R14, R15                // end of the run in the row
	MOVQ R14, AX
	SHLQ $2, AX
	SUBQ AX, SI                  // src as if it started at the row start
	MOVQ $-1, R12
	TESTQ R8, R8
	JZ   arDone

arRow:
	MOVQ DI, AX
	MOVQ SI, BX
	XORQ CX, CX                  // c: the step's first column

arStep:
	// lanes l with off <= c+l < off+n
	MOVQ  R15, R11
	SUBQ  CX, R11
	MOVQ  $16, R13
	CMPQ  R11, R13
	CMOVQGT R13, R11             // min(end-c, 16), > 0
	BZHIQ R11, R12, DX
	MOVQ  R14, R11
	SUBQ  CX, R11                // off-c, may be <= 0
	JLE   arMask
	BZHIQ R11, R12, R13
	ANDNQ DX, R13, DX            // DX &^ R13

arMask:
	KMOVW DX, K1
	VMOVUPS (AX), K1, Z0
	VMOVUPS (BX), K1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, K1, (AX)
	ADDQ $64, AX
	ADDQ $64, BX
	ADDQ $16, CX
	CMPQ CX, R15
	JLT  arStep

	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  arRow

arDone:
	VZEROUPPER
	RET

// func col2imRowsAVX512(dst, col *float32, ent *c2iEntry, end *int32, h, w int, wmask uint64)
// Col2Im for one plane at StrideW 1 (see col2imPlane): dst row r (w <= 64
// floats, rows w apart) is the sum, in entry order, of entries
// [end[r-1], end[r]), each adding col[src+lane] to the lanes its masks
// allow. The row is summed in four registers and stored once (lanes of
// wmask, 16 bits per register), so no tap waits for another's store.
TEXT ·col2imRowsAVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ col+8(FP), SI
	MOVQ ent+16(FP), DX
	MOVQ end+24(FP), R8
	MOVQ h+32(FP), R9
	MOVQ w+40(FP), R10
	SHLQ $2, R10                 // row, bytes
	MOVQ wmask+48(FP), AX
	KMOVW AX, K5
	SHRQ $16, AX
	KMOVW AX, K6
	SHRQ $16, AX
	KMOVW AX, K7
	SHRQ $16, AX
	MOVQ AX, R13                 // the fourth store mask, moved to K1 when needed
	XORQ R11, R11                // entries done
	TESTQ R9, R9
	JZ   ciDone

ciRow:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVLQSX (R8), R12            // this row's entries end
	CMPQ R11, R12
	JGE  ciStore

ciEnt:
	MOVLQSX (DX), AX             // src offset of lane 0
	LEAQ (SI)(AX*4), AX
	KMOVW 4(DX), K1
	KMOVW 6(DX), K2
	KMOVW 8(DX), K3
	KMOVW 10(DX), K4
	// Lanes a mask leaves out load 0, and adding +0 changes no sum here:
	// a sum that starts at +0 is never -0.
	VMOVUPS.Z (AX), K1, Z4
	VMOVUPS.Z 64(AX), K2, Z5
	VMOVUPS.Z 128(AX), K3, Z6
	VMOVUPS.Z 192(AX), K4, Z7
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	ADDQ $16, DX
	INCQ R11
	CMPQ R11, R12
	JLT  ciEnt

ciStore:
	VMOVUPS Z0, K5, (DI)
	VMOVUPS Z1, K6, 64(DI)
	VMOVUPS Z2, K7, 128(DI)
	KMOVW R13, K1
	VMOVUPS Z3, K1, 192(DI)
	ADDQ R10, DI
	ADDQ $4, R8
	DECQ R9
	JNZ  ciRow

ciDone:
	VZEROUPPER
	RET

// Lane i of poolLo/poolHi picks, from two registers a (lanes 0-15) and b
// (16-31), a[i/2] or b[i/2] alternately for i in 0-15 (poolLo) or 16-31
// (poolHi): a window row's left and right elements interleaved.
DATA poolLo<>+0(SB)/8, $0x0000001000000000
DATA poolLo<>+8(SB)/8, $0x0000001100000001
DATA poolLo<>+16(SB)/8, $0x0000001200000002
DATA poolLo<>+24(SB)/8, $0x0000001300000003
DATA poolLo<>+32(SB)/8, $0x0000001400000004
DATA poolLo<>+40(SB)/8, $0x0000001500000005
DATA poolLo<>+48(SB)/8, $0x0000001600000006
DATA poolLo<>+56(SB)/8, $0x0000001700000007
GLOBL poolLo<>(SB), RODATA|NOPTR, $64

DATA poolHi<>+0(SB)/8, $0x0000001800000008
DATA poolHi<>+8(SB)/8, $0x0000001900000009
DATA poolHi<>+16(SB)/8, $0x0000001a0000000a
DATA poolHi<>+24(SB)/8, $0x0000001b0000000b
DATA poolHi<>+32(SB)/8, $0x0000001c0000000c
DATA poolHi<>+40(SB)/8, $0x0000001d0000000d
DATA poolHi<>+48(SB)/8, $0x0000001e0000000e
DATA poolHi<>+56(SB)/8, $0x0000001f0000000f
GLOBL poolHi<>(SB), RODATA|NOPTR, $64

// GRADSTEP turns sixteen windows' gradients (Z0, as 32-bit lanes: floats,
// or 16-bit values zero-extended) and F16 positions (Y1) into the four
// registers of their two rows: Z4, Z5 the top row's 32 elements, Z6, Z7
// the bottom's, each element the gradient where the position points at
// it and 0 elsewhere. K6 gets the windows whose position is none of 0-3.
#define GRADSTEP \
	VPMOVZXWD Y1, Z1; \
	VPCMPEQD  Z24, Z1, K1; \
	VPCMPEQD  Z27, Z1, K2; \
	VPCMPEQD  Z28, Z1, K3; \
	VPCMPEQD  Z29, Z1, K4; \
	KORW      K1, K2, K6; \
	KORW      K3, K6, K6; \
	KORW      K4, K6, K6; \
	KANDNW    K5, K6, K6; \
	VMOVDQA32.Z Z0, K1, Z8; \
	VMOVDQA32.Z Z0, K2, Z9; \
	VMOVDQA32.Z Z0, K3, Z10; \
	VMOVDQA32.Z Z0, K4, Z11; \
	VMOVDQA32 Z30, Z4; \
	VPERMI2D  Z9, Z8, Z4; \
	VMOVDQA32 Z31, Z5; \
	VPERMI2D  Z9, Z8, Z5; \
	VMOVDQA32 Z30, Z6; \
	VPERMI2D  Z11, Z10, Z6; \
	VMOVDQA32 Z31, Z7; \
	VPERMI2D  Z11, Z10, Z7

// GRADSETUP loads the arguments, the position constants (Z24 0, Z27-Z29
// the F16 bits of 1, 2, 3) and the interleaving indices (Z30, Z31).
#define GRADSETUP \
	MOVQ dx+0(FP), DI; \
	MOVQ dy+8(FP), SI; \
	MOVQ pos+16(FP), R8; \
	MOVQ w+24(FP), R12; \
	MOVQ oh+32(FP), R13; \
	MOVQ ow+40(FP), R14; \
	VPXORD Z24, Z24, Z24; \
	MOVL $0x3c00, AX; \
	VPBROADCASTD AX, Z27; \
	MOVL $0x4000, AX; \
	VPBROADCASTD AX, Z28; \
	MOVL $0x4200, AX; \
	VPBROADCASTD AX, Z29; \
	VMOVDQU32 poolLo<>(SB), Z30; \
	VMOVDQU32 poolHi<>(SB), Z31; \
	MOVQ $-1, R10

// GRADWINDOWS sets K5 to the min(CX, 16) windows of this step and R9 to
// their 2*min elements in each row.
#define GRADWINDOWS \
	MOVQ    $16, R9; \
	CMPQ    CX, R9; \
	CMOVQLT CX, R9; \
	BZHIQ   R9, R10, R15; \
	KMOVW   R15, K5; \
	ADDQ    R9, R9

// GRADROWS sets K1, K2 to the R9 elements of a row, in two registers of 16.
#define GRADROWS \
	MOVQ    $16, R15; \
	CMPQ    R9, R15; \
	CMOVQLT R9, R15; \
	SUBQ    R15, R9; \
	BZHIQ   R15, R10, R15; \
	KMOVW   R15, K1; \
	BZHIQ   R9, R10, R15; \
	KMOVW   R15, K2

// func maxPoolGrad2x2F32(dx, dy *float32, pos *uint16, w, oh, ow int) (bad bool)
// The 2x2, stride-2 MaxPoolGrad of a plane: writes rows 0 to 2*oh-1,
// columns 0 to 2*ow-1 of dx (rows of w), each element dy+0 (so -0 becomes
// +0, as adding it to a cleared dx does) where its window's position
// points at it, else 0. bad reports a position that is none of 0-3.
TEXT ·maxPoolGrad2x2F32(SB), NOSPLIT, $0-49
	GRADSETUP
	MOVB $0, bad+48(FP)
	SHLQ $2, R12                 // dx row, bytes
	TESTQ R13, R13
	JZ   mgfDone

mgfRow:
	MOVQ DI, AX                  // dx row 2r
	LEAQ (DI)(R12*1), DX         // dx row 2r+1
	MOVQ SI, BX                  // dy row
	MOVQ R8, R11                 // pos row
	MOVQ R14, CX                 // windows left

mgfStep:
	GRADWINDOWS
	VMOVUPS.Z   (BX), K5, Z0
	VADDPS      Z24, Z0, Z0      // -0 + +0 = +0
	VMOVDQU16.Z (R11), K5, Y1
	GRADSTEP
	KORTESTW K6, K6
	JZ   mgfStore
	MOVB $1, bad+48(FP)

mgfStore:
	GRADROWS
	VMOVUPS Z4, K1, (AX)
	VMOVUPS Z5, K2, 64(AX)
	VMOVUPS Z6, K1, (DX)
	VMOVUPS Z7, K2, 64(DX)
	ADDQ $128, AX
	ADDQ $128, DX
	ADDQ $64, BX
	ADDQ $32, R11
	SUBQ $16, CX
	JG   mgfStep

	LEAQ (DI)(R12*2), DI         // two dx rows down
	LEAQ (SI)(R14*4), SI         // one dy row down
	LEAQ (R8)(R14*2), R8
	DECQ R13
	JNZ  mgfRow

mgfDone:
	VZEROUPPER
	RET

// func maxPoolGrad2x2U16(dx, dy, pos *uint16, w, oh, ow int) (bad bool)
// maxPoolGrad2x2F32 for 16-bit dx and dy: their bits are moved, 0x8000
// (-0) becoming 0.
TEXT ·maxPoolGrad2x2U16(SB), NOSPLIT, $0-49
	GRADSETUP
	MOVB $0, bad+48(FP)
	MOVL $0x8000, AX
	VPBROADCASTD AX, Z23
	SHLQ $1, R12                 // dx row, bytes
	TESTQ R13, R13
	JZ   mghDone

mghRow:
	MOVQ DI, AX
	LEAQ (DI)(R12*1), DX
	MOVQ SI, BX
	MOVQ R8, R11
	MOVQ R14, CX

mghStep:
	GRADWINDOWS
	VMOVDQU16.Z (BX), K5, Y0
	VPMOVZXWD   Y0, Z0
	VPCMPEQD    Z23, Z0, K1
	VMOVDQA32   Z24, K1, Z0      // -0 becomes +0
	VMOVDQU16.Z (R11), K5, Y1
	GRADSTEP
	KORTESTW K6, K6
	JZ   mghStore
	MOVB $1, bad+48(FP)

mghStore:
	GRADROWS
	VPMOVDW Z4, K1, (AX)
	VPMOVDW Z5, K2, 32(AX)
	VPMOVDW Z6, K1, (DX)
	VPMOVDW Z7, K2, 32(DX)
	ADDQ $64, AX
	ADDQ $64, DX
	ADDQ $32, BX
	ADDQ $32, R11
	SUBQ $16, CX
	JG   mghStep

	LEAQ (DI)(R12*2), DI
	LEAQ (SI)(R14*2), SI
	LEAQ (R8)(R14*2), R8
	DECQ R13
	JNZ  mghRow

mghDone:
	VZEROUPPER
	RET

// The AVX2 loops: eight windows, or eight float32 (sixteen 16-bit)
// elements, a step. AVX2 has no mask registers, so the loops that only
// write (pooling, its gradient, the row copies) end each row with a step
// that overlaps the one before, rewriting the same values, instead of a
// masked one: the pooling loops need rows of at least 8 windows (the
// wrappers check), the copies take shorter rows in smaller moves. Of the
// loops that add into memory, addRowsAt32AVX2 adds a row's last n%8
// elements one at a time, and col2imRowsAVX2 loads through VMASKMOVPS,
// which reads no lane its mask leaves out. Every instruction on X
// registers is VEX-encoded.

// pool16Split (VPSHUFB control): in each 128-bit lane, the even 16-bit
// words to the low quadword and the odd ones to the high.
DATA pool16Split<>+0(SB)/8, $0x0d0c090805040100
DATA pool16Split<>+8(SB)/8, $0x0f0e0b0a07060302
DATA pool16Split<>+16(SB)/8, $0x0d0c090805040100
DATA pool16Split<>+24(SB)/8, $0x0f0e0b0a07060302
GLOBL pool16Split<>(SB), RODATA|NOPTR, $32

// GRADSETUP2 loads the arguments and the F16 positions (Y12 0, Y13-Y15
// the bits of 1, 2, 3) for the 32-bit lanes of the F32 loop, or (words)
// the 16-bit one.
#define GRADSETUP2(bcast) \
	MOVQ dx+0(FP), DI; \
	MOVQ dy+8(FP), SI; \
	MOVQ pos+16(FP), R8; \
	MOVQ w+24(FP), R12; \
	MOVQ oh+32(FP), R13; \
	MOVQ ow+40(FP), R14; \
	MOVB $0, bad+48(FP); \
	VPXOR Y12, Y12, Y12; \
	MOVL $0x3c00, AX; \
	VMOVD AX, X13; \
	bcast X13, Y13; \
	MOVL $0x4000, AX; \
	VMOVD AX, X14; \
	bcast X14, Y14; \
	MOVL $0x4200, AX; \
	VMOVD AX, X15; \
	bcast X15, Y15

// GRADROW2 stores a window row's 16 float32 from the left (e0) and right
// (e1) elements of eight windows, interleaved, at (ptr).
#define GRADROW2(e0, e1, ptr) \
	VUNPCKLPS  e1, e0, Y6; \
	VUNPCKHPS  e1, e0, Y7; \
	VPERM2F128 $0x20, Y7, Y6, Y8; \
	VPERM2F128 $0x31, Y7, Y6, Y9; \
	VMOVUPS    Y8, (ptr); \
	VMOVUPS    Y9, 32(ptr)

// POOLSETUP2 loads the arguments and the F16 positions 1.0, 2.0, 3.0 (Y13,
// Y14, Y15, one per 32-bit lane).
#define POOLSETUP2 \
	MOVQ y+0(FP), DI; \
	MOVQ pos+8(FP), R8; \
	MOVQ x+16(FP), SI; \
	MOVQ w+24(FP), R12; \
	MOVQ oh+32(FP), R13; \
	MOVQ ow+40(FP), R14; \
	MOVL $0x3c00, AX; \
	VMOVD AX, X13; \
	VPBROADCASTD X13, Y13; \
	MOVL $0x4000, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL $0x4200, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15

// POOLNEXT2 moves R15 (the step's first window) on by 8, or back to ow-8
// for a last step that overlaps the one before, and jumps to col; it falls
// through when the row is done.
#define POOLNEXT2(col) \
	ADDQ $8, R15; \
	CMPQ R15, R14; \
	JGE  6(PC); \
	LEAQ 8(R15), R9; \
	CMPQ R9, R14; \
	JLE  col; \
	LEAQ -8(R14), R15; \
	JMP  col

// TAKE2 is TAKE for AVX2: element f (as float32; raw, what is stored)
// replaces the running maximum (Y4 value, raw in Y5, position Y0 or Y8 as
// pp) where it is greater or a NaN; Y1, Y2 (t1, t2) are scratch.
#define TAKE2(f, raw, p, pp, t1, t2) \
	VCMPPS    $0x1e, Y4, f, t1; \
	VCMPPS    $3, f, f, t2; \
	VORPS     t2, t1, t1; \
	VBLENDVPS t1, f, Y4, Y4; \
	VBLENDVPS t1, raw, Y5, Y5; \
	VBLENDVPS t1, p, pp, pp

// TAKE2F is TAKE2 for float32, whose value is what is stored.
#define TAKE2F(f, p) \
	VCMPPS    $0x1e, Y4, f, Y9; \
	VCMPPS    $3, f, f, Y10; \
	VORPS     Y10, Y9, Y9; \
	VBLENDVPS Y9, f, Y4, Y4; \
	VBLENDVPS Y9, p, Y8, Y8

// func maxPool2x2F32AVX2(y *float32, pos *uint16, x *float32, w, oh, ow int)
// maxPool2x2F32 for ow >= 8. VSHUFPS deinterleaves the windows of a step
// in the order 0 1 4 5 2 3 6 7, which VPERMPD and VPSHUFD undo in y and
// pos.
TEXT ·maxPool2x2F32AVX2(SB), NOSPLIT, $0-48
	POOLSETUP2
	SHLQ $2, R12                 // input row, bytes
	TESTQ R13, R13
	JZ   mpfyDone

mpfyRow:
	XORQ R15, R15

mpfyCol:
	LEAQ (SI)(R15*8), AX         // row 2r at window R15
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VSHUFPS $0x88, Y1, Y0, Y4    // a: top left, the running maximum
	VSHUFPS $0xdd, Y1, Y0, Y5    // b: top right
	VMOVUPS (AX)(R12*1), Y0      // row 2r+1
	VMOVUPS 32(AX)(R12*1), Y1
	VSHUFPS $0x88, Y1, Y0, Y6    // c: bottom left
	VSHUFPS $0xdd, Y1, Y0, Y7    // d: bottom right
	VPXOR   Y8, Y8, Y8           // position 0, a's
	TAKE2F(Y5, Y13)
	TAKE2F(Y6, Y14)
	TAKE2F(Y7, Y15)
	VPERMPD $0xd8, Y4, Y4
	VMOVUPS Y4, (DI)(R15*4)
	TESTQ   R8, R8
	JZ      mpfyNext
	VEXTRACTI128 $1, Y8, X9
	VPACKUSDW X9, X8, X8         // windows 0 1 4 5 2 3 6 7
	VPSHUFD $0xd8, X8, X8
	VMOVDQU X8, (R8)(R15*2)

mpfyNext:
	POOLNEXT2(mpfyCol)

	LEAQ (SI)(R12*2), SI         // two input rows down
	LEAQ (DI)(R14*4), DI         // one output row down
	TESTQ R8, R8
	JZ   mpfyRowEnd
	LEAQ (R8)(R14*2), R8

mpfyRowEnd:
	DECQ R13
	JNZ  mpfyRow

mpfyDone:
	VZEROUPPER
	RET

// func maxPool2x2U16AVX2(y, pos, x *uint16, w, oh, ow int, bf16 bool)
// maxPool2x2F32AVX2 for F16 (widened by VCVTPH2PS) or BF16 x and y.
TEXT ·maxPool2x2U16AVX2(SB), NOSPLIT, $0-49
	POOLSETUP2
	MOVBLZX bf16+48(FP), BX
	SHLQ $1, R12                 // input row, bytes
	VMOVDQU pool16Split<>(SB), Y12
	TESTQ R13, R13
	JZ   mphyDone

mphyRow:
	XORQ R15, R15

mphyCol:
	LEAQ (SI)(R15*4), AX         // row 2r at window R15
	VMOVDQU (AX), Y0
	VPSHUFB Y12, Y0, Y0
	VPERMQ  $0xd8, Y0, Y0        // X0: the left words (a), high lane the right (b)
	VMOVDQU (AX)(R12*1), Y1
	VPSHUFB Y12, Y1, Y1
	VPERMQ  $0xd8, Y1, Y1        // c, d
	VEXTRACTI128 $1, Y0, X2
	VEXTRACTI128 $1, Y1, X3
	VPMOVZXWD X0, Y5             // a's bits: the running maximum's
	VPMOVZXWD X2, Y7             // b
	VPMOVZXWD X1, Y9             // c
	VPMOVZXWD X3, Y11            // d
	TESTQ BX, BX
	JNZ  mphyBF16
	VCVTPH2PS X0, Y4
	VCVTPH2PS X2, Y6
	VCVTPH2PS X1, Y8
	VCVTPH2PS X3, Y10
	JMP  mphyTake

mphyBF16:
	VPSLLD $16, Y5, Y4
	VPSLLD $16, Y7, Y6
	VPSLLD $16, Y9, Y8
	VPSLLD $16, Y11, Y10

mphyTake:
	VPXOR Y0, Y0, Y0             // position 0, a's
	TAKE2(Y6, Y7, Y13, Y0, Y1, Y2)
	TAKE2(Y8, Y9, Y14, Y0, Y1, Y2)
	TAKE2(Y10, Y11, Y15, Y0, Y1, Y2)
	VEXTRACTI128 $1, Y5, X1
	VPACKUSDW X1, X5, X5
	VMOVDQU X5, (DI)(R15*2)
	TESTQ   R8, R8
	JZ      mphyNext
	VEXTRACTI128 $1, Y0, X1
	VPACKUSDW X1, X0, X0
	VMOVDQU X0, (R8)(R15*2)

mphyNext:
	POOLNEXT2(mphyCol)

	LEAQ (SI)(R12*2), SI
	LEAQ (DI)(R14*2), DI
	TESTQ R8, R8
	JZ   mphyRowEnd
	LEAQ (R8)(R14*2), R8

mphyRowEnd:
	DECQ R13
	JNZ  mphyRow

mphyDone:
	VZEROUPPER
	RET

// func copyRowsAVX2(dst, src unsafe.Pointer, n, rows, ds, ss int)
// copyRows32 and copyRows16 for AVX2, in bytes: rows of n > 0 bytes (even),
// dst rows ds and src rows ss bytes apart. A row moves as memmove does: 32
// bytes a step and a last step ending at the row's end, or for shorter rows
// two moves of 16, 8, 4 bytes that overlap (one of 2).
TEXT ·copyRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	TESTQ R8, R8
	JZ   cyDone

cyRow:
	CMPQ CX, $32
	JLT  cy16
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ CX, DX

cyStep:
	VMOVDQU (BX), Y0
	VMOVDQU Y0, (AX)
	ADDQ $32, AX
	ADDQ $32, BX
	SUBQ $32, DX
	CMPQ DX, $32
	JGE  cyStep
	TESTQ DX, DX
	JZ   cyNext
	VMOVDQU -32(SI)(CX*1), Y0
	VMOVDQU Y0, -32(DI)(CX*1)
	JMP  cyNext

cy16:
	CMPQ CX, $16
	JLT  cy8
	VMOVDQU (SI), X0
	VMOVDQU -16(SI)(CX*1), X1
	VMOVDQU X0, (DI)
	VMOVDQU X1, -16(DI)(CX*1)
	JMP  cyNext

cy8:
	CMPQ CX, $8
	JLT  cy4
	MOVQ (SI), AX
	MOVQ -8(SI)(CX*1), BX
	MOVQ AX, (DI)
	MOVQ BX, -8(DI)(CX*1)
	JMP  cyNext

cy4:
	CMPQ CX, $4
	JLT  cy2
	MOVL (SI), AX
	MOVL -4(SI)(CX*1), BX
	MOVL AX, (DI)
	MOVL BX, -4(DI)(CX*1)
	JMP  cyNext

cy2:
	MOVW (SI), AX
	MOVW AX, (DI)

cyNext:
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  cyRow

cyDone:
	VZEROUPPER
	RET

// func copyStride2x32AVX2(dst, src *float32, n, rows, ds, ss int)
// copyStride2x32 for AVX2: eight outputs a step from src[2j..2j+7] and
// src[2j+7..2j+14] (so the loads end at the last element read), the
// last step overlapping; four a step (two, overlapping) for rows of 4-7,
// one at a time below.
TEXT ·copyStride2x32AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $2, R9
	SHLQ $2, R10
	TESTQ R8, R8
	JZ   s2fyDone
	LEAQ -8(CX), R11             // the last step of 8: outputs n-8...
	LEAQ -4(CX), R12             // ... and of 4

s2fyRow:
	CMPQ CX, $8
	JLT  s2fyHalf
	XORQ DX, DX                  // the step's first output

s2fyStep:
	LEAQ (SI)(DX*8), BX
	VMOVUPS (BX), Y0             // src[2j..2j+7]: outputs j..j+3 at 0 2 4 6
	VMOVUPS 28(BX), Y1           // src[2j+7..2j+14]: j+4..j+7 at 1 3 5 7
	VSHUFPS $0xd8, Y1, Y0, Y2    // outputs 0 1 4 5 | 2 3 6 7
	VPERMPD $0xd8, Y2, Y2
	VMOVUPS Y2, (DI)(DX*4)
	CMPQ DX, R11
	JGE  s2fyNext
	ADDQ $8, DX
	CMPQ DX, R11
	JLE  s2fyStep
	MOVQ R11, DX
	JMP  s2fyStep

s2fyHalf:
	CMPQ CX, $4
	JLT  s2fyOne
	VMOVUPS (SI), X0             // outputs 0-3
	VMOVUPS 12(SI), X1
	VSHUFPS $0xd8, X1, X0, X2
	VMOVUPS X2, (DI)
	LEAQ (SI)(R12*8), BX         // outputs n-4 to n-1
	VMOVUPS (BX), X0
	VMOVUPS 12(BX), X1
	VSHUFPS $0xd8, X1, X0, X2
	VMOVUPS X2, (DI)(R12*4)
	JMP  s2fyNext

s2fyOne:
	XORQ DX, DX

s2fyOneStep:
	MOVL (SI)(DX*8), AX
	MOVL AX, (DI)(DX*4)
	INCQ DX
	CMPQ DX, CX
	JLT  s2fyOneStep

s2fyNext:
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  s2fyRow

s2fyDone:
	VZEROUPPER
	RET

// func copyStride2x16AVX2(dst, src *uint16, n, rows, ds, ss int)
// copyStride2x32AVX2 for 16-bit storage: sixteen outputs a step from
// src[2j..2j+15] and src[2j+15..2j+30], eight (from the low lanes) for
// rows of 8-15, one at a time below.
TEXT ·copyStride2x16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R8
	MOVQ ds+32(FP), R9
	MOVQ ss+40(FP), R10
	SHLQ $1, R9
	SHLQ $1, R10
	VMOVDQU pool16Split<>(SB), Y12
	TESTQ R8, R8
	JZ   s2hyDone
	LEAQ -16(CX), R11            // the last step of 16: outputs n-16...
	LEAQ -8(CX), R12             // ... and of 8

s2hyRow:
	CMPQ CX, $16
	JLT  s2hyHalf
	XORQ DX, DX

s2hyStep:
	LEAQ (SI)(DX*4), BX
	VMOVDQU (BX), Y0             // outputs j..j+7 at the even words
	VMOVDQU 30(BX), Y1           // j+8..j+15 at the odd words
	VPSHUFB Y12, Y0, Y0          // per lane: evens low, odds high
	VPSHUFB Y12, Y1, Y1
	VPBLENDD $0xcc, Y1, Y0, Y2   // outputs 0-3 8-11 | 4-7 12-15
	VPERMQ  $0xd8, Y2, Y2
	VMOVDQU Y2, (DI)(DX*2)
	CMPQ DX, R11
	JGE  s2hyNext
	ADDQ $16, DX
	CMPQ DX, R11
	JLE  s2hyStep
	MOVQ R11, DX
	JMP  s2hyStep

s2hyHalf:
	CMPQ CX, $8
	JLT  s2hyOne
	VMOVDQU (SI), X0             // outputs 0-7
	VMOVDQU 14(SI), X1
	VPSHUFB X12, X0, X0
	VPSHUFB X12, X1, X1
	VPBLENDD $0x0c, X1, X0, X2
	VMOVDQU X2, (DI)
	LEAQ (SI)(R12*4), BX         // outputs n-8 to n-1
	VMOVDQU (BX), X0
	VMOVDQU 14(BX), X1
	VPSHUFB X12, X0, X0
	VPSHUFB X12, X1, X1
	VPBLENDD $0x0c, X1, X0, X2
	VMOVDQU X2, (DI)(R12*2)
	JMP  s2hyNext

s2hyOne:
	XORQ DX, DX

s2hyOneStep:
	MOVW (SI)(DX*4), AX
	MOVW AX, (DI)(DX*2)
	INCQ DX
	CMPQ DX, CX
	JLT  s2hyOneStep

s2hyNext:
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  s2hyRow

s2hyDone:
	VZEROUPPER
	RET

// lanes8 is 0-7, one per 32-bit lane.
DATA lanes8<>+0(SB)/8, $0x0000000100000000
DATA lanes8<>+8(SB)/8, $0x0000000300000002
DATA lanes8<>+16(SB)/8, $0x0000000500000004
DATA lanes8<>+24(SB)/8, $0x0000000700000006
GLOBL lanes8<>(SB), RODATA|NOPTR, $32

// func addRowsAt32AVX2(dst, src *float32, off, n, rows, ds, ss int)
// addRowsAt32 for AVX2: eight lanes a step from off, the last n%8 of a row
// one at a time (VMOVSS, VADDSS), each as src + dst (the Go loop's order,
// which picks a NaN's payload).
TEXT ·addRowsAt32AVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ off+16(FP), AX
	MOVQ n+24(FP), R15
	MOVQ rows+32(FP), R8
	MOVQ ds+40(FP), R9
	MOVQ ss+48(FP), R10
	SHLQ $2, R9
	SHLQ $2, R10
	LEAQ (DI)(AX*4), DI          // dst at off
	MOVQ R15, R14
	SHRQ $3, R14                 // whole steps
	ANDQ $7, R15                 // the rest
	TESTQ R8, R8
	JZ   aryDone

aryRow:
	MOVQ DI, AX
	MOVQ SI, BX
	MOVQ R14, CX
	TESTQ CX, CX
	JZ   aryTail

aryStep:
	VMOVUPS (BX), Y1
	VADDPS  (AX), Y1, Y0
	VMOVUPS Y0, (AX)
	ADDQ $32, AX
	ADDQ $32, BX
	DECQ CX
	JNZ  aryStep

aryTail:
	MOVQ R15, CX
	TESTQ CX, CX
	JZ   aryNext

aryOne:
	VMOVSS (BX), X1
	VADDSS (AX), X1, X0
	VMOVSS X0, (AX)
	ADDQ $4, AX
	ADDQ $4, BX
	DECQ CX
	JNZ  aryOne

aryNext:
	ADDQ R9, DI
	ADDQ R10, SI
	DECQ R8
	JNZ  aryRow

aryDone:
	VZEROUPPER
	RET

// c2iShift (VPSLLVD counts) moves bit 8q+l of a 32-bit mask word to the
// sign bit of lane l, for the four eight-lane registers q the word covers:
// the sign bits are what VMASKMOVPS reads.
DATA c2iShift<>+0(SB)/8, $0x0000001e0000001f
DATA c2iShift<>+8(SB)/8, $0x0000001c0000001d
DATA c2iShift<>+16(SB)/8, $0x0000001a0000001b
DATA c2iShift<>+24(SB)/8, $0x0000001800000019
DATA c2iShift<>+32(SB)/8, $0x0000001600000017
DATA c2iShift<>+40(SB)/8, $0x0000001400000015
DATA c2iShift<>+48(SB)/8, $0x0000001200000013
DATA c2iShift<>+56(SB)/8, $0x0000001000000011
DATA c2iShift<>+64(SB)/8, $0x0000000e0000000f
DATA c2iShift<>+72(SB)/8, $0x0000000c0000000d
DATA c2iShift<>+80(SB)/8, $0x0000000a0000000b
DATA c2iShift<>+88(SB)/8, $0x0000000800000009
DATA c2iShift<>+96(SB)/8, $0x0000000600000007
DATA c2iShift<>+104(SB)/8, $0x0000000400000005
DATA c2iShift<>+112(SB)/8, $0x0000000200000003
DATA c2iShift<>+120(SB)/8, $0x0000000000000001
GLOBL c2iShift<>(SB), RODATA|NOPTR, $128

// C2IADD adds the lanes of register acc (the eight floats at byte off of
// the row) that mask word m allows, from col at off(AX), as col + acc
// (the Go loop's order, which picks a NaN's payload): lanes left out load
// 0, and adding +0 changes no sum here (one that starts at +0 is never
// -0).
#define C2IADD(acc, off, m, sh) \
	VPSLLVD    c2iShift<>+sh(SB), m, Y10; \
	VMASKMOVPS off(AX), Y10, Y11; \
	VADDPS     acc, Y11, acc

// C2ISTORE stores register r at byte off of the dst row: whole when the
// row holds all of it (R13 registers do), else its first w%8 lanes (Y12)
// and the row is done.
#define C2ISTORE(r, off, q, part) \
	CMPQ R13, $q; \
	JLE  part; \
	VMOVUPS r, off(DI)

#define C2IPART(r, off) \
	TESTQ R15, R15; \
	JZ   ciyRowEnd; \
	VMASKMOVPS r, Y12, off(DI); \
	JMP  ciyRowEnd

// func col2imRowsAVX2(dst, col *float32, ent *c2iEntry, end *int32, h, w int)
// col2imRowsAVX512 for AVX2: the row (w <= 64) summed in 2, 4 or 8
// registers of eight, each entry's lanes loaded through VMASKMOVPS with
// masks made from its bits by C2IADD; stored once per row.
TEXT ·col2imRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ col+8(FP), SI
	MOVQ ent+16(FP), DX
	MOVQ end+24(FP), R8
	MOVQ h+32(FP), R9
	MOVQ w+40(FP), R10
	MOVQ R10, R13
	SHRQ $3, R13                 // registers the row holds whole
	MOVQ R10, R15
	ANDQ $7, R15                 // lanes of the one after
	VMOVD R15, X12
	VPBROADCASTD X12, Y12
	VPCMPGTD lanes8<>(SB), Y12, Y12 // lanes < w%8
	MOVQ $2, R14                 // registers summed: 2, 4 or 8
	CMPQ R10, $16
	JLE  ciyRegs
	MOVQ $4, R14
	CMPQ R10, $32
	JLE  ciyRegs
	MOVQ $8, R14

ciyRegs:
	SHLQ $2, R10                 // row, bytes
	XORQ R11, R11                // entries done
	TESTQ R9, R9
	JZ   ciyDone

ciyRow:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	MOVLQSX (R8), R12            // this row's entries end
	CMPQ R11, R12
	JGE  ciyStore

ciyEnt:
	MOVLQSX (DX), AX             // src offset of lane 0
	LEAQ (SI)(AX*4), AX
	VPBROADCASTD 4(DX), Y8       // mask bits of lanes 0-31
	C2IADD(Y0, 0, Y8, 0)
	C2IADD(Y1, 32, Y8, 32)
	CMPQ R14, $2
	JEQ  ciyEntNext
	C2IADD(Y2, 64, Y8, 64)
	C2IADD(Y3, 96, Y8, 96)
	CMPQ R14, $4
	JEQ  ciyEntNext
	VPBROADCASTD 8(DX), Y9       // lanes 32-63
	C2IADD(Y4, 128, Y9, 0)
	C2IADD(Y5, 160, Y9, 32)
	C2IADD(Y6, 192, Y9, 64)
	C2IADD(Y7, 224, Y9, 96)

ciyEntNext:
	ADDQ $16, DX
	INCQ R11
	CMPQ R11, R12
	JLT  ciyEnt

ciyStore:
	C2ISTORE(Y0, 0, 0, ciyP0)
	C2ISTORE(Y1, 32, 1, ciyP1)
	C2ISTORE(Y2, 64, 2, ciyP2)
	C2ISTORE(Y3, 96, 3, ciyP3)
	C2ISTORE(Y4, 128, 4, ciyP4)
	C2ISTORE(Y5, 160, 5, ciyP5)
	C2ISTORE(Y6, 192, 6, ciyP6)
	C2ISTORE(Y7, 224, 7, ciyP7)
	JMP  ciyRowEnd

ciyP0:
	C2IPART(Y0, 0)

ciyP1:
	C2IPART(Y1, 32)

ciyP2:
	C2IPART(Y2, 64)

ciyP3:
	C2IPART(Y3, 96)

ciyP4:
	C2IPART(Y4, 128)

ciyP5:
	C2IPART(Y5, 160)

ciyP6:
	C2IPART(Y6, 192)

ciyP7:
	C2IPART(Y7, 224)

ciyRowEnd:
	ADDQ R10, DI
	ADDQ $4, R8
	DECQ R9
	JNZ  ciyRow

ciyDone:
	VZEROUPPER
	RET

// func maxPoolGrad2x2F32AVX2(dx, dy *float32, pos *uint16, w, oh, ow int) (bad bool)
// maxPoolGrad2x2F32 for ow >= 8, eight windows a step, the last step of a
// row overlapping the one before.
TEXT ·maxPoolGrad2x2F32AVX2(SB), NOSPLIT, $0-49
	GRADSETUP2(VPBROADCASTD)
	SHLQ $2, R12                 // dx row, bytes
	TESTQ R13, R13
	JZ   mgfyDone

mgfyRow:
	XORQ R15, R15

mgfyCol:
	VMOVUPS (SI)(R15*4), Y0
	VADDPS  Y12, Y0, Y0          // -0 + +0 = +0
	VPMOVZXWD (R8)(R15*2), Y1
	VPCMPEQD Y12, Y1, Y2         // the window's element 0, 1, 2 or 3
	VPCMPEQD Y13, Y1, Y3
	VPCMPEQD Y14, Y1, Y4
	VPCMPEQD Y15, Y1, Y5
	VPOR     Y3, Y2, Y6
	VPOR     Y4, Y6, Y6
	VPOR     Y5, Y6, Y6
	VMOVMSKPS Y6, AX
	CMPL     AX, $0xff
	JEQ      mgfyGood
	MOVB     $1, bad+48(FP)

mgfyGood:
	VPAND Y0, Y2, Y2
	VPAND Y0, Y3, Y3
	VPAND Y0, Y4, Y4
	VPAND Y0, Y5, Y5
	LEAQ (DI)(R15*8), AX         // dx row 2r at window R15
	LEAQ (AX)(R12*1), DX         // row 2r+1
	GRADROW2(Y2, Y3, AX)
	GRADROW2(Y4, Y5, DX)
	POOLNEXT2(mgfyCol)

	LEAQ (DI)(R12*2), DI         // two dx rows down
	LEAQ (SI)(R14*4), SI         // one dy row down
	LEAQ (R8)(R14*2), R8
	DECQ R13
	JNZ  mgfyRow

mgfyDone:
	VZEROUPPER
	RET

// func maxPoolGrad2x2U16AVX2(dx, dy, pos *uint16, w, oh, ow int) (bad bool)
// maxPoolGrad2x2U16 for ow >= 8: maxPoolGrad2x2F32AVX2 on 16-bit words
// in X registers, 0x8000 (-0) becoming 0.
TEXT ·maxPoolGrad2x2U16AVX2(SB), NOSPLIT, $0-49
	GRADSETUP2(VPBROADCASTW)
	MOVL $0x8000, AX
	VMOVD AX, X11
	VPBROADCASTW X11, X11
	SHLQ $1, R12                 // dx row, bytes
	TESTQ R13, R13
	JZ   mghyDone

mghyRow:
	XORQ R15, R15

mghyCol:
	VMOVDQU  (SI)(R15*2), X0
	VPCMPEQW X11, X0, X1
	VPANDN   X0, X1, X0          // -0 becomes +0
	VMOVDQU  (R8)(R15*2), X1
	VPCMPEQW X12, X1, X2
	VPCMPEQW X13, X1, X3
	VPCMPEQW X14, X1, X4
	VPCMPEQW X15, X1, X5
	VPOR     X3, X2, X6
	VPOR     X4, X6, X6
	VPOR     X5, X6, X6
	VPMOVMSKB X6, AX
	CMPL     AX, $0xffff
	JEQ      mghyGood
	MOVB     $1, bad+48(FP)

mghyGood:
	VPAND X0, X2, X2
	VPAND X0, X3, X3
	VPAND X0, X4, X4
	VPAND X0, X5, X5
	LEAQ (DI)(R15*4), AX
	LEAQ (AX)(R12*1), DX
	VPUNPCKLWD X3, X2, X6
	VPUNPCKHWD X3, X2, X7
	VMOVDQU X6, (AX)
	VMOVDQU X7, 16(AX)
	VPUNPCKLWD X5, X4, X6
	VPUNPCKHWD X5, X4, X7
	VMOVDQU X6, (DX)
	VMOVDQU X7, 16(DX)
	POOLNEXT2(mghyCol)

	LEAQ (DI)(R12*2), DI
	LEAQ (SI)(R14*2), SI
	LEAQ (R8)(R14*2), R8
	DECQ R13
	JNZ  mghyRow

mghyDone:
	VZEROUPPER
	RET
