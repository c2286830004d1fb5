package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/tensor"
)

// TestConvChunking checks that splitting a batch into im2col chunks, and
// keeping the columns for the backward pass or unrolling them again there,
// change nothing: output and gradients are bitwise equal with one image per
// chunk (by the package's bound, or the graph's ConvChunk) and with the
// columns kept or not (ConvColumnBudget), in F32 and under BF16 autocast;
// ConvChunk's single images take less workspace than the whole batch. The
// direct convolution has neither chunks nor columns, so the graph takes
// the column path (Im2Col).
//
// Bitwise holds on the CPU, whose GEMM sums K in one order however the
// batch is cut, so the weight gradient's chunks accumulated with Beta 1
// add exactly what one GEMM over the whole batch adds. cuBLAS promises no
// order (its kernel and split of K depend on the shape; on the H200 the
// two differed by 1 ulp), so on other backends each tensor must agree
// within a few roundings of its dtype, relative to its largest element:
// enough for a different summation order, far too little for a wrong
// index or a chunk counted twice.
func TestConvChunking(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, low := range []dtype.DType{dtype.F32, dtype.BF16} {
			testConvChunking(t, dev, low)
		}
	})
}

func testConvChunking(t *testing.T, dev device.Device, low dtype.DType) {
	rng := rand.New(rand.NewPCG(4, 4))
	xh := tensor.UniformHost(rng, -1, 1, 5, 3, 6, 6)
	wh := tensor.UniformHost(rng, -1, 1, 4, 3, 3, 3)
	bh := tensor.UniformHost(rng, -1, 1, 4)
	colBytes := device.Bytes(low, 5*27*36) // 5 images of 27x36 columns
	var workspace int64                    // the last run's peak
	run := func(budget int64, opts ...autograd.Option) [][]float32 {
		dev.ResetPeak()
		defer func() { workspace = dev.MemStats().Peak.Category(device.Workspace) }()
		g := autograd.NewGraph(dev, append(opts, autograd.ConvColumnBudget(budget), autograd.Im2Col())...)
		defer g.Release()
		if low != dtype.F32 {
			amp.Autocast(g, low)
		}
		x := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, xh), true)
		w := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, wh), true)
		b := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, bh), true)
		defer x.Value.Release()
		defer w.Value.Release()
		defer b.Value.Release()
		y := g.Conv2d(x, w, b, 1, 1)
		want := int64(0)
		if budget >= colBytes {
			want = colBytes
		}
		if kept := autograd.KeptColumns(g); kept != want {
			t.Fatalf("%v, budget %d: %d bytes of columns kept, want %d", low, budget, kept, want)
		}
		g.Backward(g.Sum(g.Mul(y, y)))
		return [][]float32{y.Value.ToHost(), x.Grad.ToHost(), w.Grad.ToHost(), b.Grad.ToHost()}
	}
	whole := run(colBytes)
	cases := map[string][][]float32{"one chunk, columns unrolled again": run(colBytes - 1)}
	batchWorkspace := workspace
	cases["image by image through ConvChunk"] = run(0, autograd.ConvChunk(1))
	if workspace >= batchWorkspace {
		t.Errorf("%v: workspace %d bytes with ConvChunk(1), %d with the whole batch at once", low, workspace, batchWorkspace)
	}
	restore := autograd.SetColBudget(1) // one image per chunk
	cases["image by image, columns kept"] = run(1 << 30)
	cases["image by image, columns unrolled again"] = run(0)
	restore()
	bitwise := dev.Name() == "cpu"
	for name, got := range cases {
		for i := range whole {
			// The output is in low under autocast; a rounding it flips
			// reaches every gradient through Mul(y, y).
			tol := 8 * math.Pow(2, -24)
			if low == dtype.BF16 {
				tol = 4 * math.Pow(2, -8)
			}
			var big float64
			for _, v := range whole[i] {
				big = max(big, math.Abs(float64(v)))
			}
			for j := range whole[i] {
				w, g := whole[i][j], got[i][j]
				if bitwise && math.Float32bits(w) != math.Float32bits(g) ||
					!bitwise && math.Abs(float64(w)-float64(g)) > tol*big {
					t.Fatalf("%v: tensor %d element %d: %v in one chunk with the columns kept, %v %s", low, i, j, w, g, name)
				}
			}
		}
	}
}

