package gemm

import "fmt"

// The F32 weight gradient: dw[oc][c][tap] = Σ_q dy[oc][q] x[c][q+tap] is a
// product whose k is the pixels of every image, and it runs as one, with
// an FMA micro-kernel of the GEMM's shape (genConvWgradF): a row of 16 or
// 32 output channels of dy per pixel, loaded as vectors, times 8 or 12
// input channels' pixels broadcast, into 16-24 accumulators that live in
// registers for the whole of a chunk of images. For that, each image is
// first laid out (PrepWeightGrad) as the BF16 path lays it out: the
// source in planes padded with zeros as far as the taps reach, outputs
// indexed on the padded width (a tap is then a constant offset, and no
// lane needs a mask), and dy transposed into rows of output channels, zero
// in the grid's columns past the image.

// fmaWgt is the F32 weight gradient planned: outputs on a grid of oh rows
// of wq (the padded source's width), g pixels an image; the source in
// nph phases of cp padded planes of hq x wq (plane floats apart, the
// source at (mt, ml)); dy transposed into g rows of ocp output channels;
// and the tiles.
type fmaWgt struct {
	oh, ow, wq, hq, mt, ml, g int
	srcC, cp, nph, hs, ws     int
	oc, ocp, plane            int
	tiles                     []fmaTile
	acc                       int // floats of all the tiles' accumulators
}

// fmaTile is one kernel call's part of the weight gradient: 16nv output
// channels from o0, input channels c0 + j + 4*col for j < 4, col < cols,
// at tap k, whose source pixel for grid pixel 0 is off floats into a
// prepared image; its accumulators at acc.
type fmaTile struct {
	o0, nv, c0, cols, k, off, acc int
}

func newFMAWgt(oh, ow, oc, srcC, nph, hs, ws int, taps []ctap) *fmaWgt {
	a := &fmaWgt{oh: oh, ow: ow, oc: oc, srcC: srcC, nph: nph, hs: hs, ws: ws}
	var far int
	a.mt, a.ml, a.hq, a.wq, far = tapMargins(oh, ow, hs, ws, taps)
	a.g = oh * a.wq
	a.ocp = (oc + 15) &^ 15
	// Input channels in groups of 4*cols: with 32 output channels to a
	// tile, 12 while more than 8 are left, then 8 or 4 (16 = 8+8, 32 =
	// 12+12+8, 64 = 12*4+8+8); with 16 (a convolution's last 16 or
	// fewer), 16 at a time, then 8 or 4. Both keep 16-24 accumulators.
	groups := func(wide bool) (gs [][2]int) {
		for c0 := 0; c0 < srcC; {
			left, cols := srcC-c0, 1
			switch {
			case !wide && left > 8:
				cols = 4
			case wide && left > 8 && left != 16:
				cols = 3
			case left > 4:
				cols = 2
			}
			gs = append(gs, [2]int{c0, cols})
			c0 += 4 * cols
		}
		return gs
	}
	for _, wide := range []bool{true, false} {
		gs := groups(wide)
		last := gs[len(gs)-1]
		a.cp = max(a.cp, last[0]+4*last[1])
	}
	// The last image's pixels read up to the grid's end past the furthest
	// tap.
	a.plane = max(a.hq*a.wq, a.g+far) + 16
	for o0 := 0; o0 < oc; o0 += 32 {
		nv := 2
		if oc-o0 <= 16 {
			nv = 1
		}
		for _, t := range taps {
			for _, cg := range groups(nv == 2) {
				off := (t.phase*a.cp+cg[0])*a.plane + (t.dh+a.mt)*a.wq + t.dw + a.ml
				a.tiles = append(a.tiles, fmaTile{o0: o0, nv: nv, c0: cg[0], cols: cg[1], k: t.k, off: off, acc: a.acc})
				a.acc += 4 * cg[1] * 16 * nv
			}
		}
	}
	return a
}

// srcLen and dyLen are the floats of one image's padded source and its
// transposed dy.
func (a *fmaWgt) srcLen() int { return a.nph * a.cp * a.plane }
func (a *fmaWgt) dyLen() int  { return a.g * a.ocp }

// WeightGradPrepLen is the floats one image of a weight-gradient chunk
// takes once prepared (PrepWeightGrad).
func (c *Conv) WeightGradPrepLen() int { return c.wgt.srcLen() + c.wgt.dyLen() }

// WeightGradScratchLen is the floats of scratch one worker's
// PrepWeightGrad needs: dy on the grid, and the image's phases.
func (c *Conv) WeightGradScratchLen() int { return c.wgt.ocp*c.wgt.g + c.SplitLen() }

