package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// convGeom fills the output size of a convolution of n images of c x h x w
// with oc k x k filters.
func convGeom(n, c, h, w, oc, k, stride, pad int) ConvGeom {
	return ConvGeom{N: n, C: c, H: h, W: w, OC: oc, KH: k, KW: k, StrideH: stride, StrideW: stride, PadH: pad, PadW: pad,
		OH: (h+2*pad-k)/stride + 1, OW: (w+2*pad-k)/stride + 1}
}

// convCases are the shapes the direct kernels are checked on: ResNet-20's
// and the MNIST CNN's (fewer images), odd sizes, one image, 1x1 and 3x3,
// strides 1 and 2, padding 0 and 1, channel counts that leave partial
// tiles, and rectangular kernels and strides.
var convCases = []ConvGeom{
	convGeom(2, 16, 32, 32, 16, 3, 1, 1),
	convGeom(2, 3, 32, 32, 16, 3, 1, 1),
	convGeom(2, 16, 32, 32, 32, 3, 2, 1),
	convGeom(2, 16, 32, 32, 32, 1, 2, 0),
	convGeom(2, 32, 16, 16, 32, 3, 1, 1),
	convGeom(2, 64, 8, 8, 64, 3, 1, 1),
	convGeom(2, 32, 16, 16, 64, 3, 2, 1),
	convGeom(2, 1, 28, 28, 32, 3, 1, 0),
	convGeom(2, 32, 26, 26, 64, 3, 1, 0),
	convGeom(1, 5, 7, 9, 3, 3, 1, 1),
	convGeom(1, 5, 7, 9, 11, 3, 2, 1),
	convGeom(3, 7, 13, 11, 9, 3, 2, 1),
	convGeom(1, 6, 5, 5, 7, 1, 1, 0),
	convGeom(2, 4, 9, 6, 5, 1, 2, 0),
	convGeom(1, 2, 3, 3, 2, 5, 1, 2),
	convGeom(1, 3, 6, 40, 4, 3, 1, 1),
	convGeom(2, 9, 37, 3, 13, 3, 3, 2),
	{N: 2, C: 3, H: 10, W: 12, OC: 6, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 0, OH: 5, OW: 11},
}

