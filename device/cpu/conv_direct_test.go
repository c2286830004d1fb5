package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestConvWeightGradWorkers checks that the direct weight gradient of a
// batch cut into several chunks is the same, bit for bit, whatever number
// of cores shares its pieces out, in every dtype the direct kernels take:
// each piece adds the chunks in order, on whichever core runs it. (With a
// core's chunks summed apart and then added, the sums differed, and so
// did a training run's last digits.)
func TestConvWeightGradWorkers(t *testing.T) {
	s := device.NewConvShape(23, 16, 32, 32, 3, 3, 1, 1)
	const oc = 16
	rng := rand.New(rand.NewPCG(3, 4))
	x, dy := make([]float32, s.N*s.C*s.H*s.W), make([]float32, s.N*oc*s.OH*s.OW)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	for i := range dy {
		dy[i] = rng.Float32()*2 - 1
	}
	ran := false
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		d := New()
		if !d.DirectConv(s, oc, dt) {
			continue
		}
		ran = true
		c := d.directPlan("test", s, oc, dt)
		per := c.WeightGradPrepLen()
		if dt == dtype.BF16 {
			per = c.WeightGradPrepLenBF16()
		}
		if chunk := wgradChunkFloats / per; chunk >= s.N || s.N%chunk == 0 {
			t.Fatalf("%v: %d images a chunk; the test wants a batch of several chunks, the last one short", dt, chunk)
		}
		xb, dyb := d.Alloc(dt, len(x), device.Temp), d.Alloc(dt, len(dy), device.Temp)
		d.CopyFromHost(xb, x)
		d.CopyFromHost(dyb, dy)
		var want []float32
		for _, workers := range []int{1, 2, 3, 5} {
			d.workers = workers
			dw := d.Alloc(dtype.F32, oc*s.C*9, device.Temp)
			d.ConvWeightGrad(dw, dyb, xb, s, oc)
			got := make([]float32, dw.Len())
			d.CopyToHost(got, dw)
			if want == nil {
				want = got
			} else if !slices.Equal(got, want) {
				t.Errorf("%v: the weight gradient on %d cores differs from that on one", dt, workers)
			}
		}
	}
	if !ran {
		t.Skip("the direct kernels do not run on this CPU")
	}
}

// BenchmarkConvBatch times the device's direct convolution on ResNet-20's
// three stages at batch 128, forward, input gradient and weight gradient,
// F32 and (with AMX) BF16, as a training step calls them: the images
// shared out among the cores. It reports GFLOP/s (2 flops a multiply-add).
func BenchmarkConvBatch(b *testing.B) {
	d := New()
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		for _, c := range []int{16, 32, 64} {
			h := 512 / c // 32x32, 16x16, 8x8
			s := device.NewConvShape(128, c, h, h, 3, 3, 1, 1)
			if !d.DirectConv(s, c, dt) {
				continue
			}
			flop := 2 * float64(s.N*c*c*9*s.OH*s.OW)
			x, y := d.Alloc(dt, s.N*c*h*h, device.Temp), d.Alloc(dt, s.N*c*s.OH*s.OW, device.Temp)
			w, dw := d.Alloc(dt, c*c*9, device.Temp), d.Alloc(dtype.F32, c*c*9, device.Temp)
			for _, op := range []struct {
				name string
				run  func()
			}{
				{"fwd", func() { d.ConvForward(y, x, w, nil, s, c) }},
				{"dgrad", func() { d.ConvInputGrad(x, y, w, s, c) }},
				{"wgrad", func() { d.ConvWeightGrad(dw, y, x, s, c) }},
			} {
				b.Run(fmt.Sprintf("%v/%dx%dx%d/%s", dt, c, h, h, op.name), func(b *testing.B) {
					for b.Loop() {
						op.run()
					}
					b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
			for _, buf := range []device.Buffer{x, y, w, dw} {
				d.Free(buf)
			}
		}
	}
}
