package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// convCase is a named convolution geometry.
type convCase struct {
	name string
	s    device.ConvShape
}

func convCases() []convCase {
	sub := device.NewConvShape(4, 3, 6, 5, 3, 3, 1, 1)
	sub.N0, sub.NB = 1, 2
	last := device.NewConvShape(3, 2, 5, 5, 3, 3, 2, 1)
	last.N0, last.NB = 2, 1
	// A non-square kernel with different strides and paddings per axis.
	rect := device.ConvShape{N: 2, C: 2, H: 7, W: 6, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 0}
	rect.OH, rect.OW, rect.NB = (7+2-3)/2+1, (6-2)/1+1, 2
	return []convCase{
		{"k3s1p1/2x3x5x5", device.NewConvShape(2, 3, 5, 5, 3, 3, 1, 1)},
		{"k3s2p0/1x2x7x6", device.NewConvShape(1, 2, 7, 6, 3, 3, 2, 0)},
		{"k3s2p1/2x2x8x8", device.NewConvShape(2, 2, 8, 8, 3, 3, 2, 1)},
		{"k5s1p2/3x1x8x9", device.NewConvShape(3, 1, 8, 9, 5, 5, 1, 2)},
		{"k5s2p2/1x2x9x7", device.NewConvShape(1, 2, 9, 7, 5, 5, 2, 2)},
		{"k1s1p0/2x4x4x4", device.NewConvShape(2, 4, 4, 4, 1, 1, 1, 0)},
		{"k1s2p0/1x3x5x6", device.NewConvShape(1, 3, 5, 6, 1, 1, 2, 0)},
		{"k3s1p2/1x1x3x4", device.NewConvShape(1, 1, 3, 4, 3, 3, 1, 2)},
		{"rect/k3x2s2x1p1x0", rect},
		{"sub/N0=1,NB=2", sub},
		{"sub/N0=2,NB=1", last},
		{"large/2x16x28x28", device.NewConvShape(2, 16, 28, 28, 3, 3, 1, 1)},
	}
}

// im2colRef maps each col element to the x element it reads, or -1 for
// padding. col (NB, C*KH*KW, OH*OW); x (N, C, H, W).
func im2colRef(s device.ConvShape) []int {
	ohw, kk := s.OH*s.OW, s.KH*s.KW
	src := make([]int, s.NB*s.C*kk*ohw)
	for nb := range s.NB {
		for c := range s.C {
			for kh := range s.KH {
				for kw := range s.KW {
					for oh := range s.OH {
						for ow := range s.OW {
							i := (((nb*s.C+c)*kk+kh*s.KW+kw)*s.OH+oh)*s.OW + ow
							ih, iw := oh*s.StrideH-s.PadH+kh, ow*s.StrideW-s.PadW+kw
							if ih < 0 || ih >= s.H || iw < 0 || iw >= s.W {
								src[i] = -1
								continue
							}
							src[i] = (((s.N0+nb)*s.C+c)*s.H+ih)*s.W + iw
						}
					}
				}
			}
		}
	}
	return src
}

// convTypes are (col; x) for Im2Col, and (dx; col) for Col2Im.
var convTypes = sameAnd(1, mix(dtype.F16, dtype.F32), mix(dtype.F32, dtype.BF16))

func testIm2Col(t *testing.T, dev device.Device) {
	for _, ty := range convTypes {
		for _, c := range convCases() {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				s := c.s
				x := e.uniform(s.N*s.C*s.H*s.W, -2, 2)
				xb := e.put(ty.src[0], x)
				src := im2colRef(s)
				got := e.output(ty.dst, len(src), func(cb device.Buffer) {
					e.dev.Im2Col(cb, xb, s)
				})
				want := make([]float32, len(src))
				for i, j := range src {
					if j >= 0 {
						want[i] = dtype.Round(ty.dst, x[j])
					}
				}
				e.exact("col", got, want)
			})
		}
	}
}

