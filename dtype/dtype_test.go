package dtype

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// f32 builds a float32 from its bits, to keep the edge-case tables exact.
func f32(b uint32) float32 { return math.Float32frombits(b) }

// isNaN16 reports whether h is a NaN in a format with the given exponent mask
// (0x7c00 for binary16, 0x7f80 for bfloat16).
func isNaN16(h, expMask uint16) bool {
	return h&expMask == expMask && h&^(0x8000|expMask) != 0
}

// testPatterns returns n float32 bit patterns from a fixed seed, preceded by a
// structured set that random bits would rarely hit: every sign and exponent
// with mantissas at and around a rounding tie for every possible tie position
// (the position moves through the subnormal range of either 16-bit type), and
// every special class (zeros, subnormals, infinities, quiet and signalling NaNs).
func testPatterns(n int) []uint32 {
	r := rand.New(rand.NewPCG(1, 2))
	var p []uint32
	for sign := uint32(0); sign < 2; sign++ {
		for exp := uint32(0); exp < 256; exp++ {
			hi := sign<<31 | exp<<23
			p = append(p, hi, hi|0x7fffff, hi|1, hi|0x400000)
			for k := uint(0); k < 23; k++ {
				tie := uint32(1) << k
				for _, low := range []uint32{tie - 1, tie, tie + 1} {
					above := r.Uint32() &^ (tie<<1 - 1) & 0x7fffff
					p = append(p, hi|above|low, hi|low)
				}
			}
			for range 64 {
				p = append(p, hi|r.Uint32()&0x7fffff)
			}
		}
	}
	for range n {
		p = append(p, r.Uint32())
	}
	return p
}

// refRound rounds f to a binary format with prec significand bits (including
// the implicit one), smallest subnormal 2^minExp and largest finite value max,
// ties to even, overflowing to infinity. It works in float64 with Frexp and
// RoundToEven, sharing nothing with the bit manipulation under test. f must
// not be NaN.
func refRound(f float32, prec, minExp int, max float64) float64 {
	x := float64(f)
	if x == 0 || math.IsInf(x, 0) {
		return x
	}
	_, exp := math.Frexp(x) // |x| in [2^(exp-1), 2^exp)
	q := exp - prec         // exponent of the last significand bit
	if q < minExp {
		q = minExp
	}
	// x/2^q has at most 24 significant bits, so the scaling and RoundToEven
	// are exact in float64.
	y := math.Ldexp(math.RoundToEven(math.Ldexp(x, -q)), q)
	if math.Abs(y) > max {
		return math.Copysign(math.Inf(1), x)
	}
	return y
}

// refF16 is the float64 reference for F32ToF16 on non-NaN inputs.
func refF16(f float32) float64 { return refRound(f, 11, -24, 65504) }

// refBF16 is the float64 reference for F32ToBF16 on non-NaN inputs.
func refBF16(f float32) float64 {
	return refRound(f, 8, -133, float64(f32(0x7f7f0000)))
}

func TestF16ToF32AllPatterns(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := math.Float32bits(F16ToF32(h))
		// Compared bit for bit even for NaNs: both implementations return a
		// quiet NaN with the sign and the 10 payload bits in the top of the
		// binary32 mantissa (a signalling NaN gets the quiet bit set).
		want := math.Float32bits(float16.Frombits(h).Float32())
		if got != want {
			t.Errorf("F16ToF32(%#04x) = %#08x, want %#08x (x448/float16)", h, got, want)
		}
	}
}

func TestBF16ToF32AllPatterns(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToF32(h)
		if got, want := math.Float32bits(f), uint32(h)<<16; got != want {
			t.Errorf("BF16ToF32(%#04x) bits = %#08x, want %#08x", h, got, want)
		}
		// The value, from the format's definition rather than its bits.
		sign, exp, man := h>>15, int(h>>7&0xff), float64(h&0x7f)
		var want float64
		switch {
		case exp == 0xff && man != 0:
			if !math.IsNaN(float64(f)) || math.Signbit(float64(f)) != (sign == 1) {
				t.Errorf("BF16ToF32(%#04x) = %v, want NaN with sign %d", h, f, sign)
			}
			continue
		case exp == 0xff:
			want = math.Inf(1)
		case exp == 0:
			want = math.Ldexp(man, -133)
		default:
			want = math.Ldexp(1+man/128, exp-127)
		}
		if sign == 1 {
			want = -want
		}
		if float64(f) != want {
			t.Errorf("BF16ToF32(%#04x) = %v, want %v", h, f, want)
		}
	}
}

