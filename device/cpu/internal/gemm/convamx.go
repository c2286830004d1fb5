package gemm

import (
	"fmt"
	"unsafe"
)

// The BF16 direct convolution runs on AMX tiles. A tile load is a strided
// copy of 16 rows of 64 bytes and cannot mask lanes, so each pass first
// lays its source out so that every tile it needs is such a load:
//
//   - Forward and input gradient: C (16 output channels x 16 pixels of an
//     output row) += A (16 output channels x 16 pairs of input channels,
//     from a packed weight panel) times B (16 channel pairs x 16 pixels).
//     The source is copied, image by image, into padded planes of channel
//     pairs, a pixel's two channels in one dword and a zero border as wide
//     as the taps reach: B is then rows of 64 contiguous bytes, one
//     plane apart, at the tap's offset (interleaveRows). The C tiles are
//     rounded to bfloat16 with the bias as they are stored.
//   - Weight gradient: C (16 input channels x 16 output channels, one tap)
//     += A (16 channels x 32 pixels of the padded source plane, at the
//     tap's offset) times B (16 pixel pairs x 16 output channels: dy,
//     transposed in dwords). Outputs are indexed on the padded source's
//     width, so a tap is a constant offset and dy is zero in the columns
//     past the image; the tiles accumulate in F32 over every pixel of
//     every image.
//
// A stride above 1 splits the source into phases first, as for F32.

// amxJob is one run of up to 32 output pixels of one row for the AMX
// forward kernels (12 bytes): its source offset for a tap at (0, 0), in
// dwords from the padded source's start, its first pixel in the output
// plane, and the lanes of its two 16-pixel tiles to store.
type amxJob struct {
	boff, yoff int32
	mask       [2]uint16
}

// amxFwd is a stride-1 correlation planned for the AMX forward kernels:
// output grid oh x ow; a source of srcC channels in nph phases of hs x ws,
// laid out as pair planes (pairs of them, in npt tiles of kp pairs) of hq
// x wq dwords with the source at (mt, ml), plane dwords apart; its taps'
// dword offsets and weight indices; its jobs of np tiles; and the tile
// configuration.
type amxFwd struct {
	oh, ow, srcC, nph, hs, ws int
	pairs, kp, npt            int
	hq, wq, mt, ml, plane     int
	taps                      []int32
	tapK                      []int
	jobs                      []amxJob
	np                        int
	cfg                       [64]byte
}

// tileCfg writes an AMX tile configuration (palette 1): tmm0-3 16 rows of
// 64 bytes, tmm4-5 16 rows of aCols bytes, tmm6-7 bRows rows of 64 bytes.
func tileCfg(aCols, bRows int) (c [64]byte) {
	c[0] = 1
	for t := 0; t < 8; t++ {
		cols, rows := 64, 16
		switch {
		case t == 4 || t == 5:
			cols = aCols
		case t >= 6:
			rows = bRows
		}
		c[16+2*t], c[17+2*t] = byte(cols), byte(cols>>8)
		c[48+t] = byte(rows)
	}
	return c
}

// newAMXFwd plans a correlation: output grid oh x ow, source of srcC
// channels in nph phases of hs x ws, and taps (phase, dh, dw, k) as for
// newCorr.
func newAMXFwd(oh, ow, srcC, nph, hs, ws int, taps []ctap) *amxFwd {
	a := &amxFwd{oh: oh, ow: ow, srcC: srcC, nph: nph, hs: hs, ws: ws}
	a.pairs = (srcC + 1) / 2
	a.kp = min(16, a.pairs)
	a.npt = (a.pairs + a.kp - 1) / a.kp
	a.np = 1
	if ow > 16 {
		a.np = 2
	}
	// Margins: every tap's reads of every output pixel's tile (up to 16np
	// pixels from a run's start, which may pass the row's end) land in the
	// padded plane or its slack.
	a.mt, a.ml, a.hq, a.wq, _ = tapMargins(oh, ow, hs, ws, taps)
	a.plane = a.hq*a.wq + 32*a.np + a.wq
	for _, t := range taps {
		a.taps = append(a.taps, int32(t.phase*a.npt*a.kp*a.plane+(t.dh+a.mt)*a.wq+t.dw+a.ml))
		a.tapK = append(a.tapK, t.k)
	}
	for r := 0; r < oh; r++ {
		for s := 0; s < ow; s += 16 * a.np {
			a.jobs = append(a.jobs, amxJob{boff: int32(r*a.wq + s), yoff: int32(r*ow + s),
				mask: [2]uint16{uint16(lanes(min(16, ow-s))), uint16(lanes(max(0, min(16, ow-s-16))))}})
		}
	}
	a.cfg = tileCfg(4*a.kp, a.kp)
	return a
}