// TestConvDirectMatchesColumns checks a device's direct convolution
// (device.DirectConvKernels) against the column path (Im2Col) shape by
// shape, in FP32 and under F16 and BF16 autocast: odd sizes, one image,
// strides 1 and 2, 1x1 and 3x3 kernels, padding 0 and 1. Output and the
// three gradients agree within the tolerance of the dtype they are
// rounded to plus sumSlack times each element's magnitude (the same
// convolution of |x|, |w|, |b| and |dy|), as their sums run in different
// orders. Under autocast that is the low dtype for all four: the weight
// and bias gradients accumulate in F32 but reach the F32 leaves through
// autocast's 16-bit copies of them, rounded once there, so two orders of
// summation may round to neighbouring 16-bit values.
func TestConvDirectMatchesColumns(t *testing.T) {
	type shape struct{ n, c, h, w, oc, k, stride, pad int }
	shapes := []shape{
		{2, 16, 32, 32, 16, 3, 1, 1}, {2, 16, 32, 32, 32, 3, 2, 1}, {2, 16, 32, 32, 32, 1, 2, 0},
		{1, 64, 8, 8, 64, 3, 1, 1}, {1, 3, 7, 9, 5, 3, 1, 1}, {3, 5, 9, 7, 6, 3, 2, 1},
		{1, 4, 5, 5, 3, 1, 1, 0}, {2, 3, 11, 13, 7, 1, 2, 0}, {1, 2, 13, 11, 9, 3, 1, 0},
		{1, 1, 28, 28, 32, 3, 1, 0},
	}
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		dc, ok := dev.(device.DirectConvKernels)
		if !ok {
			t.Skip("no direct convolution on this device")
		}
		for _, dt := range dtype.All {
			for _, sh := range shapes {
				name := fmt.Sprintf("%v/%dx%dx%dx%d-oc%d-k%d-s%d-p%d", dt, sh.n, sh.c, sh.h, sh.w, sh.oc, sh.k, sh.stride, sh.pad)
				t.Run(name, func(t *testing.T) {
					if !dc.DirectConv(device.NewConvShape(sh.n, sh.c, sh.h, sh.w, sh.k, sh.k, sh.stride, sh.pad), sh.oc, dt) {
						t.Skip("the device does not run this shape directly")
					}
					testConvDirectMatchesColumns(t, dev, dt, sh.n, sh.c, sh.h, sh.w, sh.oc, sh.k, sh.stride, sh.pad)
				})
			}
		}
	})
}