func testCol2Im(t *testing.T, dev device.Device) {
	for _, ty := range convTypes {
		for _, c := range convCases() {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				s := c.s
				src := im2colRef(s)
				col := e.uniform(len(src), -2, 2)
				cb := e.put(ty.src[0], col)
				n := s.N * s.C * s.H * s.W
				plane := s.C * s.H * s.W
				// Images outside [N0, N0+NB) keep what they held.
				outside := e.uniform(n, -3, 3)
				roundTo(ty.dst, outside)
				got := e.twice(func(fill float32) [][]float32 {
					h := append([]float32(nil), outside...)
					for i := s.N0 * plane; i < (s.N0+s.NB)*plane; i++ {
						h[i] = fill
					}
					db := e.put(ty.dst, h)
					e.dev.Col2Im(db, cb, s)
					return [][]float32{e.get(db)}
				})[0]
				want := make([]float64, n)
				for i, j := range src {
					if j >= 0 {
						want[j] += float64(col[i])
					}
				}
				lo, hi := s.N0*plane, (s.N0+s.NB)*plane
				e.near("dx (images N0..N0+NB)", ty.dst, got[lo:hi], want[lo:hi], nil)
				e.exact("dx (images before N0)", got[:lo], outside[:lo])
				e.exact("dx (images after N0+NB)", got[hi:], outside[hi:])
			})
		}
	}
}

// testIm2ColAdjoint checks <Im2Col(x), y> == <x, Col2Im(y)> on the images
// the call covers.
func testIm2ColAdjoint(t *testing.T, dev device.Device) {
	for _, c := range convCases() {
		run(t, dev, c.name, func(e *env) {
			s := c.s
			n := s.N * s.C * s.H * s.W
			m := s.NB * s.C * s.KH * s.KW * s.OH * s.OW
			x, y := e.uniform(n, -1, 1), e.uniform(m, -1, 1)
			plane := s.C * s.H * s.W
			for i := range x { // only the covered images take part
				if i < s.N0*plane || i >= (s.N0+s.NB)*plane {
					x[i] = 0
				}
			}
			xb, yb := e.put(dtype.F32, x), e.put(dtype.F32, y)
			cx, dy := e.alloc(dtype.F32, m), e.full(dtype.F32, n, 0)
			e.dev.Im2Col(cx, xb, s)
			e.dev.Col2Im(dy, yb, s)
			e.checkAdjoint("Im2Col, Col2Im", e.get(cx), y, x, e.get(dy))
		})
	}
}

// testDirectConv checks device.DirectConvKernels where a backend has it,
// in every dtype it says it runs: ConvForward, ConvInputGrad and
// ConvWeightGrad against a float64 reference on each whole-batch shape of
// convCases and a few with more channels (odd sizes, one image, strides
// 1 and 2, 1x1 and 3x3 kernels, 5 output channels for partial tiles, a
// batch of 9 32x32 images),
// each output pre-filled with NaN and then with another value, so that
// every element must be written.
func testDirectConv(t *testing.T, dev device.Device) {
	dc, ok := optional[device.DirectConvKernels](dev)
	if !ok {
		t.Skip("the backend does not implement the optional device.DirectConvKernels")
	}
	type dcase struct {
		name string
		s    device.ConvShape
		oc   int
	}
	var cases []dcase
	for _, c := range convCases() {
		if c.s.N0 == 0 && c.s.NB == c.s.N {
			cases = append(cases, dcase{c.name, c.s, 5})
		}
	}
	cases = append(cases,
		dcase{"resnet-stage/2x16x8x8-oc16", device.NewConvShape(2, 16, 8, 8, 3, 3, 1, 1), 16},
		dcase{"resnet-down/2x16x9x9-oc32", device.NewConvShape(2, 16, 9, 9, 3, 3, 2, 1), 32},
		dcase{"resnet-proj/1x16x8x8-oc32", device.NewConvShape(1, 16, 8, 8, 1, 1, 2, 0), 32},
		dcase{"wide-row/1x3x3x37-oc9", device.NewConvShape(1, 3, 3, 37, 3, 3, 1, 1), 9},
		// A batch a backend may cut into chunks (the CPU's weight gradient
		// lays out 7 images of this shape at a time, in F32).
		dcase{"resnet-batch/9x16x32x32-oc16", device.NewConvShape(9, 16, 32, 32, 3, 3, 1, 1), 16})
	ran := false
	for _, dt := range dtype.All {
		for _, c := range cases {
			if !dc.DirectConv(c.s, c.oc, dt) {
				continue
			}
			ran = true
			run(t, dev, fmt.Sprintf("%v/%s", dt, c.name), func(e *env) { checkDirectConv(e, dc, dt, c.s, c.oc) })
		}
	}
	if !ran {
		t.Skip("DirectConv runs none of the cases on this machine")
	}
}