// TestRoundTripAllPatterns widens every 16-bit pattern and rounds it back:
// each comes back unchanged, but a NaN comes back quiet.
func TestRoundTripAllPatterns(t *testing.T) {
	for _, tt := range []struct {
		d       DType
		expMask uint16 // the exponent's bits: a NaN has all set and a mantissa
		quiet   uint16 // the mantissa's top bit, set in a quiet NaN
		encode  func(float32) uint16
		decode  func(uint16) float32
	}{
		{F16, 0x7c00, 0x0200, F32ToF16, F16ToF32},
		{BF16, 0x7f80, 0x0040, F32ToBF16, BF16ToF32},
	} {
		t.Run(tt.d.String(), func(t *testing.T) {
			for i := 0; i < 1<<16; i++ {
				h := uint16(i)
				got := tt.encode(tt.decode(h))
				want := h
				if isNaN16(h, tt.expMask) {
					want = h | tt.quiet // quieted, sign and payload kept
				}
				if got != want {
					t.Errorf("%v: encode(decode(%#04x)) = %#04x, want %#04x", tt.d, h, got, want)
				}
			}
		})
	}
}

// failures reports a test's errors and ends it after the twentieth, so
// that a rounding broken over millions of patterns prints a page.
type failures struct {
	t *testing.T
	n int
}

func (f *failures) Errorf(format string, args ...any) {
	f.t.Helper()
	f.t.Errorf(format, args...)
	if f.n++; f.n > 20 {
		f.t.Fatal("too many failures")
	}
}

func TestF32ToF16Patterns(t *testing.T) {
	bad := &failures{t: t}
	for _, b := range testPatterns(2_000_000) {
		f := f32(b)
		got := F32ToF16(f)
		if want := float16.Fromfloat32(f).Bits(); got != want {
			bad.Errorf("F32ToF16(%#08x) = %#04x, want %#04x (x448/float16)", b, got, want)
		}
		if math.IsNaN(float64(f)) {
			if !isNaN16(got, 0x7c00) || got>>15 != uint16(b>>31) {
				bad.Errorf("F32ToF16(%#08x) = %#04x, want a NaN of the same sign", b, got)
			}
		} else if g, w := float64(F16ToF32(got)), refF16(f); g != w || math.Signbit(g) != math.Signbit(w) {
			bad.Errorf("F32ToF16(%#08x) = %#04x (%v), want %v (float64 reference)", b, got, g, w)
		}
	}
}

func TestF32ToBF16Patterns(t *testing.T) {
	bad := &failures{t: t}
	for _, b := range testPatterns(2_000_000) {
		f := f32(b)
		got := F32ToBF16(f)
		if math.IsNaN(float64(f)) {
			// A NaN keeps its top 16 bits and is quieted; nothing to round.
			if want := uint16(b>>16) | 0x40; got != want {
				bad.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", b, got, want)
			}
		} else if g, w := float64(BF16ToF32(got)), refBF16(f); g != w || math.Signbit(g) != math.Signbit(w) {
			bad.Errorf("F32ToBF16(%#08x) = %#04x (%v), want %v (float64 reference)", b, got, g, w)
		}
	}
}

