//go:build !purego

package gemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// TestAMXRoundStore checks amxBF16Round's store (and amxBF16RoundW's, the
// same values widened into a float32 d) against dtype's rounding on
// every class of float32: with no k steps in mode 1 its tiles are C as
// loaded, so its output is C rounded to bfloat16 by the kernel. C holds
// random normals, values halfway between two bfloat16s (ties to even),
// subnormals (which VCVTNEPS2BF16 alone would take as zero), quiet and
// signalling NaNs, infinities, zeros and the largest finite values (which
// round to infinity); d's rows are ldd apart with sentries between and
// around them, which must keep their values.
func TestAMXRoundStore(t *testing.T) {
	if avx512Impl.dot != amxImpl {
		t.Skip("no AMX-BF16 on this CPU, or the OS does not allow it")
	}
	const n, ldc, ldd, sentry = 3, 40, 37, 0x5a5a
	rows := 32 * n
	rng := rand.New(rand.NewPCG(7, 11))
	special := []uint32{
		0x7fc00000, 0xffc00001, 0x7f800001, 0xff812345, // NaNs, quiet and signalling
		0x7f800000, 0xff800000, 0, 0x80000000, // infinities, zeros
		0x7f7fffff, 0xff7fffff, 0x00000001, 0x807fffff, 0x00008000, 0x00018000, 0x007f8000, 0x00800000,
	}
	c := make([]float32, rows*ldc)
	for i := range c {
		var bits uint32
		switch r := rng.IntN(8); {
		case r < 3:
			bits = math.Float32bits(float32(rng.NormFloat64()))
		case r == 3: // a tie: exactly half an ulp of bfloat16 below the cut
			bits = rng.Uint32()&0xffff0000 | 0x8000
		case r == 4, r == 5: // subnormal, either sign
			bits = rng.Uint32() & 0x807fffff
		case r == 6:
			bits = special[rng.IntN(len(special))]
		default:
			bits = rng.Uint32()
		}
		c[i] = math.Float32frombits(bits)
	}
	d := make([]uint16, (rows-1)*ldd+32+8)
	for i := range d {
		d[i] = sentry
	}
	a, b := make([]float32, 16), make([]float32, 16) // not read: no k steps
	amxBF16Round(0, &a[0], &b[0], &c[0], ldc, 1, 1, n, 1, &d[0], ldd)
	for i := range d {
		r, col := i/ldd, i%ldd
		want := uint16(sentry)
		if r < rows && col < 32 {
			w := []uint16{0}
			dtype.Encode(dtype.BF16, w, c[r*ldc+col:r*ldc+col+1])
			want = w[0]
		}
		if d[i] != want {
			t.Fatalf("d[%d] (row %d, column %d) = %#04x, want %#04x (C = %#08x)", i, r, col, d[i], want, math.Float32bits(c[min(r, rows-1)*ldc+min(col, 31)]))
		}
	}
	// amxBF16RoundW: the same values widened back into a float32 d.
	d32 := make([]float32, len(d))
	for i := range d32 {
		d32[i] = math.Float32frombits(sentry << 16)
	}
	amxBF16RoundW(0, &a[0], &b[0], &c[0], ldc, 1, 1, n, 1, &d32[0], ldd)
	for i := range d32 {
		if got, want := math.Float32bits(d32[i]), uint32(d[i])<<16; got != want {
			t.Fatalf("widened: d[%d] (row %d, column %d) = %#08x, want %#08x", i, i/ldd, i%ldd, got, want)
		}
	}
}