func checkDirectConv(e *env, dc device.DirectConvKernels, dt dtype.DType, s device.ConvShape, oc int) {
	kk, hw, ohw := s.KH*s.KW, s.H*s.W, s.OH*s.OW
	x, w, b := e.uniform(s.N*s.C*hw, -1, 1), e.uniform(oc*s.C*kk, -1, 1), e.uniform(oc, -1, 1)
	dy := e.uniform(s.N*oc*ohw, -1, 1)
	xb, wb, bb, dyb := e.put(dt, x), e.put(dt, w), e.put(dt, b), e.put(dt, dy)
	// The float64 reference and, per element, the sum of its terms'
	// magnitudes for the slack of a float32 sum.
	y, dx, dw := make([]float64, s.N*oc*ohw), make([]float64, s.N*s.C*hw), make([]float64, oc*s.C*kk)
	my, mdx, mdw := make([]float64, len(y)), make([]float64, len(dx)), make([]float64, len(dw))
	for n := range s.N {
		for o := range oc {
			for oh := range s.OH {
				for ow := range s.OW {
					yi := (n*oc+o)*ohw + oh*s.OW + ow
					y[yi], my[yi] = float64(b[o]), math.Abs(float64(b[o]))
					for c := range s.C {
						for kh := range s.KH {
							for kw := range s.KW {
								r, q := oh*s.StrideH+kh-s.PadH, ow*s.StrideW+kw-s.PadW
								if r < 0 || r >= s.H || q < 0 || q >= s.W {
									continue
								}
								xi, wi := (n*s.C+c)*hw+r*s.W+q, (o*s.C+c)*kk+kh*s.KW+kw
								xv, wv, gv := float64(x[xi]), float64(w[wi]), float64(dy[yi])
								y[yi] += wv * xv
								my[yi] += math.Abs(wv * xv)
								dx[xi] += wv * gv
								mdx[xi] += math.Abs(wv * gv)
								dw[wi] += gv * xv
								mdw[wi] += math.Abs(gv * xv)
							}
						}
					}
				}
			}
		}
	}
	slack := func(m []float64, n int) []float64 {
		out := make([]float64, len(m))
		for i, v := range m {
			out[i] = sumSlack(n, v)
		}
		return out
	}
	got := e.twice(func(fill float32) [][]float32 {
		yb, dxb, dwb := e.full(dt, len(y), fill), e.full(dt, len(dx), fill), e.full(dtype.F32, len(dw), fill)
		dc.ConvForward(yb, xb, wb, bb, s, oc)
		dc.ConvInputGrad(dxb, dyb, wb, s, oc)
		dc.ConvWeightGrad(dwb, dyb, xb, s, oc)
		return [][]float32{e.get(yb), e.get(dxb), e.get(dwb)}
	})
	e.near("y", dt, got[0], y, slack(my, s.C*kk+1))
	e.near("dx", dt, got[1], dx, slack(mdx, oc*kk))
	e.near("dw", dtype.F32, got[2], dw, slack(mdw, s.N*ohw))
	// Without a bias, y is the product alone.
	yb := e.full(dt, len(y), nan)
	dc.ConvForward(yb, xb, wb, nil, s, oc)
	for i := range y {
		y[i] -= float64(b[i/ohw%oc])
	}
	e.near("y without bias", dt, e.get(yb), y, slack(my, s.C*kk+1))
}

// poolCase is a named pooling geometry.
type poolCase struct {
	name string
	s    device.PoolShape
}

func poolCases() []poolCase {
	rect := device.PoolShape{N: 2, C: 2, H: 7, W: 8, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 1}
	rect.OH, rect.OW = (7+2-3)/2+1, (8+2-2)/1+1
	return []poolCase{
		{"k2s2/2x3x6x6", device.NewPoolShape(2, 3, 6, 6, 2, 2, 0)},
		{"k2s2/odd/1x2x7x5", device.NewPoolShape(1, 2, 7, 5, 2, 2, 0)},
		{"k3s2p1/2x2x7x7", device.NewPoolShape(2, 2, 7, 7, 3, 2, 1)},
		{"k3s2p1/1x3x8x8", device.NewPoolShape(1, 3, 8, 8, 3, 2, 1)},
		{"k3s1p1/overlap/1x2x5x6", device.NewPoolShape(1, 2, 5, 6, 3, 1, 1)},
		{"k5s2p2/1x1x9x7", device.NewPoolShape(1, 1, 9, 7, 5, 2, 2)},
		{"k1s1/1x2x3x3", device.NewPoolShape(1, 2, 3, 3, 1, 1, 0)},
		{"rect/k3x2s2x1p1", rect},
		{"large/8x16x32x32", device.NewPoolShape(8, 16, 32, 32, 2, 2, 0)},
	}
}