// srcLen is the dwords of one image's padded source.
func (a *amxFwd) srcLen() int { return a.nph * a.npt * a.kp * a.plane }

// layout writes the padded pair planes of one image (nph phases of srcC
// planes of hs x ws bfloat16, phase after phase) into dst, whose border
// must be zero (it is never written).
func (a *amxFwd) layout(dst []uint32, src []uint16, idx *[64]uint16) {
	hw := a.hs * a.ws
	_ = src[a.nph*a.srcC*hw-1]
	_ = dst[a.srcLen()-1]
	for p := 0; p < a.nph; p++ {
		for cp := 0; cp < a.pairs; cp++ {
			lo := (p*a.srcC + 2*cp) * hw
			var hi *uint16
			if 2*cp+1 < a.srcC {
				hi = &src[lo+hw]
			}
			o := (p*a.npt*a.kp+cp)*a.plane + a.mt*a.wq + a.ml
			interleaveRows(&dst[o], a.wq, &src[lo], hi, a.ws, a.hs, a.ws, &idx[0])
		}
	}
}

// interleaveIdx is VPERMT2W's index for interleaveRows: output words 2k
// and 2k+1 are a[k] and b[k] (index 32+k), k from 0 in the first vector
// and from 16 in the second.
var interleaveIdx = func() (idx [64]uint16) {
	for k := 0; k < 32; k++ {
		idx[2*k], idx[2*k+1] = uint16(k%16+16*(k/16)), uint16(32+k%16+16*(k/16))
	}
	return idx
}()

// panelLen is the bfloat16 elements of a weight panel for m output rows.
func (a *amxFwd) panelLen(m int) int { return ((m + 15) / 16) * len(a.taps) * a.npt * 256 * 2 }

// pack writes the weight panel for m output rows: for each group of up to
// two 16-row tiles (groups), for each tap, for each pair tile, for each
// tile of the group, 16 rows of 32 bfloat16 (the tile's 16 pairs of
// source channels; zero past m and srcC). weight(o, c, k) is output row
// o's weight for source channel c at weight index k.
func (a *amxFwd) pack(panel []uint16, m int, weight func(o, c, k int) uint16) {
	if a.panelLen(m) == 0 {
		return
	}
	_ = panel[a.panelLen(m)-1]
	i := 0
	for g := 0; g < m; g += 32 {
		mo := amxGroup(m - g)
		for _, k := range a.tapK {
			for pt := 0; pt < a.npt; pt++ {
				for tl := 0; tl < mo; tl++ {
					for r := 0; r < 16; r++ {
						o := g + 16*tl + r
						for q := 0; q < 32; q++ {
							c := 2*pt*a.kp + q
							v := uint16(0)
							if o < m && c < a.srcC && q < 2*a.kp {
								v = weight(o, c, k)
							}
							panel[i] = v
							i++
						}
					}
				}
			}
		}
	}
}

// amxGroup is how many 16-row tiles the group starting with rows rows
// left takes: two while more than 16 are left.
func amxGroup(rows int) int {
	if rows > 16 {
		return 2
	}
	return 1
}

// run computes the m output rows of one image into out (row o's plane at
// out[o*ldo:], bfloat16) from the padded source, adding bias (m floats, or
// nil).
func (a *amxFwd) run(out []uint16, ldo, m int, src []uint32, panel []uint16, bias []float32) {
	if len(a.jobs) == 0 {
		return
	}
	_ = out[(m-1)*ldo+a.oh*a.ow-1]
	if len(a.taps) == 0 {
		// No tap reaches this grid (a phase of dx that no window reads):
		// only the bias, which the input gradient does not have.
		for o := range m {
			clear(out[o*ldo : o*ldo+a.oh*a.ow])
		}
		return
	}
	per := len(a.taps) * a.npt * 256 * 2 // a tile's panel elements
	for g := 0; g < m; g += 32 {
		mo := amxGroup(m - g)
		var b [32]float32
		if bias != nil {
			copy(b[:], bias[g:min(g+32, m)])
		}
		amxFwdKernels[mo-1][a.np-1](&a.cfg[0], &panel[g/16*per], &src[0], &a.taps[0], len(a.taps), a.npt, 4*a.plane,
			&a.jobs[0], len(a.jobs), &out[g*ldo], 2*ldo, min(32, m-g), &b[0])
	}
}