// TestEncodeEdges rounds the cases that decide a rounding's correctness,
// as TestDecodeEdges widens them.
func TestEncodeEdges(t *testing.T) {
	tests := []struct {
		name string
		d    DType
		in   float32
		want uint16
	}{
		{"f16 one", F16, 1, 0x3c00},
		{"f16 tie 1+2^-11 to even below", F16, 1 + 0x1p-11, 0x3c00},
		{"f16 tie 1+3*2^-11 to even above", F16, 1 + 3*0x1p-11, 0x3c02},
		{"f16 just above tie rounds up", F16, f32(0x3f801001), 0x3c01},
		{"f16 just below tie rounds down", F16, f32(0x3f801fff), 0x3c01},
		{"f16 just below even tie", F16, f32(0x3f800fff), 0x3c00},
		{"f16 negative tie to even below", F16, -(1 + 0x1p-11), 0xbc00},
		{"f16 negative tie to even above", F16, -(1 + 3*0x1p-11), 0xbc02},
		{"f16 max finite", F16, 65504, 0x7bff},
		{"f16 just below 65520", F16, math.Nextafter32(65520, 0), 0x7bff},
		{"f16 65520 ties to Inf", F16, 65520, 0x7c00},
		{"f16 -65520 ties to -Inf", F16, -65520, 0xfc00},
		{"f16 huge", F16, 1e10, 0x7c00},
		{"f16 max float32", F16, math.MaxFloat32, 0x7c00},
		{"f16 smallest normal", F16, 0x1p-14, 0x0400},
		{"f16 largest subnormal", F16, 1023 * 0x1p-24, 0x03ff},
		{"f16 largest subnormal + half ulp ties up to normal", F16, 1023.5 * 0x1p-24, 0x0400},
		{"f16 smallest subnormal", F16, 0x1p-24, 0x0001},
		{"f16 -smallest subnormal", F16, -0x1p-24, 0x8001},
		{"f16 half smallest subnormal ties to 0", F16, 0x1p-25, 0x0000},
		{"f16 -half smallest subnormal ties to -0", F16, -0x1p-25, 0x8000},
		{"f16 just above half smallest subnormal", F16, math.Nextafter32(0x1p-25, 1), 0x0001},
		{"f16 1.5 smallest subnormal ties to 2", F16, 3 * 0x1p-25, 0x0002},
		{"f16 2.5 smallest subnormal ties to 2", F16, 5 * 0x1p-25, 0x0002},
		{"f16 quarter smallest subnormal", F16, 0x1p-26, 0x0000},
		{"f16 float32 subnormal", F16, f32(0x00000001), 0x0000},
		{"f16 -float32 subnormal", F16, f32(0x80000001), 0x8000},
		{"f16 zero", F16, 0, 0x0000},
		{"f16 negative zero", F16, f32(0x80000000), 0x8000},
		{"f16 Inf", F16, float32(math.Inf(1)), 0x7c00},
		{"f16 -Inf", F16, float32(math.Inf(-1)), 0xfc00},
		{"f16 quiet NaN", F16, f32(0x7fc00000), 0x7e00},
		{"f16 -quiet NaN", F16, f32(0xffc00000), 0xfe00},
		{"f16 NaN payload kept", F16, f32(0x7fc02000), 0x7e01},
		{"f16 signalling NaN quieted", F16, f32(0x7fa00000), 0x7f00},
		{"f16 signalling NaN, payload below binary16", F16, f32(0x7f800001), 0x7e00},
		{"bf16 one", BF16, f32(0x3f800000), 0x3f80},
		{"bf16 tie to even below", BF16, f32(0x3f808000), 0x3f80},
		{"bf16 tie to even above", BF16, f32(0x3f818000), 0x3f82},
		{"bf16 just above tie rounds up", BF16, f32(0x3f808001), 0x3f81},
		{"bf16 just below tie rounds down", BF16, f32(0x3f817fff), 0x3f81},
		{"bf16 just below even tie", BF16, f32(0x3f807fff), 0x3f80},
		{"bf16 negative tie to even below", BF16, f32(0xbf808000), 0xbf80},
		{"bf16 negative tie to even above", BF16, f32(0xbf818000), 0xbf82},
		{"bf16 carry into exponent", BF16, f32(0x3fffffff), 0x4000},
		{"bf16 max finite", BF16, f32(0x7f7f0000), 0x7f7f},
		{"bf16 just below max finite + half ulp", BF16, f32(0x7f7f7fff), 0x7f7f},
		{"bf16 max finite + half ulp ties to Inf", BF16, f32(0x7f7f8000), 0x7f80},
		{"bf16 max float32 overflows", BF16, f32(0x7f7fffff), 0x7f80},
		{"bf16 -max float32 overflows", BF16, f32(0xff7fffff), 0xff80},
		{"bf16 smallest normal", BF16, f32(0x00800000), 0x0080},
		{"bf16 largest subnormal", BF16, f32(0x007f0000), 0x007f},
		{"bf16 top of float32 subnormals rounds to normal", BF16, f32(0x007fffff), 0x0080},
		{"bf16 smallest subnormal", BF16, f32(0x00010000), 0x0001},
		{"bf16 -smallest subnormal", BF16, f32(0x80010000), 0x8001},
		{"bf16 half smallest subnormal ties to 0", BF16, f32(0x00008000), 0x0000},
		{"bf16 -half smallest subnormal ties to -0", BF16, f32(0x80008000), 0x8000},
		{"bf16 just above half smallest subnormal", BF16, f32(0x00008001), 0x0001},
		{"bf16 1.5 smallest subnormal ties to 2", BF16, f32(0x00018000), 0x0002},
		{"bf16 smallest float32 subnormal", BF16, f32(0x00000001), 0x0000},
		{"bf16 zero", BF16, f32(0x00000000), 0x0000},
		{"bf16 negative zero", BF16, f32(0x80000000), 0x8000},
		{"bf16 Inf", BF16, f32(0x7f800000), 0x7f80},
		{"bf16 -Inf", BF16, f32(0xff800000), 0xff80},
		{"bf16 quiet NaN", BF16, f32(0x7fc00000), 0x7fc0},
		{"bf16 -quiet NaN", BF16, f32(0xffc00000), 0xffc0},
		{"bf16 NaN payload kept", BF16, f32(0x7fc10000), 0x7fc1},
		{"bf16 NaN not rounded to Inf", BF16, f32(0x7fffffff), 0x7fff},
		{"bf16 signalling NaN quieted", BF16, f32(0x7f810000), 0x7fc1},
		{"bf16 signalling NaN, payload below bfloat16", BF16, f32(0xff800001), 0xffc0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encode := F32ToF16
			if tt.d == BF16 {
				encode = F32ToBF16
			}
			if got := encode(tt.in); got != tt.want {
				t.Errorf("%v encode %v (%#08x) = %#04x, want %#04x", tt.d, tt.in, math.Float32bits(tt.in), got, tt.want)
			}
		})
	}
}