// poolWindow calls f with the input offsets (within the plane) of output
// (oh, ow)'s window, clipped to the image, in row-major order.
func poolWindow(s device.PoolShape, oh, ow int, f func(j int)) {
	for kh := range s.KH {
		ih := oh*s.StrideH - s.PadH + kh
		if ih < 0 || ih >= s.H {
			continue
		}
		for kw := range s.KW {
			iw := ow*s.StrideW - s.PadW + kw
			if iw >= 0 && iw < s.W {
				f(ih*s.W + iw)
			}
		}
	}
}

// maxPoolRef returns, for each output, the input index MaxPool chooses: the
// first maximum of the window in row-major order (padding never wins), or
// the last NaN when the window holds any, as PyTorch's max_pool2d chooses
// (its return_indices, and where its backward sends the gradient).
func maxPoolRef(s device.PoolShape, x []float32) []int {
	hw, ohw := s.H*s.W, s.OH*s.OW
	arg := make([]int, s.N*s.C*ohw)
	for p := range s.N * s.C {
		for oh := range s.OH {
			for ow := range s.OW {
				best := -1
				poolWindow(s, oh, ow, func(j int) {
					v := x[p*hw+j]
					if best < 0 || v > x[best] || isNaN32(v) {
						best = p*hw + j
					}
				})
				arg[p*ohw+oh*s.OW+ow] = best
			}
		}
	}
	return arg
}

// windowPos turns maxPoolRef's input indices into what MaxPool writes to
// arg: each element's position kh*KW + kw in its window, counted from the
// window's corner before clipping.
func windowPos(s device.PoolShape, arg []int) []float32 {
	hw, ohw := s.H*s.W, s.OH*s.OW
	pos := make([]float32, len(arg))
	for i, j := range arg {
		o := i % ohw
		oh, ow := o/s.OW, o%s.OW
		ih, iw := (j%hw)/s.W, j%s.W
		pos[i] = float32((ih-(oh*s.StrideH-s.PadH))*s.KW + iw - (ow*s.StrideW - s.PadW))
	}
	return pos
}

// checkMaxPool runs MaxPool on x, stored as xdt, into y (ydt) and arg
// (adt), and requires both bit for bit; then again without arg, which must
// give the same y.
func (e *env) checkMaxPool(s device.PoolShape, x []float32, ydt, xdt, adt dtype.DType) {
	xb := e.put(xdt, x)
	ny := s.N * s.C * s.OH * s.OW
	got := e.twice(func(fill float32) [][]float32 {
		yb, ab := e.full(ydt, ny, fill), e.full(adt, ny, fill)
		e.dev.MaxPool(yb, ab, xb, s)
		return [][]float32{e.get(yb), e.get(ab)}
	})
	ref := maxPoolRef(s, x)
	want := make([]float32, len(ref))
	for i, j := range ref {
		want[i] = dtype.Round(ydt, x[j])
	}
	e.exact("y", got[0], want)
	e.exact("arg", got[1], windowPos(s, ref))
	yb := e.full(ydt, ny, nan)
	e.dev.MaxPool(yb, nil, xb, s)
	e.exact("y (arg nil)", e.get(yb), want)
}

// poolInput returns pooling inputs: small integers for cases with ties
// (many windows then hold several maxima), else uniform values.
func (e *env) poolInput(n int, ties bool) []float32 {
	if ties {
		return e.ints(n, -3, 3)
	}
	return e.uniform(n, -2, 2)
}

var poolTypes = sameAnd(1, mix(dtype.F32, dtype.F16), mix(dtype.BF16, dtype.F32))

// poolArgTypes are the dtypes arg is stored in, one per poolTypes entry,
// so that each of the three is written by some case, BF16 (the narrowest)
// next to F32 values among them.
var poolArgTypes = []dtype.DType{dtype.BF16, dtype.F16, dtype.F32, dtype.F16, dtype.BF16}