// amxFwdKernels are genAMXConvFwd's kernels by tiles of output channels
// (mo-1) and of pixels (np-1).
var amxFwdKernels = [2][2]func(cfg *byte, a *uint16, b *uint32, taps *int32, ntaps, npt, pstride int, jobs *amxJob, njobs int, y *uint16, ldy, rows int, bias *float32){
	{amxConvFwd1x1, amxConvFwd1x2},
	{amxConvFwd2x1, amxConvFwd2x2},
}

// amxWgt is the weight gradient planned for the AMX kernels: outputs on
// a grid of oh rows of wq (the padded source's width), g of them rounded
// up to 32-pixel blocks; the source padded as for amxFwd but in planes of
// single channels (cp of them, srcC rounded up to 16, in nph phases),
// plane bfloat16 apart; dy padded onto the grid in ocp planes of g and
// transposed into pixel pairs; its combos (tap, channel tile) in groups
// of up to four, each combo's A offset in bytes.
type amxWgt struct {
	oh, ow, wq, hq, mt, ml, g int
	srcC, cp, nph, hs, ws     int
	oc, ocp                   int
	plane                     int
	combos                    []amxCombo
	cfg                       [64]byte
}

type amxCombo struct{ k, ctile, off int }

func newAMXWgt(oh, ow, oc, srcC, nph, hs, ws int, taps []ctap) *amxWgt {
	a := &amxWgt{oh: oh, ow: ow, oc: oc, srcC: srcC, nph: nph, hs: hs, ws: ws}
	var far int
	a.mt, a.ml, a.hq, a.wq, far = tapMargins(oh, ow, hs, ws, taps)
	a.g = (oh*a.wq + 31) &^ 31
	a.cp = (srcC + 15) &^ 15
	a.ocp = (oc + 15) &^ 15
	// A block of the last image reads up to the grid's end past the
	// furthest tap.
	a.plane = max(a.hq*a.wq, a.g+far) + 32
	for _, t := range taps {
		for ct := 0; ct < a.cp/16; ct++ {
			off := 2 * ((t.phase*a.cp+16*ct)*a.plane + (t.dh+a.mt)*a.wq + t.dw + a.ml)
			a.combos = append(a.combos, amxCombo{k: t.k, ctile: ct, off: off})
		}
	}
	a.cfg = tileCfg(64, 16)
	return a
}

// srcLen and dyLen are the float32 words of one image's padded source
// (bfloat16, two to a word) and transposed dy.
func (a *amxWgt) srcLen() int { return (a.nph*a.cp*a.plane + 1) / 2 }
func (a *amxWgt) dyLen() int  { return a.g / 2 * a.ocp }

// groups is how many kernel calls an output-channel tile takes: one per
// four combos.
func (a *amxWgt) groups() int { return (len(a.combos) + 3) / 4 }

// Conv's BF16 parts, planned on first use (amx).
type convAMX struct {
	fwd *amxFwd
	bwd []*amxFwd // one per phase of dx, as Conv.bwd
	wgt *amxWgt
}

// ConvSupportedBF16 reports whether the AMX kernels run g with bfloat16
// operands: where Linux grants the tile registers.
func ConvSupportedBF16(g ConvGeom) bool {
	return ConvSupported(g) && amxConvOK()
}

// amxPlan returns c's AMX plan, made on first use.
func (c *Conv) amxPlan() *convAMX {
	c.amxOnce.Do(func() {
		g := c.g
		x := &convAMX{}
		nph := len(c.phases)
		x.fwd = newAMXFwd(g.OH, g.OW, g.C, nph, c.hs, c.ws, c.fwd.taps)
		for _, p := range c.bwd {
			x.bwd = append(x.bwd, newAMXFwd(p.rows, p.cols, g.OC, 1, g.OH, g.OW, p.corr.taps))
		}
		x.wgt = newAMXWgt(g.OH, g.OW, g.OC, g.C, nph, c.hs, c.ws, c.fwd.taps)
		c.amx = x
	})
	return c.amx
}

