package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// reluGeneral is the path reluFast replaces: widen, relu in float32, round.
func reluGeneral(db, sb *Buffer, lo, hi int) {
	sv, w := read(sb, lo, hi), writeView(db, lo, hi)
	for i, v := range sv.v {
		w.v[i] = relu(v)
	}
	sv.done()
	commit(db, lo, w)
}

// reluGradGeneral is the path reluGradFast replaces.
func reluGradGeneral(db, gb, yb *Buffer, lo, hi int) {
	gv, yv, w := read(gb, lo, hi), read(yb, lo, hi), writeView(db, lo, hi)
	for i := range gv.v {
		w.v[i] = math.Float32frombits(math.Float32bits(gv.v[i]) & reluGradMask(yv.v[i]))
	}
	gv.done()
	yv.done()
	commit(db, lo, w)
}

func newBits(dt dtype.DType, n int) *Buffer {
	b := &Buffer{dt: dt, n: n}
	if dt == dtype.F32 {
		b.f32 = make([]float32, n)
	} else {
		b.u16 = make([]uint16, n)
	}
	return b
}

// bitsEqual compares two buffers' patterns over [lo, hi) and everything
// outside it (which must stay as it was).
func bitsEqual(t *testing.T, what string, got, want *Buffer) {
	t.Helper()
	for i := 0; i < got.n; i++ {
		var g, w uint32
		if got.dt == dtype.F32 {
			g, w = math.Float32bits(got.f32[i]), math.Float32bits(want.f32[i])
		} else {
			g, w = uint32(got.u16[i]), uint32(want.u16[i])
		}
		if g != w {
			t.Fatalf("%s: element %d = %#x, want %#x", what, i, g, w)
		}
	}
}

// specialBits32 are random float32 patterns with the values ReLU cares
// about mixed in: both zeros, both infinities, quiet and signalling NaNs of
// both signs, subnormals.
func specialBits32(rng *rand.Rand, n int) []float32 {
	special := []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x00000001, 0x80000001, 0x7f7fffff, 0xff7fffff}
	out := make([]float32, n)
	for i := range out {
		b := rng.Uint32()
		if rng.IntN(4) == 0 {
			b = special[rng.IntN(len(special))]
		}
		out[i] = math.Float32frombits(b)
	}
	return out
}

// levelsUpTo lists the SIMD levels from the Go loops up to top, the
// highest this CPU runs for a family: every one a test must check.
func levelsUpTo(top simdLevel) []simdLevel {
	var ls []simdLevel
	for l := simdGo; l <= top; l++ {
		ls = append(ls, l)
	}
	return ls
}

// TestReLUBits checks that ReLU and its gradient on the bit patterns, at
// every SIMD level this CPU runs and in Go, give what widening, computing
// in float32 and rounding give: every 16-bit pattern as input (and as y),
// NaN payloads and signs, both zeros, on unaligned ranges of many lengths
// with tails, and untouched elements outside the range.
func TestReLUBits(t *testing.T) {
	levels := levelsUpTo(simdReLU)
	if len(levels) == 1 {
		t.Log("no AVX2 on this CPU: only the Go loops run")
	}
	defer func(l simdLevel) { simdReLU = l }(simdReLU)
	rng := rand.New(rand.NewPCG(5, 9))
	for _, l := range levels {
		simdReLU = l
		for _, dt := range dtype.All {
			n := 1 << 16
			x, g := newBits(dt, n), newBits(dt, n)
			if dt == dtype.F32 {
				copy(x.f32, specialBits32(rng, n))
				copy(g.f32, specialBits32(rng, n))
			} else {
				for i := range x.u16 {
					x.u16[i] = uint16(i) // every pattern
					g.u16[i] = uint16(rng.Uint32())
				}
				rng.Shuffle(n, func(i, j int) { g.u16[i], g.u16[j] = g.u16[j], g.u16[i] })
			}
			ranges := [][2]int{{0, n}, {3, n - 5}, {0, 0}}
			for i, m := range []int{1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 100} {
				ranges = append(ranges, [2]int{i, i + m})
			}
			for _, r := range ranges {
				lo, hi := r[0], r[1]
				got, want := newBits(dt, n), newBits(dt, n)
				if !reluFast(got, x, lo, hi) {
					t.Fatalf("%v: reluFast declined one dtype", dt)
				}
				reluGeneral(want, x, lo, hi)
				what := fmt.Sprintf("%v %v [%d, %d)", dt, l, lo, hi)
				bitsEqual(t, "ReLU "+what, got, want)
				// The gradient with every pattern as y, and as dy.
				got, want = newBits(dt, n), newBits(dt, n)
				reluGradFast(got, g, x, lo, hi)
				reluGradGeneral(want, g, x, lo, hi)
				bitsEqual(t, "ReLU grad (y all patterns) "+what, got, want)
				got, want = newBits(dt, n), newBits(dt, n)
				reluGradFast(got, x, g, lo, hi)
				reluGradGeneral(want, x, g, lo, hi)
				bitsEqual(t, "ReLU grad (dy all patterns) "+what, got, want)
			}
		}
	}
	// Mixed dtypes go the general way.
	if reluFast(newBits(dtype.F16, 4), newBits(dtype.F32, 4), 0, 4) || reluGradFast(newBits(dtype.BF16, 4), newBits(dtype.BF16, 4), newBits(dtype.F16, 4), 0, 4) {
		t.Error("the bit-pattern loops took buffers of different dtypes")
	}
}