// convRef is the float64 reference: y = x ⋆ w + b, dx = the adjoint of x ↦ x ⋆ w
// applied to dy, dw = the sum over images of dy times the window of x;
// and for each element the sum of its terms' magnitudes (mag*), which
// bounds the rounding error of a float32 sum in any order.
func convRef(g ConvGeom, x, w, b, dy []float32) (y, dx, dw, magY, magDX, magDW []float64) {
	y = make([]float64, g.N*g.OC*g.OH*g.OW)
	dx = make([]float64, g.N*g.C*g.H*g.W)
	dw = make([]float64, g.OC*g.C*g.KH*g.KW)
	magY, magDX, magDW = make([]float64, len(y)), make([]float64, len(dx)), make([]float64, len(dw))
	for n := range g.N {
		for o := range g.OC {
			for oh := range g.OH {
				for ow := range g.OW {
					yi := ((n*g.OC+o)*g.OH+oh)*g.OW + ow
					s := 0.0
					if b != nil {
						s = float64(b[o])
						magY[yi] = math.Abs(s)
					}
					for c := range g.C {
						for kh := range g.KH {
							for kw := range g.KW {
								r, q := oh*g.StrideH+kh-g.PadH, ow*g.StrideW+kw-g.PadW
								if r < 0 || r >= g.H || q < 0 || q >= g.W {
									continue
								}
								xi := ((n*g.C+c)*g.H+r)*g.W + q
								wi := ((o*g.C+c)*g.KH+kh)*g.KW + kw
								s += float64(w[wi]) * float64(x[xi])
								magY[yi] += math.Abs(float64(w[wi]) * float64(x[xi]))
								dx[xi] += float64(w[wi]) * float64(dy[yi])
								magDX[xi] += math.Abs(float64(w[wi]) * float64(dy[yi]))
								dw[wi] += float64(dy[yi]) * float64(x[xi])
								magDW[wi] += math.Abs(float64(dy[yi]) * float64(x[xi]))
							}
						}
					}
					y[yi] = s
				}
			}
		}
	}
	return y, dx, dw, magY, magDX, magDW
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// sumSlack is the error allowed a float32 sum beyond the F32 tolerance,
// per unit of the sum of its terms' magnitudes. The direct kernels add in
// another order than the reference (and than im2col's GEMM), and where
// the terms cancel the plain rule is too tight for any order: on
// convCases the largest |got-want| / magnitude seen was 2.6e-7 (forward),
// 3.0e-7 (input gradient) and 1.7e-7 (weight gradient), against 9.5e-7
// here.
const sumSlack = 1.0 / (1 << 20)

// checkClose compares got with want under the F32 tolerance with
// sumSlack times each element's magnitude.
func checkClose(t *testing.T, what string, got []float32, want, mag []float64) {
	t.Helper()
	bad, worst := 0, 0.0
	for i := range want {
		if mag[i] > 0 {
			worst = max(worst, math.Abs(float64(got[i])-want[i])/mag[i])
		}
		if !dtype.Close(dtype.F32, float64(got[i]), want[i], sumSlack*mag[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
	t.Logf("%s: largest error %.2g of the magnitude", what, worst)
}

// TestDirectConv checks the direct kernels' forward, input gradient and
// weight gradient against the float64 reference on every shape of
// convCases, the weight gradient with its images in one call and split
// over several.
func TestDirectConv(t *testing.T) {
	if !directConv {
		t.Skip("the direct convolution's kernels need AVX-512")
	}
	for i, g := range convCases {
		t.Run(fmt.Sprintf("%d:%dx%dx%dx%d-oc%d-k%dx%d-s%dx%d-p%dx%d", i, g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.StrideH, g.StrideW, g.PadH, g.PadW), func(t *testing.T) {
			if !ConvSupported(g) {
				t.Fatalf("ConvSupported(%+v) is false", g)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 35))
			x := randSlice(rng, g.N*g.C*g.H*g.W)
			w := randSlice(rng, g.OC*g.C*g.KH*g.KW)
			b := randSlice(rng, g.OC)
			dy := randSlice(rng, g.N*g.OC*g.OH*g.OW)
			wantY, wantDX, wantDW, magY, magDX, magDW := convRef(g, x, w, b, dy)
			c := NewConv(g)

			y := make([]float32, len(wantY))
			for j := range y {
				y[j] = float32(math.NaN()) // every element must be written
			}
			panel := make([]float32, c.ForwardPanelLen())
			c.PackForward(panel, w)
			scratch := make([]float32, c.ForwardScratchLen())
			for n := range g.N {
				c.Forward(y, x, panel, b, n, scratch)
			}
			checkClose(t, "y", y, wantY, magY)

			dx := make([]float32, len(wantDX))
			for j := range dx {
				dx[j] = float32(math.NaN())
			}
			panel = make([]float32, c.InputGradPanelLen())
			c.PackInputGrad(panel, w)
			scratch = make([]float32, c.InputGradScratchLen())
			for n := range g.N {
				c.InputGrad(dx, dy, panel, n, scratch)
			}
			checkClose(t, "dx", dx, wantDX, magDX)

			for _, chunk := range []int{g.N, 1} {
				dw := make([]float32, len(wantDW))
				for j := range dw {
					dw[j] = float32(math.NaN())
				}
				per := c.WeightGradPrepLen()
				src := make([]float32, chunk*per)
				scr := make([]float32, c.WeightGradScratchLen())
				acc := make([]float32, c.WeightGradAccLen())
				for n0 := 0; n0 < g.N; n0 += chunk {
					nb := min(chunk, g.N-n0)
					for i := range nb {
						c.PrepWeightGrad(src[i*per:(i+1)*per], dy, x, n0+i, scr)
					}
					for p := range c.WeightGradPieces() {
						c.WeightGrad(acc, src, nb, p, n0 == 0)
					}
				}
				c.FinishWeightGrad(dw, acc)
				checkClose(t, fmt.Sprintf("dw (chunks of %d)", chunk), dw, wantDW, magDW)
			}
		})
	}
}

// bf16Slice rounds v to bfloat16, returning the bits and the values.
func bf16Slice(v []float32) ([]uint16, []float32) {
	bits, vals := make([]uint16, len(v)), make([]float32, len(v))
	for i, f := range v {
		bits[i] = dtype.F32ToBF16(f)
		vals[i] = dtype.BF16ToF32(bits[i])
	}
	return bits, vals
}

// checkCloseBF16 compares bfloat16 results with the reference rounded to
// bfloat16, under BF16's tolerance plus sumSlack times the magnitude.
func checkCloseBF16(t *testing.T, what string, got []uint16, want, mag []float64) {
	t.Helper()
	bad := 0
	for i := range want {
		g := float64(dtype.BF16ToF32(got[i]))
		w := float64(dtype.Round(dtype.BF16, float32(want[i])))
		if !dtype.Close(dtype.BF16, g, w, sumSlack*mag[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v, want %v", what, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements off", what, bad, len(want))
	}
}

// TestDirectConvBF16 checks the AMX kernels as TestDirectConv checks the
// F32 ones, on bfloat16 operands: y and dx rounded to bfloat16 within its
// tolerance of the float64 reference on the rounded inputs, dw (F32)
// within F32's, the weight gradient in one chunk and image by image.
func TestDirectConvBF16(t *testing.T) {
	if !directConv || !amxConvOK() {
		t.Skip("the BF16 direct convolution needs AMX-BF16")
	}
	const nan16 = 0x7fc1
	for i, g := range convCases {
		t.Run(fmt.Sprintf("%d:%dx%dx%dx%d-oc%d-k%dx%d-s%dx%d-p%dx%d", i, g.N, g.C, g.H, g.W, g.OC, g.KH, g.KW, g.StrideH, g.StrideW, g.PadH, g.PadW), func(t *testing.T) {
			if !ConvSupportedBF16(g) {
				t.Fatalf("ConvSupportedBF16(%+v) is false", g)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 16))
			xb, x := bf16Slice(randSlice(rng, g.N*g.C*g.H*g.W))
			wb, w := bf16Slice(randSlice(rng, g.OC*g.C*g.KH*g.KW))
			b := randSlice(rng, g.OC)
			dyb, dy := bf16Slice(randSlice(rng, g.N*g.OC*g.OH*g.OW))
			wantY, wantDX, wantDW, magY, magDX, magDW := convRef(g, x, w, b, dy)
			c := NewConv(g)

			y := make([]uint16, len(wantY))
			for j := range y {
				y[j] = nan16
			}
			panel := make([]uint16, c.ForwardPanelLenBF16())
			c.PackForwardBF16(panel, wb)
			scratch := make([]float32, c.ForwardScratchLenBF16())
			for n := range g.N {
				c.ForwardBF16(y, xb, panel, b, n, scratch)
			}
			checkCloseBF16(t, "y", y, wantY, magY)

			dx := make([]uint16, len(wantDX))
			for j := range dx {
				dx[j] = nan16
			}
			panel = make([]uint16, c.InputGradPanelLenBF16())
			c.PackInputGradBF16(panel, wb)
			scratch = make([]float32, c.InputGradScratchLenBF16())
			for n := range g.N {
				c.InputGradBF16(dx, dyb, panel, n, scratch)
			}
			checkCloseBF16(t, "dx", dx, wantDX, magDX)

			for _, chunk := range []int{g.N, 1} {
				dw := make([]float32, len(wantDW))
				for j := range dw {
					dw[j] = float32(math.NaN())
				}
				per := c.WeightGradPrepLenBF16()
				src := make([]float32, chunk*per)
				scr := make([]float32, c.WeightGradScratchLenBF16())
				acc := make([]float32, c.WeightGradAccLenBF16())
				for n0 := 0; n0 < g.N; n0 += chunk {
					nb := min(chunk, g.N-n0)
					for i := range nb {
						c.PrepWeightGradBF16(src[i*per:(i+1)*per], dyb, xb, n0+i, scr)
					}
					for p := range c.WeightGradPiecesBF16() {
						c.WeightGradBF16(acc, src, nb, p, n0 == 0)
					}
				}
				c.FinishWeightGradBF16(dw, acc)
				checkClose(t, fmt.Sprintf("dw (chunks of %d)", chunk), dw, wantDW, magDW)
			}
		})
	}
}

// resnetConvs are ResNet-20's convolution shapes at one image (the
// benchmarks time one image's work; a step is 128 of them per layer).
var resnetConvs = []struct {
	name string
	g    ConvGeom
}{
	{"stage1-16x32x32-k3", convGeom(1, 16, 32, 32, 16, 3, 1, 1)},
	{"down2-16x32x32-k3s2", convGeom(1, 16, 32, 32, 32, 3, 2, 1)},
	{"proj2-16x32x32-k1s2", convGeom(1, 16, 32, 32, 32, 1, 2, 0)},
	{"stage2-32x16x16-k3", convGeom(1, 32, 16, 16, 32, 3, 1, 1)},
	{"stage3-64x8x8-k3", convGeom(1, 64, 8, 8, 64, 3, 1, 1)},
}

// BenchmarkDirectConv times the direct kernels on ResNet-20's shapes, one
// image (weight gradient: 16 images) per operation, F32 and BF16, and
// reports GFLOP/s (2 flops a multiply-add) per wall and per CPU second.
func BenchmarkDirectConv(b *testing.B) {
	for _, rc := range resnetConvs {
		for _, bf := range []bool{false, true} {
			if bf && !amxConvOK() || !directConv {
				continue
			}
			dt := "f32"
			if bf {
				dt = "bf16"
			}
			g := rc.g
			macs := float64(g.OC * g.C * g.KH * g.KW * g.OH * g.OW)
			const nw = 16
			gw := g
			gw.N = nw
			c, cw := NewConv(g), NewConv(gw)
			rng := rand.New(rand.NewPCG(1, 2))
			x, w, dy := randSlice(rng, nw*g.C*g.H*g.W), randSlice(rng, g.OC*g.C*g.KH*g.KW), randSlice(rng, nw*g.OC*g.OH*g.OW)
			xb, _ := bf16Slice(x)
			wb, _ := bf16Slice(w)
			dyb, _ := bf16Slice(dy)
			b.Run(rc.name+"/fwd/"+dt, func(b *testing.B) {
				m := startCPU()
				if bf {
					y, panel, scr := make([]uint16, g.OC*g.OH*g.OW), make([]uint16, c.ForwardPanelLenBF16()), make([]float32, c.ForwardScratchLenBF16())
					c.PackForwardBF16(panel, wb)
					for b.Loop() {
						c.ForwardBF16(y, xb, panel, nil, 0, scr)
					}
				} else {
					y, panel, scr := make([]float32, g.OC*g.OH*g.OW), make([]float32, c.ForwardPanelLen()), make([]float32, c.ForwardScratchLen())
					c.PackForward(panel, w)
					for b.Loop() {
						c.Forward(y, x, panel, nil, 0, scr)
					}
				}
				m.report(b, 2*macs)
				b.ReportMetric(2*macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(rc.name+"/dgrad/"+dt, func(b *testing.B) {
				m := startCPU()
				if bf {
					dx, panel, scr := make([]uint16, g.C*g.H*g.W), make([]uint16, c.InputGradPanelLenBF16()), make([]float32, c.InputGradScratchLenBF16())
					c.PackInputGradBF16(panel, wb)
					for b.Loop() {
						c.InputGradBF16(dx, dyb, panel, 0, scr)
					}
				} else {
					dx, panel, scr := make([]float32, g.C*g.H*g.W), make([]float32, c.InputGradPanelLen()), make([]float32, c.InputGradScratchLen())
					c.PackInputGrad(panel, w)
					for b.Loop() {
						c.InputGrad(dx, dy, panel, 0, scr)
					}
				}
				m.report(b, 2*macs)
				b.ReportMetric(2*macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(rc.name+"/wgrad16/"+dt, func(b *testing.B) {
				m := startCPU()
				dw := make([]float32, g.OC*g.C*g.KH*g.KW)
				if bf {
					per := cw.WeightGradPrepLenBF16()
					src, scr, acc := make([]float32, nw*per), make([]float32, cw.WeightGradScratchLenBF16()), make([]float32, cw.WeightGradAccLenBF16())
					for b.Loop() {
						for i := range nw {
							cw.PrepWeightGradBF16(src[i*per:(i+1)*per], dyb, xb, i, scr)
						}
						for p := range cw.WeightGradPiecesBF16() {
							cw.WeightGradBF16(acc, src, nw, p, true)
						}
						cw.FinishWeightGradBF16(dw, acc)
					}
				} else {
					per := cw.WeightGradPrepLen()
					src, scr, acc := make([]float32, nw*per), make([]float32, cw.WeightGradScratchLen()), make([]float32, cw.WeightGradAccLen())
					for b.Loop() {
						for i := range nw {
							cw.PrepWeightGrad(src[i*per:(i+1)*per], dy, x, i, scr)
						}
						for p := range cw.WeightGradPieces() {
							cw.WeightGrad(acc, src, nw, p, true)
						}
						cw.FinishWeightGrad(dw, acc)
					}
				}
				m.report(b, 2*macs*nw)
				b.ReportMetric(2*macs*nw*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
