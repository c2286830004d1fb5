// Package dtype defines the element types mixprec stores tensors in (F32, F16,
// BF16) and the round-to-nearest-even conversions between them.
//
// Arithmetic never happens in 16 bits: kernels widen to float32, compute and
// accumulate there, and round once on store. This package is the single place
// that rounding is defined.
package dtype

import (
	"fmt"
	"math"
	"strings"
)

// DType is the storage type of a tensor's elements.
type DType uint8

const (
	// F32 is IEEE 754 binary32.
	F32 DType = iota
	// F16 is IEEE 754 binary16: 5 exponent bits, 10 mantissa bits, max 65504.
	F16
	// BF16 is bfloat16: the top 16 bits of a binary32 (8 exponent bits, 7 mantissa bits).
	BF16
)

// All lists every DType, in declaration order.
var All = []DType{F32, F16, BF16}

// Size is the number of bytes one element occupies.
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case F16, BF16:
		return 2
	}
	panic(fmt.Sprintf("dtype: unknown DType %d", uint8(d)))
}

// String returns the short lower-case name: "f32", "f16" or "bf16".
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Half reports whether d is stored in 16 bits.
func (d DType) Half() bool { return d == F16 || d == BF16 }

// Parse turns "f32", "f16" or "bf16" (also "float32", "float16", "bfloat16",
// any case) into a DType.
func Parse(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "f32", "fp32", "float32":
		return F32, nil
	case "f16", "fp16", "float16", "half":
		return F16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	}
	return 0, fmt.Errorf("dtype: unknown type %q (want f32, f16 or bf16)", s)
}

// Widest returns the type both a and b convert to without loss: the same type
// when they agree, else F32 (F16 and BF16 each hold values the other cannot).
func Widest(a, b DType) DType {
	if a == b {
		return a
	}
	return F32
}

// MaxFinite is the largest finite value d can hold.
func (d DType) MaxFinite() float32 {
	switch d {
	case F16:
		return 65504
	case BF16:
		return math.Float32frombits(0x7f7f0000)
	}
	return math.MaxFloat32
}

// Round returns f rounded to the nearest value representable in d (ties to
// even), as a float32. Round(F32, f) is f.
func Round(d DType, f float32) float32 {
	switch d {
	case F16:
		return F16ToF32(F32ToF16(f))
	case BF16:
		return BF16ToF32(F32ToBF16(f))
	}
	return f
}

// F32ToF16 converts f to binary16 bits, rounding to nearest even. Values too
// large overflow to infinity, values too small become signed zero or a correctly
// rounded subnormal, and NaNs stay NaN (quieted, with the top payload bits kept).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man == 0 {
			return sign | 0x7c00
		}
		return sign | 0x7e00 | uint16(man>>13)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		rem := man & (half<<1 - 1)
		r := man >> shift
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	// Normal: add just under half a binary16 ulp, plus one when the kept lsb
	// is odd, and truncate. This is round-to-nearest-even without a
	// data-dependent branch (a mispredicted one cost ~10x in the slice loop);
	// a carry into the exponent is right, up to and including Inf.
	r := uint32(e)<<23 | man
	r += 0xfff + r>>13&1
	return sign | uint16(r>>13)
}

// F16ToF32 converts binary16 bits to float32 exactly. A NaN comes back quiet
// with its payload kept in the top mantissa bits.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		if man != 0 {
			// Quiet a signalling NaN, as an IEEE 754 conversion must, so this
			// agrees bit for bit with VCVTPH2PS (the amd64 slice path) and
			// with x448/float16.
			man |= 0x200
		}
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: normalise the mantissa.
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// F32ToBF16 converts f to bfloat16 bits, rounding to nearest even; NaNs stay
// NaN (quieted).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// BF16ToF32 converts bfloat16 bits to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
