//go:build !purego

#include "textflag.h"

// Exponentials and GELU, sixteen float32 lanes a step with a masked step
// for the rest: the vector forms of exp32 (exp.go) and of geluRow and
// geluGradRow (gelu.go). exp rounds n = x·log2(e) to nearest (even), keeps
// r = x - n·ln2 in two parts, evaluates Cephes' polynomial and scales by
// 2^n with VSCALEFPS, which gives +Inf past the largest float32 and
// gradual underflow below the smallest normal. x is clamped to [-104, 89]
// first so that ±Inf gives 0 and +Inf (r would be NaN); a NaN passes the
// clamps (VMAXPS and VMINPS return their second source, x, when either
// is NaN) and comes out NaN.

DATA tc<>+0(SB)/4, $0x3fb8aa3b   // log2(e)
DATA tc<>+4(SB)/4, $0x3f318000   // ln2 high part 0.693359375
DATA tc<>+8(SB)/4, $0xb95e8083   // ln2 low part -2.12194440e-4
DATA tc<>+12(SB)/4, $0x39506967  // 1.9875691500e-4
DATA tc<>+16(SB)/4, $0x3ab743ce  // 1.3981999507e-3
DATA tc<>+20(SB)/4, $0x3c088908  // 8.3334519073e-3
DATA tc<>+24(SB)/4, $0x3d2aa9c1  // 4.1665795894e-2
DATA tc<>+28(SB)/4, $0x3e2aaaaa  // 1.6666665459e-1
DATA tc<>+32(SB)/4, $0x3f000000  // 5.0000001201e-1 (rounds to 0.5)
DATA tc<>+36(SB)/4, $0x3f800000  // 1
DATA tc<>+40(SB)/4, $0xc3160000  // -150
DATA tc<>+44(SB)/4, $0x42b20000  // 89
DATA tc<>+48(SB)/4, $0x3f3504f3  // 1/sqrt(2)
DATA tc<>+52(SB)/4, $0x3ecc422a  // 1/sqrt(2*pi)
DATA tc<>+56(SB)/4, $0x40000000  // 2
DATA tc<>+60(SB)/4, $0x7fffffff  // |x| mask
// Numerical Recipes' erfc polynomial in t, highest degree first.
DATA tc<>+64(SB)/4, $0x3e2ef945  // 0.17087277
DATA tc<>+68(SB)/4, $0xbf527892  // -0.82215223
DATA tc<>+72(SB)/4, $0x3fbe87b0  // 1.48851587
DATA tc<>+76(SB)/4, $0xbf914e5d  // -1.13520398
DATA tc<>+80(SB)/4, $0x3e8ec7cc  // 0.27886807
DATA tc<>+84(SB)/4, $0xbe3ec24c  // -0.18628806
DATA tc<>+88(SB)/4, $0x3dc636c9  // 0.09678418
DATA tc<>+92(SB)/4, $0x3ebf88fb  // 0.37409196
DATA tc<>+96(SB)/4, $0x3f8000c7  // 1.00002368
DATA tc<>+100(SB)/4, $0xbfa1fc4e // -1.26551223
DATA tc<>+104(SB)/4, $0xff800000 // -Inf
GLOBL tc<>(SB), RODATA|NOPTR, $108

// EXPCONSTS loads exp's constants into Z16-Z27.
#define EXPCONSTS \
	VBROADCASTSS tc<>+0(SB), Z16; \
	VBROADCASTSS tc<>+4(SB), Z17; \
	VBROADCASTSS tc<>+8(SB), Z18; \
	VBROADCASTSS tc<>+12(SB), Z19; \
	VBROADCASTSS tc<>+16(SB), Z20; \
	VBROADCASTSS tc<>+20(SB), Z21; \
	VBROADCASTSS tc<>+24(SB), Z22; \
	VBROADCASTSS tc<>+28(SB), Z23; \
	VBROADCASTSS tc<>+32(SB), Z24; \
	VBROADCASTSS tc<>+36(SB), Z25; \
	VBROADCASTSS tc<>+40(SB), Z26; \
	VBROADCASTSS tc<>+44(SB), Z27

