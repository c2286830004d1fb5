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
