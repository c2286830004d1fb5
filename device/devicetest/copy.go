package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// specials are values whose conversion is easy to get wrong: signed zero,
// infinities, NaN, values that overflow F16 (65520 is the first that rounds
// to Inf), F16 subnormals and values that underflow it, ties, and values
// too large for F16 but fine for BF16. F32 and BF16 subnormals are left out:
// a GPU may flush them to zero, and no training value lives there.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.1, -1.0 / 3,
	float32(math.Inf(1)), float32(math.Inf(-1)), nan,
	65504, 65519, 65520, -65520, 1e5, 1e30, -3e38,
	6e-8, 3e-8, 1e-7, -2.5e-6, 6.1e-5, 1e-9,
	1 + 1.0/2048, 1 + 3.0/2048, // F16 ties: to even, down then up
	1 + 1.0/256, 1 + 3.0/256, // BF16 ties
	2049, 4097, 257, 12345.678,
}

// withSpecials returns n random values in [-4, 4) with specials in front.
func (e *env) withSpecials(n int) []float32 {
	v := e.uniform(n, -4, 4)
	copy(v, specials)
	return v
}

func testHostCopy(t *testing.T, dev device.Device) {
	for _, dt := range dtype.All {
		for _, n := range []int{1, len(specials), 50001} {
			run(t, dev, fmt.Sprintf("%v/n%d", dt, n), func(e *env) {
				src := e.withSpecials(n)
				want := append([]float32(nil), src...)
				roundTo(dt, want)
				b := e.alloc(dt, n)
				e.dev.CopyFromHost(b, src)
				e.exact("CopyToHost(CopyFromHost(x))", e.get(b), want)
				if dt == dtype.F32 {
					mustPanic(e.t, "CopyBitsFromHost into an F32 buffer", func() { e.dev.CopyBitsFromHost(b, make([]uint16, n)) })
					return
				}
				// The patterns themselves, NaN payloads included, arrive
				// as they are.
				bits := make([]uint16, n)
				dtype.Encode(dt, bits, src)
				for i := range bits {
					if i%7 == 3 {
						bits[i] = 0x7c01 + uint16(i%5) // NaNs in both formats, kept by no rounding
					}
				}
				c := e.alloc(dt, n)
				e.dev.CopyBitsFromHost(c, bits)
				wantBits := make([]float32, n)
				dtype.Decode(dt, wantBits, bits)
				got := e.get(c)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(wantBits[i]) && !(got[i] != got[i] && wantBits[i] != wantBits[i]) {
						e.t.Fatalf("%s: CopyBitsFromHost: element %d = %v, want %v (pattern %#04x)", e.t.Name(), i, got[i], wantBits[i], bits[i])
					}
				}
				mustPanic(e.t, "CopyBitsFromHost of the wrong length", func() { e.dev.CopyBitsFromHost(c, bits[:n-1]) })
			})
		}
	}
}

func testFill(t *testing.T, dev device.Device) {
	values := []float32{0, float32(math.Copysign(0, -1)), 1, -2.5, 0.1, 1e-6, 1e-9, 70000, 3e38, float32(math.Inf(-1)), nan}
	for _, dt := range dtype.All {
		for _, n := range []int{1, 100, 40000} {
			for _, v := range values {
				run(t, dev, fmt.Sprintf("%v/n%d/v%v", dt, n, v), func(e *env) {
					got := e.output(dt, n, func(b device.Buffer) {
						e.dev.Fill(b, v)
					})
					want := make([]float32, n)
					for i := range want {
						want[i] = dtype.Round(dt, v)
					}
					e.exact("dst", got, want)
				})
			}
		}
	}
}

func testCopy(t *testing.T, dev device.Device) {
	cases := []struct {
		name                              string
		dstLen, dstOff, srcLen, srcOff, n int
	}{
		{"whole", 37, 0, 37, 0, 37},
		{"offsets", 120, 11, 110, 3, 100},
		{"none", 10, 4, 10, 2, 0},
		{"one", 5, 4, 9, 8, 1},
		{"large", 50005, 2, 50003, 1, 50001},
	}
	for _, sdt := range dtype.All {
		for _, ddt := range dtype.All {
			for _, c := range cases {
				run(t, dev, fmt.Sprintf("%v/%s", dtName(ddt, sdt), c.name), func(e *env) {
					src := e.withSpecials(c.srcLen)
					// Specials start at the copied range, so they are converted.
					copy(src[c.srcOff:], specials[:min(len(specials), c.srcLen-c.srcOff)])
					sb := e.put(sdt, src)
					// Outside the copied range, dst keeps distinct small
					// integers, exact in every dtype.
					init := make([]float32, c.dstLen)
					for i := range init {
						init[i] = float32(i%200 - 100)
					}
					got := e.twice(func(float32) [][]float32 {
						db := e.put(ddt, append([]float32(nil), init...))
						e.dev.Copy(db, c.dstOff, sb, c.srcOff, c.n)
						return [][]float32{e.get(db)}
					})[0]
					want := append([]float32(nil), init...)
					for i := range c.n {
						want[c.dstOff+i] = dtype.Round(ddt, src[c.srcOff+i])
					}
					e.exact("dst", got, want)
				})
			}
		}
	}
	for _, dt := range dtype.All {
		// The contract allows a copy within one buffer that does not
		// overlap, and a copy onto itself (a no-op).
		run(t, dev, dt.String()+"/samebuffer", func(e *env) {
			v := e.uniform(40, -3, 3)
			b := e.put(dt, v)
			e.dev.Copy(b, 5, b, 5, 10)
			e.exact("Copy(b, 5, b, 5, 10)", e.get(b), v)
			e.dev.Copy(b, 25, b, 2, 12)
			want := append([]float32(nil), v...)
			copy(want[25:37], v[2:14])
			e.exact("Copy(b, 25, b, 2, 12)", e.get(b), want)
		})
	}
}
