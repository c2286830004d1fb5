package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
)

// all16 returns every 16-bit pattern once.
func all16() []uint16 {
	s := make([]uint16, 1<<16)
	for i := range s {
		s[i] = uint16(i)
	}
	return s
}

// floats turns bit patterns into float32s.
func floats(bits []uint32) []float32 {
	s := make([]float32, len(bits))
	for i, b := range bits {
		s[i] = math.Float32frombits(b)
	}
	return s
}

// firstDiff32 returns the first index where got and want differ bitwise, or -1.
func firstDiff32(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

// firstDiff16 returns the first index where got and want differ, or -1.
func firstDiff16(got, want []uint16) int {
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

// encoders and decoders name the converters of c by dtype so one loop covers both.
func encoders(c converters) map[DType]func([]uint16, []float32) {
	return map[DType]func([]uint16, []float32){F16: c.encodeF16, BF16: c.encodeBF16}
}

// decoders is the decoding half of encoders.
func decoders(c converters) map[DType]func([]float32, []uint16) {
	return map[DType]func([]float32, []uint16){F16: c.decodeF16, BF16: c.decodeBF16}
}

// fastConverters is every entry of available but the generic reference the
// tests compare them with.
func fastConverters() []converters { return available[1:] }

func TestConvertersDecodeAllPatterns(t *testing.T) {
	src := all16()
	for _, c := range fastConverters() {
		for _, d := range []DType{F16, BF16} {
			t.Run(c.name+"/"+d.String(), func(t *testing.T) {
				want := make([]float32, len(src))
				decoders(genericConverters)[d](want, src)
				got := make([]float32, len(src))
				decoders(c)[d](got, src)
				if i := firstDiff32(got, want); i >= 0 {
					t.Errorf("decode %#04x = %#08x, want %#08x", src[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			})
		}
	}
}

func TestConvertersEncodePatterns(t *testing.T) {
	bits := testPatterns(2_000_000)
	src := floats(bits)
	for _, c := range fastConverters() {
		for _, d := range []DType{F16, BF16} {
			t.Run(c.name+"/"+d.String(), func(t *testing.T) {
				want := make([]uint16, len(src))
				encoders(genericConverters)[d](want, src)
				got := make([]uint16, len(src))
				encoders(c)[d](got, src)
				if i := firstDiff16(got, want); i >= 0 {
					t.Errorf("encode %#08x = %#04x, want %#04x", bits[i], got[i], want[i])
				}
			})
		}
	}
}

// TestConvertersLengthsAndOffsets runs every length that exercises a
// different mix of 16-wide, 8-wide and scalar steps, on sub-slices starting
// at every offset within a vector, and checks nothing outside the destination
// is written.
func TestConvertersLengthsAndOffsets(t *testing.T) {
	const guard = 0xbeef
	// A stride through the structured patterns, so that every short slice
	// mixes signs, exponents and special classes.
	all := testPatterns(0)
	bits := make([]uint32, 1024)
	for i := range bits {
		bits[i] = all[i*7919%len(all)]
	}
	src32 := floats(bits)
	src16 := make([]uint16, len(bits))
	for i, b := range bits {
		src16[i] = uint16(b ^ b>>16) // likewise a mix of every class in both formats
	}
	for _, c := range fastConverters() {
		for _, d := range []DType{F16, BF16} {
			t.Run(c.name+"/"+d.String(), func(t *testing.T) {
				for n := 0; n <= 67; n++ {
					for off := 0; off < 9; off++ {
						s32 := src32[off*97 : off*97+n]
						s16 := src16[off*89 : off*89+n]

						want16 := make([]uint16, n)
						encoders(genericConverters)[d](want16, s32)
						buf16 := make([]uint16, off+n+9)
						for i := range buf16 {
							buf16[i] = guard
						}
						encoders(c)[d](buf16[off:off+n], s32)
						if i := firstDiff16(buf16[off:off+n], want16); i >= 0 {
							t.Errorf("n=%d off=%d: encode %#08x = %#04x, want %#04x", n, off, math.Float32bits(s32[i]), buf16[off+i], want16[i])
						}
						for i, v := range buf16 {
							if (i < off || i >= off+n) && v != guard {
								t.Errorf("n=%d off=%d: encode wrote %#04x at %d, outside the destination", n, off, v, i)
							}
						}

						want32 := make([]float32, n)
						decoders(genericConverters)[d](want32, s16)
						buf32 := make([]float32, off+n+9)
						for i := range buf32 {
							buf32[i] = guard
						}
						decoders(c)[d](buf32[off:off+n], s16)
						if i := firstDiff32(buf32[off:off+n], want32); i >= 0 {
							t.Errorf("n=%d off=%d: decode %#04x = %#08x, want %#08x", n, off, s16[i], math.Float32bits(buf32[off+i]), math.Float32bits(want32[i]))
						}
						for i, v := range buf32 {
							if (i < off || i >= off+n) && v != guard {
								t.Errorf("n=%d off=%d: decode wrote %v at %d, outside the destination", n, off, v, i)
							}
						}
					}
				}
			})
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	src := []float32{0, 1, -2.5, 0.1, 65520, 1e-8, float32(math.Inf(-1))}
	for _, d := range []DType{F16, BF16} {
		t.Run(d.String(), func(t *testing.T) {
			// A longer destination is allowed; only len(src) elements change.
			h := make([]uint16, len(src)+1)
			h[len(src)] = 0xbeef
			Encode(d, h, src)
			got := make([]float32, len(src)+1)
			got[len(src)] = 42
			Decode(d, got, h[:len(src)])
			for i, f := range src {
				if want := Round(d, f); got[i] != want {
					t.Errorf("Decode(Encode(%v)) = %v, want %v", f, got[i], want)
				}
			}
			if h[len(src)] != 0xbeef || got[len(src)] != 42 {
				t.Errorf("wrote past len(src): %#04x, %v", h[len(src)], got[len(src)])
			}
		})
	}
}

func TestEncodeDecodePanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"Encode f32", func() { Encode(F32, make([]uint16, 1), make([]float32, 1)) }},
		{"Decode f32", func() { Decode(F32, make([]float32, 1), make([]uint16, 1)) }},
		{"EncodeF16 short dst", func() { EncodeF16(make([]uint16, 15), make([]float32, 16)) }},
		{"DecodeF16 short dst", func() { DecodeF16(make([]float32, 15), make([]uint16, 16)) }},
		{"EncodeBF16 short dst", func() { EncodeBF16(make([]uint16, 15), make([]float32, 16)) }},
		{"DecodeBF16 short dst", func() { DecodeBF16(make([]float32, 15), make([]uint16, 16)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tt.name)
				}
			}()
			tt.f()
		})
	}
}

// benchN is the benchmark slice length: 1M elements, 4 MiB of float32 and
// 2 MiB of 16-bit data.
const benchN = 1 << 20

// benchData returns benchN values shaped like a tensor's contents (normally
// distributed, a few orders of magnitude either side of 1) rather than random
// bits, which would make the generic code's branches unrealistically
// unpredictable.
func benchData() []float32 {
	r := rand.New(rand.NewPCG(3, 4))
	s := make([]float32, benchN)
	for i := range s {
		s[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(9)-4)))
	}
	return s
}

// The benchmarks report bytes read plus bytes written (6 per element), the
// memory traffic a converter has to move.

func BenchmarkEncodeF16(b *testing.B)  { benchEncode(b, F16) }
func BenchmarkEncodeBF16(b *testing.B) { benchEncode(b, BF16) }
func BenchmarkDecodeF16(b *testing.B)  { benchDecode(b, F16) }
func BenchmarkDecodeBF16(b *testing.B) { benchDecode(b, BF16) }

func benchEncode(b *testing.B, d DType) {
	src := benchData()
	dst := make([]uint16, benchN)
	for _, c := range available {
		b.Run(c.name, func(b *testing.B) {
			f := encoders(c)[d]
			b.SetBytes(6 * benchN)
			for b.Loop() {
				f(dst, src)
			}
		})
	}
}

func benchDecode(b *testing.B, d DType) {
	src := make([]uint16, benchN)
	encoders(genericConverters)[d](src, benchData())
	dst := make([]float32, benchN)
	for _, c := range available {
		b.Run(c.name, func(b *testing.B) {
			f := decoders(c)[d]
			b.SetBytes(6 * benchN)
			for b.Loop() {
				f(dst, src)
			}
		})
	}
}