func testConvDirectMatchesColumns(t *testing.T, dev device.Device, dt dtype.DType, n, c, h, w, oc, k, stride, pad int) {
	rng := rand.New(rand.NewPCG(uint64(c), uint64(h)))
	xh := tensor.UniformHost(rng, -1, 1, n, c, h, w)
	wh := tensor.UniformHost(rng, -1, 1, oc, c, k, k)
	bh := tensor.UniformHost(rng, -1, 1, oc)
	oh, ow := (h+2*pad-k)/stride+1, (w+2*pad-k)/stride+1
	dyh := tensor.UniformHost(rng, -1, 1, n, oc, oh, ow)
	run := func(abs bool, opts ...autograd.Option) [][]float32 {
		g := autograd.NewGraph(dev, opts...)
		defer g.Release()
		if dt != dtype.F32 {
			amp.Autocast(g, dt)
		}
		in := func(h tensor.Host) *autograd.Var {
			if abs {
				d := make([]float32, len(h.Data))
				for i, v := range h.Data {
					d[i] = float32(math.Abs(float64(v)))
				}
				h = tensor.Host{Shape: h.Shape, Data: d}
			}
			v := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, h), true)
			t.Cleanup(v.Value.Release)
			return v
		}
		x, wv, b, dy := in(xh), in(wh), in(bh), in(dyh)
		y := g.Conv2d(x, wv, b, stride, pad)
		g.Backward(g.Sum(g.Mul(y, dy)))
		return [][]float32{y.Value.ToHost(), x.Grad.ToHost(), wv.Grad.ToHost(), b.Grad.ToHost()}
	}
	direct, cols, mag := run(false), run(false, autograd.Im2Col()), run(true, autograd.Im2Col())
	for i, what := range []string{"y", "dx", "dw", "db"} {
		tol := dt
		bad := 0
		for j := range cols[i] {
			if !dtype.Close(tol, float64(direct[i][j]), float64(cols[i][j]), sumSlack*float64(mag[i][j])) {
				if bad < 5 {
					t.Errorf("%s[%d]: direct %v, columns %v (magnitude %v)", what, j, direct[i][j], cols[i][j], mag[i][j])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d elements differ", what, bad, len(cols[i]))
		}
	}
}

// sumSlack is the error allowed a float32 sum beyond the F32 tolerance,
// per unit of the sum of its terms' magnitudes, when two paths add in
// different orders; the direct kernels' own test (package gemm) measured
// at most 3.0e-7 against a float64 reference.
const sumSlack = 1.0 / (1 << 20)

// TestBatchNormReLUMatchesComposite checks BatchNormReLU, which a device
// with device.BatchNormActKernels runs as one op, against BatchNorm, Add
// and ReLU, with and without the residual: in FP32 the output and every
// gradient (x, the residual, gamma, beta) bit for bit, as the fused loops
// make the same float32 and float64 operations; under BF16 autocast the
// fused op rounds BatchNorm's output and the sum once instead of twice,
// so they agree within BF16's tolerance.
func TestBatchNormReLUMatchesComposite(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			for _, withRes := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/residual=%v", dt, withRes), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(7, 35))
					xh := tensor.NormalHost(rng, 0.5, 2, 4, 3, 5, 6)
					rh := tensor.NormalHost(rng, 0, 1, 4, 3, 5, 6)
					dyh := tensor.NormalHost(rng, 0, 1, 4, 3, 5, 6)
					gh, bh := tensor.UniformHost(rng, 0.5, 1.5, 3), tensor.UniformHost(rng, -1, 1, 3)
					run := func(fused bool) [][]float32 {
						g := autograd.NewGraph(dev)
						defer g.Release()
						if dt != dtype.F32 {
							amp.Autocast(g, dt)
						}
						leaf := func(h tensor.Host) *autograd.Var {
							v := g.Leaf(tensor.FromHost(dev, dtype.F32, device.Temp, h), true)
							t.Cleanup(v.Value.Release)
							return v
						}
						x0, r0, gamma, beta, dy := leaf(xh), leaf(rh), leaf(gh), leaf(bh), leaf(dyh)
						// The inputs in the network's dtype, as a block's
						// convolutions would give them.
						x, res := g.Cast(x0, dt), g.Cast(r0, dt)
						if !withRes {
							res = nil
						}
						p := autograd.BatchNormParams{Training: true, Eps: 1e-5}
						var y *autograd.Var
						if fused {
							y = g.BatchNormReLU(x, gamma, beta, res, p)
						} else {
							y = g.BatchNorm(x, gamma, beta, p)
							if res != nil {
								y = g.Add(y, res)
							}
							y = g.ReLU(y)
						}
						g.Backward(g.Sum(g.Mul(y, dy)))
						out := [][]float32{y.Value.ToHost(), x0.Grad.ToHost(), gamma.Grad.ToHost(), beta.Grad.ToHost()}
						if withRes {
							out = append(out, r0.Grad.ToHost())
						}
						return out
					}
					got, want := run(true), run(false)
					for i, what := range []string{"y", "dx", "dgamma", "dbeta", "dres"}[:len(want)] {
						for j := range want[i] {
							g, w := got[i][j], want[i][j]
							ok := math.Float32bits(g) == math.Float32bits(w)
							if dt != dtype.F32 {
								tol := dt
								if what == "dgamma" || what == "dbeta" {
									tol = dtype.F32 // F32 sums of the same dz
								}
								ok = dtype.Close(tol, float64(g), float64(w), 0)
							}
							if !ok {
								t.Fatalf("%s[%d]: fused %v, composite %v", what, j, g, w)
							}
						}
					}
				})
			}
		}
	})
}