func TestDecodeEdges(t *testing.T) {
	tests := []struct {
		name string
		d    DType
		in   uint16
		want uint32 // float32 bits
	}{
		{"f16 one", F16, 0x3c00, 0x3f800000},
		{"f16 max finite", F16, 0x7bff, math.Float32bits(65504)},
		{"f16 smallest normal", F16, 0x0400, math.Float32bits(0x1p-14)},
		{"f16 largest subnormal", F16, 0x03ff, math.Float32bits(1023 * 0x1p-24)},
		{"f16 smallest subnormal", F16, 0x0001, math.Float32bits(0x1p-24)},
		{"f16 -smallest subnormal", F16, 0x8001, math.Float32bits(-0x1p-24)},
		{"f16 negative zero", F16, 0x8000, 0x80000000},
		{"f16 Inf", F16, 0x7c00, 0x7f800000},
		{"f16 -Inf", F16, 0xfc00, 0xff800000},
		{"f16 quiet NaN", F16, 0x7e00, 0x7fc00000},
		{"f16 NaN payload", F16, 0xfe01, 0xffc02000},
		{"f16 signalling NaN quieted", F16, 0x7c01, 0x7fc02000},
		{"bf16 one", BF16, 0x3f80, 0x3f800000},
		{"bf16 max finite", BF16, 0x7f7f, 0x7f7f0000},
		{"bf16 smallest normal", BF16, 0x0080, 0x00800000},
		{"bf16 largest subnormal", BF16, 0x007f, 0x007f0000},
		{"bf16 smallest subnormal", BF16, 0x0001, 0x00010000},
		{"bf16 negative zero", BF16, 0x8000, 0x80000000},
		{"bf16 Inf", BF16, 0x7f80, 0x7f800000},
		{"bf16 -Inf", BF16, 0xff80, 0xff800000},
		{"bf16 quiet NaN", BF16, 0x7fc0, 0x7fc00000},
		// Decoding bfloat16 is a shift, so a signalling NaN stays signalling.
		{"bf16 signalling NaN", BF16, 0x7f81, 0x7f810000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f float32
			if tt.d == F16 {
				f = F16ToF32(tt.in)
			} else {
				f = BF16ToF32(tt.in)
			}
			if got := math.Float32bits(f); got != tt.want {
				t.Errorf("%v decode %#04x = %#08x, want %#08x", tt.d, tt.in, got, tt.want)
			}
		})
	}
}