func testMaxPool(t *testing.T, dev device.Device) {
	for i, ty := range poolTypes {
		for _, c := range poolCases() {
			for _, ties := range []bool{false, true} {
				run(t, dev, fmt.Sprintf("%v,arg=%v/%s/ties=%v", ty, poolArgTypes[i], c.name, ties), func(e *env) {
					s := c.s
					e.checkMaxPool(s, e.poolInput(s.N*s.C*s.H*s.W, ties), ty.dst, ty.src[0], poolArgTypes[i])
				})
			}
		}
	}
	testMaxPoolArgFits(t, dev)
	testMaxPoolNaN(t, dev)
}

// testMaxPoolArgFits: an arg dtype that cannot hold every window position
// exactly is refused, and one that can is accepted, at the edges of BF16's
// and F16's integers (256 and 2048).
func testMaxPoolArgFits(t *testing.T, dev device.Device) {
	cases := []struct {
		adt  dtype.DType
		k    int
		fits bool
	}{
		{dtype.BF16, 16, true}, // positions up to 255
		{dtype.BF16, 17, false},
		{dtype.F16, 45, true}, // up to 2024
		{dtype.F16, 46, false},
		{dtype.F32, 46, true},
	}
	for _, c := range cases {
		run(t, dev, fmt.Sprintf("argfits/%v/k%d", c.adt, c.k), func(e *env) {
			s := device.NewPoolShape(1, 1, c.k, c.k, c.k, 1, 0)
			if got := s.ArgFits(c.adt); got != c.fits {
				e.t.Fatalf("PoolShape{KH: %d, KW: %d}.ArgFits(%v) = %v, want %v", c.k, c.k, c.adt, got, c.fits)
			}
			xb := e.put(dtype.F32, e.uniform(c.k*c.k, -1, 1))
			yb, ab := e.alloc(dtype.F32, 1), e.alloc(c.adt, 1)
			if !c.fits {
				mustPanic(e.t, fmt.Sprintf("MaxPool with a %v arg and a %dx%d window", c.adt, c.k, c.k), func() { e.dev.MaxPool(yb, ab, xb, s) })
				return
			}
			e.dev.MaxPool(yb, ab, xb, s)
		})
	}
}

// maxPoolGradTypes are MaxPoolGrad's dtype combinations: dx; dy, arg.
var maxPoolGradTypes = sameAnd(2, mix(dtype.F32, dtype.F16, dtype.F16), mix(dtype.BF16, dtype.F32, dtype.BF16))

// maxPoolGradRef is dx for dy routed through MaxPool's choices on x.
func maxPoolGradRef(s device.PoolShape, x, dy []float32) []float64 {
	want := make([]float64, s.N*s.C*s.H*s.W)
	for i, j := range maxPoolRef(s, x) {
		want[j] += float64(dy[i])
	}
	return want
}

// checkMaxPoolGrad runs MaxPoolGrad on dy and MaxPool's choices ab on x,
// and compares it with dy routed through the reference's choices.
func (e *env) checkMaxPoolGrad(s device.PoolShape, ty dtCase, x, dy []float32, ab device.Buffer) {
	e.t.Helper()
	n := s.N * s.C * s.H * s.W
	dyb := e.put(ty.src[0], dy)
	got := e.output(ty.dst, n, func(db device.Buffer) {
		e.dev.MaxPoolGrad(db, dyb, ab, s)
	})
	e.near("dx", ty.dst, got, maxPoolGradRef(s, x, dy), nil)
}

func testMaxPoolGrad(t *testing.T, dev device.Device) {
	for _, ty := range maxPoolGradTypes {
		for _, c := range poolCases() {
			for _, ties := range []bool{false, true} {
				run(t, dev, fmt.Sprintf("%v/%s/ties=%v", ty, c.name, ties), func(e *env) {
					s := c.s
					n := s.N * s.C * s.H * s.W
					x := e.poolInput(n, ties)
					dy := e.uniform(s.N*s.C*s.OH*s.OW, -1, 1)
					e.checkMaxPoolGrad(s, ty, x, dy, e.put(ty.src[1], windowPos(s, maxPoolRef(s, x))))
				})
			}
		}
	}
	testMaxPoolGradNaN(t, dev)
}

