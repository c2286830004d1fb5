package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestStepCastMatchesStepThenCopy checks the fused step-and-cast kernels
// against the plain step followed by a conversion, bit for bit: the
// parameters and optimiser state must be those of the plain step, and the
// copy what Copy makes of them, at every SIMD level this CPU runs. Sizes
// cross the SIMD width, the cast blocks and the parallel pieces.
func TestStepCastMatchesStepThenCopy(t *testing.T) {
	withProcs(t, 2)
	sizes := []int{1, 17, castBlock - 1, castBlock + 3, grain + 5, 3*grain + 7}
	sgd := []device.SGDParams{
		{LR: 0.01},
		{LR: 0.01, WeightDecay: 1e-4},
		{LR: 0.01, Momentum: 0.9, First: true},
		{LR: 0.01, Momentum: 0.9, Dampening: 0.1},
		{LR: 0.01, Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4},
	}
	adam := []device.AdamParams{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1},
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 9, WeightDecay: 0.01},
		{LR: 3e-3, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, Step: 100, WeightDecay: 0.05, Decoupled: true},
	}
	type step struct {
		name  string
		plain func(d *Device, b []device.Buffer)
		fused func(d *Device, b []device.Buffer, low device.Buffer)
	}
	var steps []step
	for _, h := range sgd {
		steps = append(steps, step{fmt.Sprintf("SGD%+v", h),
			func(d *Device, b []device.Buffer) { d.SGD(b[0], b[1], b[2], h) },
			func(d *Device, b []device.Buffer, low device.Buffer) { d.SGDCast(b[0], b[1], b[2], low, h) }})
	}
	for _, h := range adam {
		steps = append(steps, step{fmt.Sprintf("Adam%+v", h),
			func(d *Device, b []device.Buffer) { d.Adam(b[0], b[1], b[2], b[3], h) },
			func(d *Device, b []device.Buffer, low device.Buffer) { d.AdamCast(b[0], b[1], b[2], b[3], low, h) }})
	}
	d := New()
	defer d.Close()
	defer func(l simdLevel) { simdOptim = l }(simdOptim)
	for _, l := range levelsUpTo(simdOptim) {
		simdOptim = l
		for _, n := range sizes {
			rng := rand.New(rand.NewPCG(uint64(n), 3))
			init := make([][]float32, 4)
			for i := range init {
				init[i] = optimValues(rng, n)
				if i == 3 { // Adam's second moment is never negative
					for j, v := range init[i] {
						init[i][j] = max(v, -v)
					}
				}
			}
			load := func() []device.Buffer {
				bs := make([]device.Buffer, 4)
				for i := range bs {
					bs[i] = d.Alloc(dtype.F32, n, device.Temp)
					d.CopyFromHost(bs[i], init[i])
				}
				return bs
			}
			for _, s := range steps {
				for _, low := range []dtype.DType{dtype.F16, dtype.BF16} {
					want, got := load(), load()
					s.plain(d, want)
					wantLow := d.Alloc(low, n, device.Temp)
					d.Copy(wantLow, 0, want[0], 0, n)
					gotLow := d.Alloc(low, n, device.Temp)
					d.Fill(gotLow, 7) // stale contents the step must overwrite
					s.fused(d, got, gotLow)
					for i := range want {
						if j := firstDiff(d, want[i], got[i]); j >= 0 {
							t.Fatalf("%s n=%d %v %v: buffer %d differs from the plain step at element %d", s.name, n, l, low, i, j)
						}
					}
					if j := firstDiff(d, wantLow, gotLow); j >= 0 {
						t.Fatalf("%s n=%d %v: %v copy differs from Copy of the plain step's result at element %d", s.name, n, l, low, j)
					}
					for _, b := range append(append(want, got...), wantLow, gotLow) {
						d.Free(b)
					}
				}
			}
		}
	}
}

// firstDiff returns the first element at which a and b differ in their
// bits (NaNs compared as bits too), or -1.
func firstDiff(d *Device, a, b device.Buffer) int {
	ab, bb := d.buf(a, "test"), d.buf(b, "test")
	if ab.dt == dtype.F32 {
		for i := range ab.f32 {
			if math.Float32bits(ab.f32[i]) != math.Float32bits(bb.f32[i]) {
				return i
			}
		}
		return -1
	}
	for i := range ab.u16 {
		if ab.u16[i] != bb.u16[i] {
			return i
		}
	}
	return -1
}

// TestStepCastRejectsBadCopy checks that a copy of the wrong dtype or
// length is refused with a message naming the kernel.
func TestStepCastRejectsBadCopy(t *testing.T) {
	d := New()
	p, g := d.Alloc(dtype.F32, 8, device.Temp), d.Alloc(dtype.F32, 8, device.Temp)
	for _, c := range []struct {
		name string
		low  device.Buffer
	}{
		{"f32 copy", d.Alloc(dtype.F32, 8, device.Temp)},
		{"short copy", d.Alloc(dtype.F16, 7, device.Temp)},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "SGDCast") {
					t.Errorf("%s: recovered %v, want a panic naming SGDCast", c.name, r)
				}
			}()
			d.SGDCast(p, g, nil, c.low, device.SGDParams{LR: 1})
		}()
	}
}

// TestOptimizerAllocs checks that the optimiser kernels allocate nothing
// on buffers of one piece, and on larger ones only their closure (and
// UnscaleCheck the flag its pieces share).
func TestOptimizerAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	withProcs(t, 2)
	d := New()
	defer d.Close()
	for _, n := range []int{grain, 2 * minParallel} {
		bs := make([]device.Buffer, 4)
		for i := range bs {
			bs[i] = d.Alloc(dtype.F32, n, device.Temp)
			d.Fill(bs[i], 0.5)
		}
		low := d.Alloc(dtype.BF16, n, device.Temp)
		sgd := device.SGDParams{LR: 1e-3, Momentum: 0.9}
		adam := device.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}
		for _, k := range []struct {
			name   string
			pieces float64 // allocations when there are several pieces
			run    func()
		}{
			{"SGD", 1, func() { d.SGD(bs[0], bs[1], bs[2], sgd) }},
			{"SGDCast", 1, func() { d.SGDCast(bs[0], bs[1], bs[2], low, sgd) }},
			{"Adam", 1, func() { d.Adam(bs[0], bs[1], bs[2], bs[3], adam) }},
			{"AdamCast", 1, func() { d.AdamCast(bs[0], bs[1], bs[2], bs[3], low, adam) }},
			{"UnscaleCheck", 2, func() { d.UnscaleCheck(bs[1:2], 1) }},
		} {
			want := 0.0
			if n > grain {
				want = k.pieces
			}
			k.run()
			if got := testing.AllocsPerRun(20, k.run); got > want {
				t.Errorf("%s on %d elements: %v allocations per call, want at most %v", k.name, n, got, want)
			}
		}
	}
}