// PrepWeightGrad lays image n of x and dy out for the weight gradient's
// kernels into dst (WeightGradPrepLen floats), whose padding must be zero
// (dst is only ever written where the image goes); scratch
// (WeightGradScratchLen floats) likewise.
func (c *Conv) PrepWeightGrad(dst, dy, x []float32, n int, scratch []float32) {
	g := c.g
	w := c.wgt
	hw, ohw := g.H*g.W, g.OH*g.OW
	if n < 0 || n >= g.N || len(dst) < c.WeightGradPrepLen() || len(dy) < (n+1)*g.OC*ohw || len(x) < (n+1)*g.C*hw || len(scratch) < c.WeightGradScratchLen() {
		panic(fmt.Sprintf("gemm: PrepWeightGrad: image %d, dst %d, dy %d, x %d, scratch %d for %+v", n, len(dst), len(dy), len(x), len(scratch), g))
	}
	img := x[n*g.C*hw : (n+1)*g.C*hw]
	pad := scratch[:w.ocp*w.g]
	if l := c.SplitLen(); l > 0 {
		ph := scratch[w.ocp*w.g:][:l]
		splitImage(c, ph, img)
		img = ph
	}
	plane := w.hs * w.ws
	for p := 0; p < w.nph; p++ {
		for ch := 0; ch < g.C; ch++ {
			o := (p*w.cp+ch)*w.plane + w.mt*w.wq + w.ml
			copyRows32(ptr(dst, o), w.wq, ptr(img, (p*g.C+ch)*plane), w.ws, w.hs, w.ws)
		}
	}
	// dy onto the grid (zero past each row's ow columns), then transposed
	// into a row of output channels per pixel.
	for o := 0; o < g.OC; o++ {
		copyRows32(ptr(pad, o*w.g), w.wq, ptr(dy, (n*g.OC+o)*ohw), g.OW, g.OH, g.OW)
	}
	transposeWords(dst[w.srcLen():w.srcLen()+w.dyLen()], w.ocp, pad, w.g, w.ocp, w.g)
}

// WeightGradPieces is how many pieces WeightGrad is cut into: its tiles.
func (c *Conv) WeightGradPieces() int { return len(c.wgt.tiles) }

// WeightGradAccLen is the floats of the accumulators that WeightGrad
// keeps between chunks.
func (c *Conv) WeightGradAccLen() int { return c.wgt.acc }

// WeightGrad adds piece's part of the weight gradient of nb prepared
// images (src, WeightGradPrepLen floats each) to acc, or sets it when
// first. Pieces write disjoint parts of acc, so they can run at once; a
// piece's images add in the order of the calls.
func (c *Conv) WeightGrad(acc, src []float32, nb, piece int, first bool) {
	w := c.wgt
	if piece < 0 || piece >= len(w.tiles) || nb < 1 || len(acc) < w.acc || len(src) < nb*c.WeightGradPrepLen() {
		panic(fmt.Sprintf("gemm: WeightGrad: piece %d, %d images, acc %d, src %d for %+v", piece, nb, len(acc), len(src), c.g))
	}
	t := w.tiles[piece]
	f := 0
	if first {
		f = 1
	}
	per := 4 * c.WeightGradPrepLen()
	ap, dp, xp := &acc[t.acc], &src[w.srcLen()+t.o0], &src[t.off]
	wgradKernels[t.cols-1][t.nv-1](ap, dp, 4*w.ocp, xp, 4*w.plane, 16*w.plane, w.g, nb, per, f)
}

// wgradKernels are genConvWgradF's kernels by cols-1 and nv-1 (nil where
// there is none: 32 accumulators would not fit).
var wgradKernels = [4][2]func(acc, dyT *float32, ldq int, x *float32, planeB, colStride, npix, nimg, imgStride, first int){
	{convWgrad16x4, convWgrad32x4},
	{convWgrad16x8, convWgrad32x8},
	{nil, convWgrad32x12},
	{convWgrad16x16, nil},
}

// FinishWeightGrad writes the accumulated weight gradient into dw (OC, C,
// KH, KW).
func (c *Conv) FinishWeightGrad(dw, acc []float32) {
	g := c.g
	w := c.wgt
	kk := g.KH * g.KW
	_ = dw[g.OC*g.C*kk-1]
	_ = acc[w.acc-1]
	for _, t := range w.tiles {
		n := 16 * t.nv
		for col := 0; col < t.cols; col++ {
			for j := 0; j < 4; j++ {
				ch := t.c0 + j + 4*col
				if ch >= g.C {
					continue
				}
				row := acc[t.acc+(col*4+j)*n : t.acc+(col*4+j+1)*n]
				for q, v := range row {
					if o := t.o0 + q; o < g.OC {
						dw[(o*g.C+ch)*kk+t.k] = v
					}
				}
			}
		}
	}
}