func TestRound(t *testing.T) {
	tests := []struct {
		d        DType
		in, want float32
	}{
		{F32, 0.1, 0.1},
		{F32, math.MaxFloat32, math.MaxFloat32},
		{F16, 0.1, 0.0999755859375},
		{F16, 1 + 0x1p-11, 1},
		{F16, 1 + 3*0x1p-11, 1 + 0x1p-9},
		{F16, 65519, 65504},
		{F16, 65520, float32(math.Inf(1))},
		{F16, -65520, float32(math.Inf(-1))},
		{F16, 0x1p-25, 0},
		{F16, 0x1p-24, 0x1p-24},
		{BF16, 0.1, 0.10009765625},
		{BF16, 1 + 0x1p-8, 1},
		{BF16, 1 + 3*0x1p-8, 1 + 0x1p-6},
		{BF16, 65519, 65536},
		{BF16, math.MaxFloat32, float32(math.Inf(1))},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			if got := Round(tt.d, tt.in); got != tt.want {
				t.Errorf("Round(%v, %v) = %v, want %v", tt.d, tt.in, got, tt.want)
			}
		})
	}
	t.Run("NaN", func(t *testing.T) {
		for _, d := range All {
			if got := Round(d, float32(math.NaN())); !math.IsNaN(float64(got)) {
				t.Errorf("Round(%v, NaN) = %v, want NaN", d, got)
			}
		}
	})
}

func TestMaxFinite(t *testing.T) {
	tests := []struct {
		d    DType
		want float32
		bits uint16 // the largest finite 16-bit pattern; unused for F32
	}{
		{F32, math.MaxFloat32, 0},
		{F16, 65504, 0x7bff},
		{BF16, 0x1.fep127, 0x7f7f},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			m := tt.d.MaxFinite()
			if m != tt.want {
				t.Fatalf("%v.MaxFinite() = %v, want %v", tt.d, m, tt.want)
			}
			if got := Round(tt.d, m); got != m {
				t.Errorf("Round(%v, MaxFinite) = %v, want %v", tt.d, got, m)
			}
			if !tt.d.Half() {
				return
			}
			// MaxFinite is the largest: the next pattern up is Inf.
			var max, next float32
			if tt.d == F16 {
				max, next = F16ToF32(tt.bits), F16ToF32(tt.bits+1)
			} else {
				max, next = BF16ToF32(tt.bits), BF16ToF32(tt.bits+1)
			}
			if max != m || !math.IsInf(float64(next), 1) {
				t.Errorf("%v: pattern %#04x = %v, next = %v; want %v then +Inf", tt.d, tt.bits, max, next, m)
			}
		})
	}
}

func TestSizeAndHalf(t *testing.T) {
	tests := []struct {
		d    DType
		size int
		half bool
	}{
		{F32, 4, false},
		{F16, 2, true},
		{BF16, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			if got := tt.d.Size(); got != tt.size {
				t.Errorf("%v.Size() = %d, want %d", tt.d, got, tt.size)
			}
			if got := tt.d.Half(); got != tt.half {
				t.Errorf("%v.Half() = %v, want %v", tt.d, got, tt.half)
			}
		})
	}
	t.Run("unknown", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Errorf("DType(7).Size() did not panic")
			}
		}()
		DType(7).Size()
	})
}

func TestParseString(t *testing.T) {
	for _, d := range All {
		t.Run(d.String(), func(t *testing.T) {
			got, err := Parse(d.String())
			if err != nil || got != d {
				t.Errorf("Parse(%q) = %v, %v; want %v, nil", d.String(), got, err, d)
			}
		})
	}
	aliases := []struct {
		in   string
		want DType
	}{
		{"float32", F32}, {"FP32", F32}, {"F32", F32},
		{"float16", F16}, {"half", F16}, {"Fp16", F16},
		{"bfloat16", BF16}, {"BF16", BF16},
	}
	for _, tt := range aliases {
		t.Run(tt.in, func(t *testing.T) {
			if got, err := Parse(tt.in); err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
			}
		})
	}
	for _, in := range []string{"", "f64", "int8", "bf32"} {
		t.Run("bad "+in, func(t *testing.T) {
			if _, err := Parse(in); err == nil {
				t.Errorf("Parse(%q) error = nil, want an error", in)
			}
		})
	}
	if got, want := DType(9).String(), "DType(9)"; got != want {
		t.Errorf("DType(9).String() = %q, want %q", got, want)
	}
}

func TestWidest(t *testing.T) {
	tests := []struct{ a, b, want DType }{
		{F32, F32, F32},
		{F16, F16, F16},
		{BF16, BF16, BF16},
		{F16, BF16, F32},
		{BF16, F16, F32},
		{F16, F32, F32},
		{F32, BF16, F32},
	}
	for _, tt := range tests {
		t.Run(tt.a.String()+"_"+tt.b.String(), func(t *testing.T) {
			if got := Widest(tt.a, tt.b); got != tt.want {
				t.Errorf("Widest(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}