// ForwardPanelLenBF16 is the bfloat16 elements of the BF16 forward panel.
func (c *Conv) ForwardPanelLenBF16() int { return c.amxPlan().fwd.panelLen(c.g.OC) }

// PackForwardBF16 writes w (OC, C, KH, KW, bfloat16 bits) into the BF16
// forward panel.
func (c *Conv) PackForwardBF16(panel, w []uint16) {
	g, kk := c.g, c.g.KH*c.g.KW
	_ = w[g.OC*g.C*kk-1]
	c.amxPlan().fwd.pack(panel, g.OC, func(o, ch, k int) uint16 { return w[(o*g.C+ch)*kk+k] })
}

// InputGradPanelLenBF16 is the bfloat16 elements of the BF16 input
// gradient's panel.
func (c *Conv) InputGradPanelLenBF16() int {
	n := 0
	for _, b := range c.amxPlan().bwd {
		n += b.panelLen(c.g.C)
	}
	return n
}

// PackInputGradBF16 writes w into the BF16 input gradient's panel (one
// per phase of dx).
func (c *Conv) PackInputGradBF16(panel, w []uint16) {
	g, kk := c.g, c.g.KH*c.g.KW
	_ = w[g.OC*g.C*kk-1]
	off := 0
	for _, b := range c.amxPlan().bwd {
		n := b.panelLen(g.C)
		b.pack(panel[off:off+n], g.C, func(o, ch, k int) uint16 { return w[(ch*g.C+o)*kk+k] })
		off += n
	}
}

// ForwardScratchLenBF16 is the float32 words of scratch ForwardBF16 needs
// per worker; it must be zeroed before the first image a worker runs.
func (c *Conv) ForwardScratchLenBF16() int {
	return c.amxPlan().fwd.srcLen() + (c.SplitLen()+1)/2
}

// ForwardBF16 computes image n of y (N, OC, OH, OW, bfloat16) from image
// n of x (bfloat16), the BF16 panel and bias (OC floats, or nil).
// scratch (ForwardScratchLenBF16 words) must have been zeroed before the
// worker's first image and be used by this convolution alone since.
func (c *Conv) ForwardBF16(y, x, panel []uint16, bias []float32, n int, scratch []float32) {
	g := c.g
	a := c.amxPlan().fwd
	ohw := g.OH * g.OW
	if n < 0 || n >= g.N || len(y) < (n+1)*g.OC*ohw || len(x) < (n+1)*g.C*g.H*g.W || len(panel) < a.panelLen(g.OC) ||
		(bias != nil && len(bias) < g.OC) || len(scratch) < c.ForwardScratchLenBF16() {
		panic(fmt.Sprintf("gemm: ForwardBF16: image %d, y %d, x %d, panel %d, bias %d, scratch %d for %+v", n, len(y), len(x), len(panel), len(bias), len(scratch), g))
	}
	src := words(scratch[:a.srcLen()])
	img := x[n*g.C*g.H*g.W : (n+1)*g.C*g.H*g.W]
	if l := c.SplitLen(); l > 0 {
		ph := halves(scratch[a.srcLen():])[:l]
		splitImage(c, ph, img)
		img = ph
	}
	a.layout(src, img, &interleaveIdx)
	a.run(y[n*g.OC*ohw:], ohw, g.OC, src, panel, bias)
}

// InputGradScratchLenBF16 is the float32 words of scratch InputGradBF16
// needs per worker, zeroed as for ForwardBF16: each phase's padded dy, and
// every phase of dx at strides above 1.
func (c *Conv) InputGradScratchLenBF16() int {
	n := 0
	for _, b := range c.amxPlan().bwd {
		n += b.srcLen()
	}
	if c.bwd[0].direct {
		return n
	}
	return n + (c.g.C*c.g.H*c.g.W+1)/2
}