// The AvgPool divisor: PyTorch's count_include_pad=True divides by the
// window clipped to the padded image, (min(h0+KH, H+PadH) - h0) times the
// same across, with h0 = oh*StrideH - PadH. In floor mode (the only one
// PoolShape has) a window never passes the padded edge, so that is always
// KH*KW; the reference computes it anyway, so a ceil mode would be caught.
func avgDivisor(s device.PoolShape, oh, ow int) float64 {
	h0, w0 := oh*s.StrideH-s.PadH, ow*s.StrideW-s.PadW
	h1, w1 := min(h0+s.KH, s.H+s.PadH), min(w0+s.KW, s.W+s.PadW)
	return float64((h1 - h0) * (w1 - w0))
}

func testAvgPool(t *testing.T, dev device.Device) {
	eachPool(t, dev, "", func(e *env, s device.PoolShape, ty dtCase) {
		e.checkAvgPool(s, ty, e.uniform(s.N*s.C*s.H*s.W, -2, 2))
	})
	testAvgPoolNaN(t, dev)
}

func testAvgPoolGrad(t *testing.T, dev device.Device) {
	eachPool(t, dev, "", func(e *env, s device.PoolShape, ty dtCase) {
		e.checkAvgPoolGrad(s, ty, e.uniform(s.N*s.C*s.OH*s.OW, -1, 1))
	})
	testAvgPoolGradNaN(t, dev)
}

// eachPool runs check as a subtest "<prefix><dtypes>/<case>" for every
// dtype combination of poolTypes and every pool case.
func eachPool(t *testing.T, dev device.Device, prefix string, check func(e *env, s device.PoolShape, ty dtCase)) {
	t.Helper()
	for _, ty := range poolTypes {
		for _, c := range poolCases() {
			run(t, dev, fmt.Sprintf("%s%v/%s", prefix, ty, c.name), func(e *env) { check(e, c.s, ty) })
		}
	}
}

// checkAvgPool runs AvgPool on x and compares it with each window's mean,
// padding counted as zeros.
func (e *env) checkAvgPool(s device.PoolShape, ty dtCase, x []float32) {
	e.t.Helper()
	hw, ohw := s.H*s.W, s.OH*s.OW
	xb := e.put(ty.src[0], x)
	got := e.output(ty.dst, s.N*s.C*ohw, func(yb device.Buffer) {
		e.dev.AvgPool(yb, xb, s)
	})
	want := make([]float64, s.N*s.C*ohw)
	for p := range s.N * s.C {
		for oh := range s.OH {
			for ow := range s.OW {
				var sum float64
				poolWindow(s, oh, ow, func(j int) { sum += float64(x[p*hw+j]) })
				want[p*ohw+oh*s.OW+ow] = sum / avgDivisor(s, oh, ow)
			}
		}
	}
	e.near("y", ty.dst, got, want, nil)
}

// checkAvgPoolGrad runs AvgPoolGrad on dy and compares it with dy spread
// evenly over each window.
func (e *env) checkAvgPoolGrad(s device.PoolShape, ty dtCase, dy []float32) {
	e.t.Helper()
	hw, ohw := s.H*s.W, s.OH*s.OW
	n := s.N * s.C * hw
	dyb := e.put(ty.src[0], dy)
	got := e.output(ty.dst, n, func(db device.Buffer) {
		e.dev.AvgPoolGrad(db, dyb, s)
	})
	want := make([]float64, n)
	for p := range s.N * s.C {
		for oh := range s.OH {
			for ow := range s.OW {
				g := float64(dy[p*ohw+oh*s.OW+ow]) / avgDivisor(s, oh, ow)
				poolWindow(s, oh, ow, func(j int) { want[p*hw+j] += g })
			}
		}
	}
	e.near("dx", ty.dst, got, want, nil)
}

// testAvgPoolAdjoint checks <AvgPool(x), y> == <x, AvgPoolGrad(y)>.
func testAvgPoolAdjoint(t *testing.T, dev device.Device) {
	for _, c := range poolCases() {
		run(t, dev, c.name, func(e *env) {
			s := c.s
			n, m := s.N*s.C*s.H*s.W, s.N*s.C*s.OH*s.OW
			x, y := e.uniform(n, -1, 1), e.uniform(m, -1, 1)
			xb, yb := e.put(dtype.F32, x), e.put(dtype.F32, y)
			px, gy := e.alloc(dtype.F32, m), e.alloc(dtype.F32, n)
			e.dev.AvgPool(px, xb, s)
			e.dev.AvgPoolGrad(gy, yb, s)
			e.checkAdjoint("AvgPool, AvgPoolGrad", e.get(px), y, x, e.get(gy))
		})
	}
}