// EXP sets y = exp(x), overwriting x and n (temporaries).
#define EXP(x, y, n) \
	VMAXPS x, Z26, x; \
	VMINPS x, Z27, x; \
	VMULPS Z16, x, n; \
	VRNDSCALEPS $0, n, n; \
	VFNMADD231PS Z17, n, x; \
	VFNMADD231PS Z18, n, x; \
	VMOVAPS Z19, y; \
	VFMADD213PS Z20, x, y; \
	VFMADD213PS Z21, x, y; \
	VFMADD213PS Z22, x, y; \
	VFMADD213PS Z23, x, y; \
	VFMADD213PS Z24, x, y; \
	VMULPS x, y, y; \
	VFMADD213PS x, x, y; \
	VADDPS Z25, y, y; \
	VSCALEFPS n, y, y

// TAILMASK sets K1 to the last n%16 elements and CX to the whole steps.
#define TAILMASK \
	MOVQ CX, R11; \
	ANDQ $15, R11; \
	MOVQ $-1, R12; \
	BZHIQ R11, R12, R12; \
	KMOVW R12, K1; \
	SHRQ $4, CX

// ERFC sets e = erfc(-x/√2), given x in Z0, with a = |x|/√2 left in Z2
// and t in Z3; Z4-Z7 are clobbered.
#define ERFC \
	VANDPS.BCST tc<>+60(SB), Z0, Z2; \
	VMULPS.BCST tc<>+48(SB), Z2, Z2; \
	VMULPS.BCST tc<>+32(SB), Z2, Z3; \
	VADDPS Z25, Z3, Z3; \
	VDIVPS Z3, Z25, Z3; \
	VBROADCASTSS tc<>+64(SB), Z4; \
	VFMADD213PS.BCST tc<>+68(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+72(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+76(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+80(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+84(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+88(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+92(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+96(SB), Z3, Z4; \
	VFMADD213PS.BCST tc<>+100(SB), Z3, Z4; \
	VMULPS Z2, Z2, Z5; \
	VSUBPS Z5, Z4, Z4; \
	EXP(Z4, Z1, Z6); \
	VMULPS Z3, Z1, Z1; \
	VCMPPS $0x1d, Z28, Z0, K2; \
	VSUBPS Z1, Z29, K2, Z1

// func geluAVX512(dst, src *float32, n int)
TEXT ·geluAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	EXPCONSTS
	VPXORD Z28, Z28, Z28
	VBROADCASTSS tc<>+56(SB), Z29
	TAILMASK
	TESTQ CX, CX
	JZ   gTail

gStep:
	VMOVUPS (SI), Z0
	ERFC
	VMULPS Z0, Z1, Z1
	VMULPS.BCST tc<>+32(SB), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  gStep

gTail:
	VMOVUPS.Z (SI), K1, Z0
	ERFC
	VMULPS Z0, Z1, Z1
	VMULPS.BCST tc<>+32(SB), Z1, Z1
	VMOVUPS Z1, K1, (DI)
	VZEROUPPER
	RET

// GELUGRAD sets Z1 = dy·(Φ(x) + x·φ(x)) for x in Z0 and dy in Z8.
#define GELUGRAD \
	ERFC; \
	VMULPS.BCST tc<>+32(SB), Z1, Z1; \
	VSUBPS Z5, Z28, Z5; \
	EXP(Z5, Z7, Z6); \
	VMULPS.BCST tc<>+52(SB), Z7, Z7; \
	VFMADD231PS Z7, Z0, Z1; \
	VMULPS Z8, Z1, Z1

// func geluGradAVX512(dst, dy, x *float32, n int)
TEXT ·geluGradAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ dy+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	EXPCONSTS
	VPXORD Z28, Z28, Z28
	VBROADCASTSS tc<>+56(SB), Z29
	TAILMASK
	TESTQ CX, CX
	JZ   ggTail

ggStep:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z8
	GELUGRAD
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ  ggStep

ggTail:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS.Z (DX), K1, Z8
	GELUGRAD
	VMOVUPS Z1, K1, (DI)
	VZEROUPPER
	RET

// func expShiftAVX512(dst, src *float32, n int, m float32) float32
// dst = exp(src - m); returns their sum (sixteen float32 partial sums,
// lane j%16 for element j, added pairwise at the end).
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS m+24(FP), Z9
	EXPCONSTS
	VPXORD Z10, Z10, Z10
	TAILMASK
	TESTQ CX, CX
	JZ   eTail

eStep:
	VMOVUPS (SI), Z0
	VSUBPS Z9, Z0, Z0
	EXP(Z0, Z1, Z2)
	VADDPS Z1, Z10, Z10
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  eStep

eTail:
	VMOVUPS.Z (SI), K1, Z0
	VSUBPS Z9, Z0, Z0
	EXP(Z0, Z1, Z2)
	VADDPS Z1, Z10, K1, Z10
	VMOVUPS Z1, K1, (DI)
	VEXTRACTF32X8 $1, Z10, Y11
	VADDPS Y11, Y10, Y10
	VEXTRACTF128 $1, Y10, X11
	VADDPS X11, X10, X10
	VPERMILPS $0x4e, X10, X11
	VADDPS X11, X10, X10
	VPERMILPS $0xb1, X10, X11
	VADDSS X11, X10, X10
	VMOVSS X10, ret+32(FP)
	VZEROUPPER
	RET


// ROWMASKS sets K2 to the lanes of the chunk at element R11 below CX (the
// row's valid elements) and K4 to those below R10 (its columns).
#define ROWMASKS \
	MOVQ CX, R12; \
	SUBQ R11, R12; \
	XORQ R13, R13; \
	CMPQ R12, $0; \
	CMOVQLT R13, R12; \
	MOVQ $-1, R13; \
	BZHIQ R12, R13, R13; \
	KMOVW R13, K2; \
	MOVQ R10, R12; \
	SUBQ R11, R12; \
	MOVQ $-1, R13; \
	BZHIQ R12, R13, R13; \
	KMOVW R13, K4

// VALID sets CX to row R15's valid elements: R10 (cols), or at most
// R15 + R14 + 1 when R14 (diag) is not negative.
#define VALID \
	MOVQ R10, CX; \
	TESTQ R14, R14; \
	JS 4(PC); \
	LEAQ 1(R15)(R14*1), R11; \
	CMPQ R11, CX; \
	CMOVQLT R11, CX

// HSUM16 sets X10 lane 0 to the sum of Z10's lanes (Z11 clobbered).
#define HSUM16 \
	VEXTRACTF32X8 $1, Z10, Y11; \
	VADDPS Y11, Y10, Y10; \
	VEXTRACTF128 $1, Y10, X11; \
	VADDPS X11, X10, X10; \
	VPERMILPS $0x4e, X10, X11; \
	VADDPS X11, X10, X10; \
	VPERMILPS $0xb1, X10, X11; \
	VADDSS X11, X10, X10

// The row loop written out in both functions below (its labels carry the
// function's prefix) sets the row at DI to exp(row at SI - Z9) for its CX
// valid elements and to 0 for the rest of its R10 columns, adding the exps
// into Z10 (cleared first when the sum is wanted). Full chunks of valid
// elements run unmasked; the chunk that straddles the end of the valid
// ones is masked; chunks past it store zeros (Z28). R11-R13, K2 and K4 are
// clobbered.

// func attnSoftmaxAVX512(p, s *float32, ld, rows, cols, diag int, m, l, corr *float32)
//
// One online-softmax step of fused attention over a block of scores s
// (rows x cols, row stride ld): for each row r, with valid = cols or, when
// diag >= 0, min(cols, r+diag+1) (the causal mask), mnew = max(m[r], the
// row's largest valid score), corr[r] = exp(m[r] - mnew), p[r, j] =
// exp(s[r, j] - mnew) for valid j and 0 for the rest, l[r] = l[r]·corr[r]
// + sum_j p[r, j], and m[r] = mnew. It goes in three passes, so that the
// rows' factors corr are sixteen exps at a time instead of a dependent
// chain of one per row: the rows' maxima (into corr), then the factors,
// then each row's exps and sum.
TEXT ·attnSoftmaxAVX512(SB), NOSPLIT, $0-72
	MOVQ s+8(FP), SI
	MOVQ ld+16(FP), R8
	SHLQ $2, R8
	MOVQ rows+24(FP), R9
	MOVQ cols+32(FP), R10
	MOVQ diag+40(FP), R14
	MOVQ m+48(FP), AX
	MOVQ l+56(FP), BX
	MOVQ corr+64(FP), DX
	EXPCONSTS
	VPXORD Z28, Z28, Z28
	XORQ R15, R15

	// Pass 1: corr[r] = max(m[r], the row's largest valid score). NaNs
	// are not propagated here: an exp of a NaN score turns its weight and
	// the row's sum into NaN.
smMaxRow:
	CMPQ R15, R9
	JGE  smCorr
	VALID
	VBROADCASTSS tc<>+104(SB), Z12
	XORQ R11, R11

smMaxFull:
	LEAQ 16(R11), R12
	CMPQ R12, CX
	JGT  smMaxPart
	VMAXPS (SI)(R11*4), Z12, Z12
	ADDQ $16, R11
	JMP  smMaxFull

smMaxPart:
	CMPQ R11, CX
	JGE  smMaxDone
	ROWMASKS
	VMAXPS (SI)(R11*4), Z12, K2, Z12

smMaxDone:
	VEXTRACTF32X8 $1, Z12, Y13
	VMAXPS Y13, Y12, Y12
	VEXTRACTF128 $1, Y12, X13
	VMAXPS X13, X12, X12
	VPERMILPS $0x4e, X12, X13
	VMAXPS X13, X12, X12
	VPERMILPS $0xb1, X12, X13
	VMAXPS X13, X12, X12
	VMAXSS (AX)(R15*4), X12, X12
	VMOVSS X12, (DX)(R15*4)
	ADDQ R8, SI
	INCQ R15
	JMP  smMaxRow

	// Pass 2, sixteen rows at a time: corr = exp(m - mnew), m = mnew.
smCorr:
	XORQ R15, R15

smCorrStep:
	CMPQ R15, R9
	JGE  smExp
	MOVQ R9, R12
	SUBQ R15, R12
	MOVQ $-1, R13
	BZHIQ R12, R13, R13
	KMOVW R13, K1
	VMOVUPS.Z (DX)(R15*4), K1, Z5
	VMOVUPS.Z (AX)(R15*4), K1, Z6
	VMOVUPS Z5, K1, (AX)(R15*4)
	VSUBPS Z5, Z6, Z6
	EXP(Z6, Z7, Z2)
	VMOVUPS Z7, K1, (DX)(R15*4)
	ADDQ $16, R15
	JMP  smCorrStep

	// Pass 3: each row's exps and l = l·corr + their sum.
smExp:
	MOVQ p+0(FP), DI
	MOVQ s+8(FP), SI
	XORQ R15, R15

smExpRow:
	CMPQ R15, R9
	JGE  smDone
	VALID
	VBROADCASTSS (AX)(R15*4), Z9
	VPXORD Z10, Z10, Z10
	XORQ R11, R11
smEFull:
	LEAQ 16(R11), R12
	CMPQ R12, CX
	JGT  smEPart
	VMOVUPS (SI)(R11*4), Z0
	VSUBPS Z9, Z0, Z0
	EXP(Z0, Z1, Z2)
	VADDPS Z1, Z10, Z10
	VMOVUPS Z1, (DI)(R11*4)
	ADDQ $16, R11
	JMP  smEFull
smEPart:
	CMPQ R11, CX
	JGE  smEZero
	ROWMASKS
	VMOVUPS.Z (SI)(R11*4), K2, Z0
	VSUBPS Z9, Z0, Z0
	EXP(Z0, Z1, Z2)
	VMOVAPS.Z Z1, K2, Z1
	VADDPS Z1, Z10, Z10
	VMOVUPS Z1, K4, (DI)(R11*4)
	ADDQ $16, R11
smEZero:
	CMPQ R11, R10
	JGE  smEDone
	MOVQ R10, R12
	SUBQ R11, R12
	MOVQ $-1, R13
	BZHIQ R12, R13, R13
	KMOVW R13, K4
	VMOVUPS Z28, K4, (DI)(R11*4)
	ADDQ $16, R11
	JMP  smEZero
smEDone:
	HSUM16
	VMOVSS (BX)(R15*4), X4
	VMULSS (DX)(R15*4), X4, X4
	VADDSS X10, X4, X4
	VMOVSS X4, (BX)(R15*4)
	ADDQ R8, SI
	ADDQ R8, DI
	INCQ R15
	JMP  smExpRow

smDone:
	VZEROUPPER
	RET

// func attnProbsAVX512(p, s *float32, ld, rows, cols, diag int, lse *float32)
//
// Fused attention's backward recomputation of a block's weights: p[r, j] =
// exp(s[r, j] - lse[r]) for the valid j of each row (as attnSoftmaxAVX512
// defines them), 0 for the rest.
TEXT ·attnProbsAVX512(SB), NOSPLIT, $0-56
	MOVQ p+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ ld+16(FP), R8
	SHLQ $2, R8
	MOVQ rows+24(FP), R9
	MOVQ cols+32(FP), R10
	MOVQ diag+40(FP), R14
	MOVQ lse+48(FP), AX
	EXPCONSTS
	VPXORD Z28, Z28, Z28
	XORQ R15, R15

prRow:
	CMPQ R15, R9
	JGE  prDone
	VALID
	VBROADCASTSS (AX)(R15*4), Z9
	XORQ R11, R11
prEFull:
	LEAQ 16(R11), R12
	CMPQ R12, CX
	JGT  prEPart
	VMOVUPS (SI)(R11*4), Z0
	VSUBPS Z9, Z0, Z0
	EXP(Z0, Z1, Z2)
	VADDPS Z1, Z10, Z10
	VMOVUPS Z1, (DI)(R11*4)
	ADDQ $16, R11
	JMP  prEFull
prEPart:
	CMPQ R11, CX
	JGE  prEZero
	ROWMASKS
	VMOVUPS.Z (SI)(R11*4), K2, Z0
	VSUBPS Z9, Z0, Z0
	EXP(Z0, Z1, Z2)
	VMOVAPS.Z Z1, K2, Z1
	VADDPS Z1, Z10, Z10
	VMOVUPS Z1, K4, (DI)(R11*4)
	ADDQ $16, R11
prEZero:
	CMPQ R11, R10
	JGE  prEDone
	MOVQ R10, R12
	SUBQ R11, R12
	MOVQ $-1, R13
	BZHIQ R12, R13, R13
	KMOVW R13, K4
	VMOVUPS Z28, K4, (DI)(R11*4)
	ADDQ $16, R11
	JMP  prEZero
prEDone:
	ADDQ R8, SI
	ADDQ R8, DI
	INCQ R15
	JMP  prRow

prDone:
	VZEROUPPER
	RET

// func attnDSAVX512(ds, p, dp *float32, ld, rows, cols int, di *float32)
//
// ds[r, j] = p[r, j]·(dp[r, j] - di[r]) over a block (ds may be dp).
TEXT ·attnDSAVX512(SB), NOSPLIT, $0-56
	MOVQ ds+0(FP), DI
	MOVQ p+8(FP), SI
	MOVQ dp+16(FP), DX
	MOVQ ld+24(FP), R8
	SHLQ $2, R8
	MOVQ rows+32(FP), R9
	MOVQ cols+40(FP), R10
	MOVQ di+48(FP), AX
	XORQ R15, R15

dsRow:
	CMPQ R15, R9
	JGE  dsDone
	VBROADCASTSS (AX)(R15*4), Z9
	XORQ R11, R11

dsCol:
	CMPQ R11, R10
	JGE  dsNext
	MOVQ R10, R12
	SUBQ R11, R12
	MOVQ $-1, R13
	BZHIQ R12, R13, R13
	KMOVW R13, K4
	VMOVUPS.Z (DX)(R11*4), K4, Z0
	VSUBPS Z9, Z0, Z0
	VMULPS.Z (SI)(R11*4), Z0, K4, Z0
	VMOVUPS Z0, K4, (DI)(R11*4)
	ADDQ $16, R11
	JMP  dsCol

dsNext:
	ADDQ R8, SI
	ADDQ R8, DI
	ADDQ R8, DX
	INCQ R15
	JMP  dsRow

dsDone:
	VZEROUPPER
	RET

// func lnRowAVX512(y, h, x, w, b *float32, n int, m, is float32)
//
// One row of LayerNorm: h = (x - m)·is, stored when h is not nil, and
// y = h·w + b, or without b when it is nil, in the Go loop's operations
// and order (layerNormRow), unfused.
TEXT ·lnRowAVX512(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ h+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ w+24(FP), DX
	MOVQ b+32(FP), BX
	MOVQ n+40(FP), CX
	VBROADCASTSS m+48(FP), Z8
	VBROADCASTSS is+52(FP), Z9
	TAILMASK
	XORQ R11, R11
	TESTQ CX, CX
	JZ   lnTail

lnStep:
	VMOVUPS (SI)(R11*4), Z0
	VSUBPS Z8, Z0, Z0
	VMULPS Z9, Z0, Z0
	TESTQ R8, R8
	JZ   2(PC)
	VMOVUPS Z0, (R8)(R11*4)
	VMULPS (DX)(R11*4), Z0, Z0
	TESTQ BX, BX
	JZ   2(PC)
	VADDPS (BX)(R11*4), Z0, Z0
	VMOVUPS Z0, (DI)(R11*4)
	ADDQ $16, R11
	DECQ CX
	JNZ  lnStep

lnTail:
	VMOVUPS.Z (SI)(R11*4), K1, Z0
	VMOVUPS.Z (DX)(R11*4), K1, Z1
	VSUBPS Z8, Z0, Z0
	VMULPS Z9, Z0, Z0
	TESTQ R8, R8
	JZ   2(PC)
	VMOVUPS Z0, K1, (R8)(R11*4)
	VMULPS Z1, Z0, Z0
	TESTQ BX, BX
	JZ   3(PC)
	VMOVUPS.Z (BX)(R11*4), K1, Z1
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)(R11*4)
	VZEROUPPER
	RET

// LNGRAD1 adds one chunk's terms, hat in Z0, dy in Z1, w in Z2, masked by
// mask: g = dy·w; Z10 += g, Z11 += g·hat, pw += dy·hat, pb += dy (pb when
// BX is not nil).
#define LNGRAD1(mask) \
	VMULPS Z2, Z1, Z3; \
	VADDPS Z3, Z10, Z10; \
	VMULPS Z0, Z3, Z3; \
	VADDPS Z3, Z11, Z11; \
	VMULPS Z0, Z1, Z3; \
	VMOVUPS.Z (AX)(R11*4), mask, Z4; \
	VADDPS Z3, Z4, Z4; \
	VMOVUPS Z4, mask, (AX)(R11*4); \
	TESTQ BX, BX; \
	JZ   4(PC); \
	VMOVUPS.Z (BX)(R11*4), mask, Z4; \
	VADDPS Z1, Z4, Z4; \
	VMOVUPS Z4, mask, (BX)(R11*4)

// LNGRAD2 computes one chunk of dx into Z0 from hat in Z0, dy in Z1 and w
// in Z2: is·((dy·w - mg) - hat·mgh), mg in Z12 and mgh in Z13.
#define LNGRAD2 \
	VMULPS Z2, Z1, Z3; \
	VSUBPS Z12, Z3, Z3; \
	VMULPS Z13, Z0, Z0; \
	VSUBPS Z0, Z3, Z3; \
	VMULPS Z3, Z9, Z0

// func lnGradRowAVX512(dx, dy, h, w *float32, n int, is float32, pw, pb *float32)
//
// One row of LayerNormGrad from the forward pass's hat = (x - m)·is, in
// the Go loop's operations and order (layerNormGradRow): the row's sums of
// g = dy·w and g·hat in sixteen lanes added as HSUM16 does, pw += dy·hat
// and pb += dy (pb may be nil), then dx.
TEXT ·lnGradRowAVX512(SB), NOSPLIT, $0-64
	MOVQ dx+0(FP), DI
	MOVQ dy+8(FP), DX
	MOVQ h+16(FP), SI
	MOVQ w+24(FP), R9
	MOVQ n+32(FP), CX
	VBROADCASTSS is+40(FP), Z9
	MOVQ pw+48(FP), AX
	MOVQ pb+56(FP), BX
	MOVQ CX, R14
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	TAILMASK
	MOVQ CX, R15
	XORQ R11, R11
	TESTQ CX, CX
	JZ   lg1Tail

lg1Step:
	VMOVUPS (SI)(R11*4), Z0
	VMOVUPS (DX)(R11*4), Z1
	VMOVUPS (R9)(R11*4), Z2
	KXNORW K5, K5, K5
	LNGRAD1(K5)
	ADDQ $16, R11
	DECQ CX
	JNZ  lg1Step

lg1Tail:
	VMOVUPS.Z (SI)(R11*4), K1, Z0
	VMOVUPS.Z (DX)(R11*4), K1, Z1
	VMOVUPS.Z (R9)(R11*4), K1, Z2
	LNGRAD1(K1)
	// mg = sum(g)/n, mgh = sum(g·hat)/n (HSUM16 clobbers Z11: keep it)
	VMOVAPS Z11, Z15
	HSUM16
	VCVTSI2SSQ R14, X14, X14
	VDIVSS X14, X10, X10
	VBROADCASTSS X10, Z12
	VMOVAPS Z15, Z10
	HSUM16
	VDIVSS X14, X10, X10
	VBROADCASTSS X10, Z13
	MOVQ R15, CX
	XORQ R11, R11
	TESTQ CX, CX
	JZ   lg2Tail

lg2Step:
	VMOVUPS (SI)(R11*4), Z0
	VMOVUPS (DX)(R11*4), Z1
	VMOVUPS (R9)(R11*4), Z2
	LNGRAD2
	VMOVUPS Z0, (DI)(R11*4)
	ADDQ $16, R11
	DECQ CX
	JNZ  lg2Step

lg2Tail:
	VMOVUPS.Z (SI)(R11*4), K1, Z0
	VMOVUPS.Z (DX)(R11*4), K1, Z1
	VMOVUPS.Z (R9)(R11*4), K1, Z2
	LNGRAD2
	VMOVUPS Z0, K1, (DI)(R11*4)
	VZEROUPPER
	RET

// BF16 conversions: widening is exact (the pattern in the high half);
// rounding is to nearest even, a NaN quieted, as dtype.F32ToBF16.
DATA bc<>+0(SB)/4, $1
DATA bc<>+4(SB)/4, $0x7fff
DATA bc<>+8(SB)/4, $0x40
DATA bc<>+12(SB)/4, $0x7fffffff
DATA bc<>+16(SB)/4, $0x7f800000
GLOBL bc<>(SB), RODATA|NOPTR, $20

// BF16RND rounds the float32 lanes of x to bfloat16 patterns in the low
// halves of x's lanes (t1, t2 and K3 clobbered).
#define BF16RND(x, t1, t2) \
	VPSRLD $16, x, t1; \
	VPANDD.BCST bc<>+0(SB), t1, t2; \
	VPADDD t2, x, t2; \
	VPADDD.BCST bc<>+4(SB), t2, t2; \
	VPSRLD $16, t2, t2; \
	VPORD.BCST bc<>+8(SB), t1, t1; \
	VPANDD.BCST bc<>+12(SB), x, x; \
	VPCMPUD.BCST $6, bc<>+16(SB), x, K3; \
	VMOVDQU32 t1, K3, t2; \
	VMOVDQA32 t2, x

// func geluBF16AVX512(dst, src *uint16, n int)
// geluAVX512 on bfloat16 storage: widened as loaded, rounded as stored.
TEXT ·geluBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	EXPCONSTS
	VPXORD Z28, Z28, Z28
	VBROADCASTSS tc<>+56(SB), Z29
	TAILMASK
	TESTQ CX, CX
	JZ   gbTail

gbStep:
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	ERFC
	VMULPS Z0, Z1, Z1
	VMULPS.BCST tc<>+32(SB), Z1, Z1
	BF16RND(Z1, Z5, Z6)
	VPMOVDW Z1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  gbStep

gbTail:
	VPMOVZXWD.Z (SI), K1, Z0
	VPSLLD $16, Z0, Z0
	ERFC
	VMULPS Z0, Z1, Z1
	VMULPS.BCST tc<>+32(SB), Z1, Z1
	BF16RND(Z1, Z5, Z6)
	VPMOVDW Z1, K1, (DI)
	VZEROUPPER
	RET

// func geluGradBF16AVX512(dst, dy, x *uint16, n int)
// geluGradAVX512 on bfloat16 storage.
TEXT ·geluGradBF16AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ dy+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	EXPCONSTS
	VPXORD Z28, Z28, Z28
	VBROADCASTSS tc<>+56(SB), Z29
	TAILMASK
	TESTQ CX, CX
	JZ   ggbTail

ggbStep:
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VPMOVZXWD (DX), Z8
	VPSLLD $16, Z8, Z8
	GELUGRAD
	BF16RND(Z1, Z5, Z6)
	VPMOVDW Z1, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  ggbStep

ggbTail:
	VPMOVZXWD.Z (SI), K1, Z0
	VPSLLD $16, Z0, Z0
	VPMOVZXWD.Z (DX), K1, Z8
	VPSLLD $16, Z8, Z8
	GELUGRAD
	BF16RND(Z1, Z5, Z6)
	VPMOVDW Z1, K1, (DI)
	VZEROUPPER
	RET