// InputGradBF16 computes image n of dx (N, C, H, W, bfloat16),
// overwriting it, from image n of dy (bfloat16) and the BF16 input
// gradient's panel. scratch is as for ForwardBF16.
func (c *Conv) InputGradBF16(dx, dy, panel []uint16, n int, scratch []float32) {
	g := c.g
	x := c.amxPlan()
	hw, ohw := g.H*g.W, g.OH*g.OW
	if n < 0 || n >= g.N || len(dx) < (n+1)*g.C*hw || len(dy) < (n+1)*g.OC*ohw || len(panel) < c.InputGradPanelLenBF16() || len(scratch) < c.InputGradScratchLenBF16() {
		panic(fmt.Sprintf("gemm: InputGradBF16: image %d, dx %d, dy %d, panel %d, scratch %d for %+v", n, len(dx), len(dy), len(panel), len(scratch), g))
	}
	img := dx[n*g.C*hw : (n+1)*g.C*hw]
	src := dy[n*g.OC*ohw : (n+1)*g.OC*ohw]
	srcs := 0
	for _, b := range x.bwd {
		srcs += b.srcLen()
	}
	var ph []uint16
	if !c.bwd[0].direct {
		ph = halves(scratch[srcs:])[:g.C*hw]
	}
	soff, poff := 0, 0
	for i, b := range x.bwd {
		p := c.bwd[i]
		s := words(scratch[soff : soff+b.srcLen()])
		soff += b.srcLen()
		if len(b.taps) > 0 { // a phase no tap reaches is zeros (run)
			b.layout(s, src, &interleaveIdx)
		}
		pn := b.panelLen(g.C)
		if p.direct {
			b.run(img, hw, g.C, s, panel[:pn], nil)
			continue
		}
		ld := p.rows * p.cols
		b.run(ph[poff:], ld, g.C, s, panel[:pn], nil)
		poff += g.C * ld
		panel = panel[pn:]
	}
	if ph != nil {
		mergeImage(c, img, ph)
	}
}

// WeightGradPrepLenBF16 is the float32 words one image of a weight
// gradient chunk takes once prepared (PrepWeightGradBF16): its padded
// source and its transposed dy.
func (c *Conv) WeightGradPrepLenBF16() int {
	w := c.amxPlan().wgt
	return w.srcLen() + w.dyLen()
}

// WeightGradScratchLenBF16 is the float32 words of scratch one worker's
// PrepWeightGradBF16 needs.
func (c *Conv) WeightGradScratchLenBF16() int {
	w := c.amxPlan().wgt
	return (w.ocp*w.g+1)/2 + (c.SplitLen()+1)/2
}

// PrepWeightGradBF16 lays image n of x and dy (bfloat16) out for the
// weight gradient's kernels into dst (WeightGradPrepLenBF16 words), whose
// padding must be zero (dst is only ever written where the images go);
// scratch (WeightGradScratchLenBF16 words) likewise.
func (c *Conv) PrepWeightGradBF16(dst []float32, dy, x []uint16, n int, scratch []float32) {
	g := c.g
	w := c.amxPlan().wgt
	hw, ohw := g.H*g.W, g.OH*g.OW
	if n < 0 || n >= g.N || len(dst) < c.WeightGradPrepLenBF16() || len(dy) < (n+1)*g.OC*ohw || len(x) < (n+1)*g.C*hw || len(scratch) < c.WeightGradScratchLenBF16() {
		panic(fmt.Sprintf("gemm: PrepWeightGradBF16: image %d, dst %d, dy %d, x %d, scratch %d for %+v", n, len(dst), len(dy), len(x), len(scratch), g))
	}
	img := x[n*g.C*hw : (n+1)*g.C*hw]
	if l := c.SplitLen(); l > 0 {
		ph := halves(scratch[(w.ocp*w.g+1)/2:])[:l]
		splitImage(c, ph, img)
		img = ph
	}
	src := halves(dst[:w.srcLen()])
	plane := w.hs * w.ws
	for p := 0; p < w.nph; p++ {
		for ch := 0; ch < g.C; ch++ {
			o := (p*w.cp+ch)*w.plane + w.mt*w.wq + w.ml
			copyRows16(ptr(src, o), w.wq, ptr(img, (p*g.C+ch)*plane), w.ws, w.hs, w.ws)
		}
	}
	// dy onto the grid (zero past each row's ow columns), then its pixel
	// pairs transposed: dst's dy part holds, for each pair p, the dwords
	// of every output channel.
	pad := halves(scratch)[:w.ocp*w.g]
	for o := 0; o < g.OC; o++ {
		copyRows16(ptr(pad, o*w.g), w.wq, ptr(dy, (n*g.OC+o)*ohw), g.OW, g.OH, g.OW)
	}
	transposeWords(dst[w.srcLen():w.srcLen()+w.dyLen()], w.ocp, wordsAsF32(pad), w.g/2, w.ocp, w.g/2)
}

