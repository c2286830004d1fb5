package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// optimValues are random magnitudes over many binades, with the special
// values a diverging run produces mixed in.
func optimValues(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-5)))
		switch rng.IntN(50) {
		case 0:
			out[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
		case 1:
			out[i] = float32(math.NaN())
		case 2:
			out[i] = 0
		case 3:
			out[i] = float32(math.Copysign(0, -1))
		case 4:
			out[i] = 1e-41 // subnormal
		}
	}
	return out
}

// runLevels runs step with the Go loops and again at every SIMD level this
// CPU runs, on copies of the same buffers, and requires every level's
// results to be bitwise equal to the Go loops'. step sees the levels in
// order, the Go loops first.
func runLevels(t *testing.T, name string, n int, nbuf int, step func(d *Device, bufs []device.Buffer)) {
	t.Helper()
	levels := levelsUpTo(simdOptim)
	if len(levels) == 1 {
		t.Skip("no AVX2 on this CPU: only the Go loops run")
	}
	defer func(l simdLevel) { simdOptim = l }(simdOptim)
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	init := make([][]float32, nbuf)
	for i := range init {
		init[i] = optimValues(rng, n)
		if i >= 2 { // moment buffers: v must be >= 0 as Adam keeps it
			for j := range init[i] {
				init[i][j] = float32(math.Abs(float64(init[i][j])))
			}
		}
	}
	results := make([][][]float32, len(levels))
	for pass, l := range levels {
		simdOptim = l
		d := New()
		bufs := make([]device.Buffer, nbuf)
		for i := range bufs {
			bufs[i] = d.Alloc(dtype.F32, n, device.Temp)
			d.CopyFromHost(bufs[i], init[i])
		}
		step(d, bufs)
		for _, b := range bufs {
			out := make([]float32, n)
			d.CopyToHost(out, b)
			results[pass] = append(results[pass], out)
			d.Free(b)
		}
	}
	for pass, l := range levels[1:] {
		for i, want := range results[0] {
			for j, b := range want {
				a := results[pass+1][i][j]
				if math.Float32bits(a) != math.Float32bits(b) {
					t.Fatalf("%s n=%d: buffer %d element %d: %v %v (%#x), Go %v (%#x), from p=%v g=%v",
						name, n, i, j, l, a, math.Float32bits(a), b, math.Float32bits(b), init[0][j], init[1%nbuf][j])
				}
			}
		}
	}
}

var optimSizes = []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 1 << 14, 3*(1<<14) + 5}

func TestSGDAssemblyMatchesGo(t *testing.T) {
	for _, n := range optimSizes {
		runLevels(t, "SGD plain", n, 2, func(d *Device, b []device.Buffer) {
			d.SGD(b[0], b[1], nil, device.SGDParams{LR: 0.01})
		})
		runLevels(t, "SGD momentum", n, 3, func(d *Device, b []device.Buffer) {
			d.SGD(b[0], b[1], b[2], device.SGDParams{LR: 0.01, Momentum: 0.9, Dampening: 0.1})
		})
	}
}

func TestAdamAssemblyMatchesGo(t *testing.T) {
	for _, n := range optimSizes {
		for _, h := range []device.AdamParams{
			{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1},
			{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 7, WeightDecay: 0.01},
			{LR: 3e-3, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, Step: 1000, WeightDecay: 0.05, Decoupled: true},
		} {
			runLevels(t, "Adam", n, 4, func(d *Device, b []device.Buffer) { d.Adam(b[0], b[1], b[2], b[3], h) })
		}
	}
}

func TestUnscaleAssemblyMatchesGo(t *testing.T) {
	for _, n := range optimSizes {
		var found []bool
		runLevels(t, "UnscaleCheck", n, 1, func(d *Device, b []device.Buffer) {
			found = append(found, d.UnscaleCheck(b, 1.0/65536))
		})
		for i, f := range found[1:] {
			if f != found[0] {
				t.Errorf("UnscaleCheck n=%d: %v says non-finite=%v, Go %v", n, simdLevel(i+1), f, found[0])
			}
		}
	}
	// Finite values whose product overflows, and one Inf or NaN in each
	// lane of the assembly's part and of the tail, at every level.
	type unscaleCase struct {
		vals []float32
		inv  float32
		want bool
	}
	cases := []unscaleCase{
		{make([]float32, 32), 2, false},
		{append(make([]float32, 31), 3e38), 2, true},
		{append(make([]float32, 15), float32(math.Inf(-1))), 0.5, true},
		{append(make([]float32, 16), float32(math.NaN())), 0.5, true},
	}
	for _, n := range []int{8, 16, 33} {
		for i := range n {
			vals := make([]float32, n)
			vals[i] = float32(math.Inf(1 - 2*(i%2)))
			if i%3 == 0 {
				vals[i] = float32(math.NaN())
			}
			cases = append(cases, unscaleCase{vals, 0.5, true})
		}
	}
	defer func(l simdLevel) { simdOptim = l }(simdOptim)
	d := New()
	for _, l := range levelsUpTo(simdOptim) {
		simdOptim = l
		for _, c := range cases {
			b := d.Alloc(dtype.F32, len(c.vals), device.Temp)
			d.CopyFromHost(b, c.vals)
			if got := d.UnscaleCheck([]device.Buffer{b}, c.inv); got != c.want {
				t.Errorf("%v: UnscaleCheck(%d values, inv %v) = %v, want %v: %v", l, len(c.vals), c.inv, got, c.want, c.vals)
			}
			d.Free(b)
		}
	}
}

// BenchmarkOptimizers times one step over the MNIST MLP's 235,146
// parameters at every SIMD level this CPU runs (avx512, avx2) and with the
// Go loops (go).
func BenchmarkOptimizers(b *testing.B) {
	const n = 784*256 + 256 + 256*128 + 128 + 128*10 + 10
	levels := levelsUpTo(simdOptim)
	for i := len(levels) - 1; i >= 0; i-- {
		l := levels[i]
		for _, opt := range []string{"sgd-momentum", "adamw", "unscale"} {
			b.Run(opt+"/"+l.String(), func(b *testing.B) {
				saved := simdOptim
				simdOptim = l
				defer func() { simdOptim = saved }()
				d := New()
				rng := rand.New(rand.NewPCG(1, 2))
				bufs := make([]device.Buffer, 4)
				for i := range bufs {
					bufs[i] = d.Alloc(dtype.F32, n, device.Temp)
					vals := make([]float32, n)
					for j := range vals {
						vals[j] = float32(rng.Float64())
					}
					d.CopyFromHost(bufs[i], vals)
					defer d.Free(bufs[i])
				}
				step := 0
				for b.Loop() {
					step++
					switch opt {
					case "sgd-momentum":
						d.SGD(bufs[0], bufs[1], bufs[2], device.SGDParams{LR: 1e-9, Momentum: 0.9})
					case "adamw":
						d.Adam(bufs[0], bufs[1], bufs[2], bufs[3], device.AdamParams{LR: 1e-9, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true, Step: step})
					case "unscale":
						d.UnscaleCheck(bufs[:1], 1)
					}
				}
				b.SetBytes(int64(n) * 4)
			})
		}
	}
}
