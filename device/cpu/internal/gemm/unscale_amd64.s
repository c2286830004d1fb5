//go:build !purego

#include "textflag.h"

// Unscale's loops (unscale.go), sixteen float32 lanes at a time in AVX-512
// and eight in AVX2. n is a multiple of the lane count; the caller does the
// tail.

// func UnscaleAVX512(s *float32, n int, inv float32) (nonFinite bool)
// s = s*inv; reports whether any product is Inf or NaN. x-x is +0 for
// every finite x and NaN otherwise, so OR-ing the differences together
// leaves a non-zero lane exactly when some element was not finite.
TEXT ·UnscaleAVX512(SB), NOSPLIT, $0-25
	MOVQ s+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS inv+16(FP), Z1
	VPXORD Z2, Z2, Z2
	SHRQ $4, CX
	JZ   unsDone

unsLoop:
	VMOVUPS (DI), Z3
	VMULPS  Z1, Z3, Z3
	VMOVUPS Z3, (DI)
	VSUBPS  Z3, Z3, Z4
	VPORD   Z4, Z2, Z2
	ADDQ    $64, DI
	DECQ    CX
	JNZ     unsLoop

unsDone:
	VPTESTMD Z2, Z2, K1
	KMOVW    K1, AX
	TESTL    AX, AX
	SETNE    nonFinite+24(FP)
	VZEROUPPER
	RET

// func UnscaleAVX2(s *float32, n int, inv float32) (nonFinite bool)
// UnscaleAVX512 in eight lanes; VPTEST sets ZF when no bit of the OR-ed
// differences is set.
TEXT ·UnscaleAVX2(SB), NOSPLIT, $0-25
	MOVQ s+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS inv+16(FP), Y1
	VPXOR Y2, Y2, Y2
	SHRQ $3, CX
	JZ   uns2Done

uns2Loop:
	VMOVUPS (DI), Y3
	VMULPS  Y1, Y3, Y3
	VMOVUPS Y3, (DI)
	VSUBPS  Y3, Y3, Y4
	VPOR    Y4, Y2, Y2
	ADDQ    $32, DI
	DECQ    CX
	JNZ     uns2Loop

uns2Done:
	VPTEST Y2, Y2
	SETNE  nonFinite+24(FP)
	VZEROUPPER
	RET