// wordsAsF32 views 16-bit halves (an even number of them, from a
// float32 buffer) as the float32 words they pair into: the transposes
// move words, never touching their bits.
func wordsAsF32(h []uint16) []float32 {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&h[0])), len(h)/2)
}

// WeightGradPiecesBF16 is how many pieces WeightGradBF16 is cut into:
// each output-channel tile's groups of four combos (tap, channel tile).
func (c *Conv) WeightGradPiecesBF16() int {
	w := c.amxPlan().wgt
	return w.ocp / 16 * w.groups()
}

// WeightGradAccLenBF16 is the float32 words of the accumulators that
// WeightGradBF16 keeps between chunks.
func (c *Conv) WeightGradAccLenBF16() int {
	w := c.amxPlan().wgt
	return w.ocp / 16 * len(w.combos) * 256
}

// WeightGradBF16 adds piece's part of the weight gradient of nb prepared
// images (src, WeightGradPrepLenBF16 words each) to acc, or sets it when
// first. Pieces write disjoint parts of acc.
func (c *Conv) WeightGradBF16(acc, src []float32, nb, piece int, first bool) {
	w := c.amxPlan().wgt
	if piece < 0 || piece >= c.WeightGradPiecesBF16() || nb < 1 || len(acc) < c.WeightGradAccLenBF16() || len(src) < nb*c.WeightGradPrepLenBF16() {
		panic(fmt.Sprintf("gemm: WeightGradBF16: piece %d, %d images, acc %d, src %d for %+v", piece, nb, len(acc), len(src), c.g))
	}
	ot, grp := piece/w.groups(), piece%w.groups()
	lo := 4 * grp
	n := min(4, len(w.combos)-lo)
	var offs [4]int
	for i := range n {
		offs[i] = w.combos[lo+i].off
	}
	f := 0
	if first {
		f = 1
	}
	per := c.WeightGradPrepLenBF16()
	a := halves(src[:w.srcLen()])
	b := words(src[w.srcLen() : w.srcLen()+w.dyLen()])
	accp := &acc[(ot*len(w.combos)+lo)*256]
	bp := &b[16*ot]
	aImg, bImg := 4*per, 4*per
	nblk := w.g / 32
	switch n {
	case 1:
		amxConvWgrad1(&w.cfg[0], accp, &a[0], 2*w.plane, &offs[0], bp, 4*w.ocp, nblk, nb, aImg, bImg, f)
	case 2:
		amxConvWgrad2(&w.cfg[0], accp, &a[0], 2*w.plane, &offs[0], bp, 4*w.ocp, nblk, nb, aImg, bImg, f)
	case 3:
		amxConvWgrad3(&w.cfg[0], accp, &a[0], 2*w.plane, &offs[0], bp, 4*w.ocp, nblk, nb, aImg, bImg, f)
	default:
		amxConvWgrad4(&w.cfg[0], accp, &a[0], 2*w.plane, &offs[0], bp, 4*w.ocp, nblk, nb, aImg, bImg, f)
	}
}

// FinishWeightGradBF16 writes the accumulated weight gradient into dw
// (OC, C, KH, KW, F32).
func (c *Conv) FinishWeightGradBF16(dw, acc []float32) {
	g := c.g
	w := c.amxPlan().wgt
	kk := g.KH * g.KW
	_ = dw[g.OC*g.C*kk-1]
	_ = acc[c.WeightGradAccLenBF16()-1]
	for ot := 0; ot < w.ocp/16; ot++ {
		for i, cb := range w.combos {
			tile := acc[(ot*len(w.combos)+i)*256:]
			for r := 0; r < 16; r++ {
				ch := 16*cb.ctile + r
				if ch >= g.C {
					break
				}
				for q := 0; q < 16; q++ {
					o := 16*ot + q
					if o >= g.OC {
						break
					}
					dw[(o*g.C+ch)*kk+cb.k] = tile[r*16+q]
				}
			}
		}
	}
}
