package gemm

import (
	"fmt"
	"sync"
)

// Direct convolution: a convolution computed from the image planes
// themselves, with no im2col matrix. It is an implicit GEMM whose B
// operand is never materialised: the micro-kernel loads each of its
// vectors of 16 output pixels straight from an input plane, the lanes that
// fall on padding masked to zero, and broadcasts the weights from a small
// packed panel (see genConvFwd). Forward and input gradient are the same
// kernel (the input gradient of a stride-1 convolution is a stride-1
// correlation of dy with the weights transposed); the weight gradient is a
// second kernel that multiplies the dy and x vectors lane by lane and sums
// each accumulator's lanes once, at the end (genConvWgrad).
//
// Everything is expressed as stride-1 correlations. A larger stride splits
// the input into stride x stride phases, each a plane of every stride-th
// row and column (Split), and a tap reads the phase its offset falls in;
// the input gradient of a strided convolution is one correlation per phase
// of dx, whose results are interleaved back.

// ConvGeom is a 2-D convolution's geometry: x (N, C, H, W), w (OC, C, KH,
// KW), y (N, OC, OH, OW), with zero padding.
type ConvGeom struct {
	N, C, H, W       int
	OC, KH, KW       int
	StrideH, StrideW int
	PadH, PadW       int
	OH, OW           int
}

// convTap is one kernel tap in one block of output pixels, as the forward
// kernels read it (16 bytes): the bytes from the source image's base to
// the tap's pixel under the block's first lane (negative where that lane
// reads padding), the bytes from the weight panel's start to the tap's
// weights, and the lanes of the block's (up to three) vectors that read
// inside the source plane.
type convTap struct {
	src, w int32
	mask   [3]uint16
	_      uint16
}

// ctap is a tap of a stride-1 correlation: the output pixel (oh, ow)
// reads (oh+dh, ow+dw) of the source's phase, with weight index k (kh*KW
// + kw).
type ctap struct{ phase, dh, dw, k int }

// tapMargins is the padded plane that every tap's reads land in, for an
// output grid oh x ow over a source plane hs x ws: mt rows above and ml
// columns left of the source (the taps' most negative offsets), the padded
// height hq and width wq, which also cover the most positive, and far, the
// offset in that plane of the furthest tap's read for the grid's first
// pixel.
func tapMargins(oh, ow, hs, ws int, taps []ctap) (mt, ml, hq, wq, far int) {
	minDH, maxDH, minDW, maxDW := 0, 0, 0, 0
	for _, t := range taps {
		minDH, maxDH = min(minDH, t.dh), max(maxDH, t.dh)
		minDW, maxDW = min(minDW, t.dw), max(maxDW, t.dw)
	}
	mt, ml = -minDH, -minDW
	hq, wq = mt+max(hs, oh+maxDH), ml+max(ws, ow+maxDW)
	return mt, ml, hq, wq, (maxDH+mt)*wq + maxDW + ml
}

// corrBlock is up to 48 output pixels, q0 onwards in the output grid,
// with the taps that read any pixel inside the source.
type corrBlock struct {
	q0, nv int
	ymask  uint64
	taps   []convTap
}

// blockPixels is the most output pixels a forward kernel call computes:
// three vectors of 16 (convFwd8x48).
const blockPixels = 48

// corr is a stride-1 correlation planned for the kernels: its output grid
// oh x ow, its source planes hs x ws (plane floats apart; phases phaseLen
// floats apart), and its blocks for the forward kernels or entries per
// tap for the weight gradient's.
type corr struct {
	oh, ow, hs, ws, plane, phaseLen int
	taps                            []ctap
	blocks                          []corrBlock
}

// newCorr plans a correlation. wstride is the bytes between two taps'
// weights in the panel.
func newCorr(oh, ow, hs, ws, plane, phaseLen int, taps []ctap, wstride int) *corr {
	c := &corr{oh: oh, ow: ow, hs: hs, ws: ws, plane: plane, phaseLen: phaseLen, taps: taps}
	flat := ws == ow
	// Output pixel i of a run starting at (oh0, ow0), flat index q0.
	pos := func(oh0, ow0, q0, i int) (int, int) {
		if flat {
			q := q0 + i
			return q / ow, q % ow
		}
		return oh0, ow0 + i
	}
	maskOf := func(t ctap, oh0, ow0, q0, lo, n int) uint16 {
		var m uint16
		for i := lo; i < n && i < lo+16; i++ {
			r, s := pos(oh0, ow0, q0, i)
			if r+t.dh >= 0 && r+t.dh < hs && s+t.dw >= 0 && s+t.dw < ws {
				m |= 1 << (i - lo)
			}
		}
		return m
	}
	srcOf := func(t ctap, oh0, ow0 int) int { return t.phase*phaseLen + (oh0+t.dh)*ws + ow0 + t.dw }
	run := func(oh0, ow0, q0, n int) {
		nv := (n + 15) / 16
		b := corrBlock{q0: q0, nv: nv, ymask: 1<<n - 1}
		for _, t := range taps {
			m := [3]uint16{maskOf(t, oh0, ow0, q0, 0, n), maskOf(t, oh0, ow0, q0, 16, n), maskOf(t, oh0, ow0, q0, 32, n)}
			if m == [3]uint16{} {
				continue
			}
			b.taps = append(b.taps, convTap{src: int32(4 * srcOf(t, oh0, ow0)), w: int32(t.k * wstride), mask: m})
		}
		c.blocks = append(c.blocks, b)
	}
	if flat {
		for q0 := 0; q0 < oh*ow; q0 += blockPixels {
			run(q0/ow, q0%ow, q0, min(blockPixels, oh*ow-q0))
		}
	} else {
		for r := 0; r < oh; r++ {
			for s := 0; s < ow; s += blockPixels {
				run(r, s, r*ow+s, min(blockPixels, ow-s))
			}
		}
	}
	return c
}

// lanes returns a mask of the first n (at most 32) bits.
func lanes(n int) uint32 {
	if n >= 32 {
		return ^uint32(0)
	}
	return 1<<n - 1
}

// Conv is a convolution planned for the direct kernels: built once per
// geometry (NewConv) and used from any number of goroutines. Its methods
// work image by image (forward, input gradient) or tile by tile (weight
// gradient), so that the caller shares them out among its cores.
type Conv struct {
	g ConvGeom
	// phases are the (row, column) phases the forward taps read, in the
	// order Split writes them; one (0, 0) phase, the image itself, at
	// stride 1.
	phases [][2]int
	hs, ws int // the source planes: the image's, or a phase's
	fwd    *corr
	// wgt is the F32 weight gradient's plan (convwgt.go).
	wgt *fmaWgt
	// bwd holds dx's phases (one at stride 1): each one's correlation of
	// dy and where it goes in dx.
	bwd []bwdPhase
	// amx is the BF16 plan (convamx.go), made on first use.
	amxOnce sync.Once
	amx     *convAMX
}

type bwdPhase struct {
	a, b   int // dx rows a, a+StrideH, ...; columns b, b+StrideW, ...
	corr   *corr
	rows   int // the phase's rows and columns
	cols   int
	direct bool // stride 1: the phase is dx itself
}

// ConvSupported reports whether the direct kernels run g: on this CPU
// (AVX-512), for sizes whose byte offsets fit the kernels' 32-bit tables.
func ConvSupported(g ConvGeom) bool {
	if !directConv || !g.valid() {
		return false
	}
	img := max(g.C*g.H*g.W, g.OC*g.OH*g.OW)
	return 4*img < 1<<30 && g.KH*g.KW*max(g.C, g.OC)*8*4 < 1<<30
}

func (g ConvGeom) valid() bool {
	return g.N >= 0 && g.C > 0 && g.H > 0 && g.W > 0 && g.OC > 0 && g.KH > 0 && g.KW > 0 && g.StrideH > 0 && g.StrideW > 0 &&
		g.PadH >= 0 && g.PadW >= 0 && g.OH == (g.H+2*g.PadH-g.KH)/g.StrideH+1 && g.OW == (g.W+2*g.PadW-g.KW)/g.StrideW+1 && g.OH > 0 && g.OW > 0
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func mod(a, b int) int { return a - b*floorDiv(a, b) }

// NewConv plans g. It panics unless ConvSupported(g).
func NewConv(g ConvGeom) *Conv {
	if !g.valid() {
		panic(fmt.Sprintf("gemm: bad convolution %+v", g))
	}
	c := &Conv{g: g}
	sh, sw := g.StrideH, g.StrideW
	strided := sh > 1 || sw > 1
	c.hs, c.ws = g.H, g.W
	if strided {
		c.hs, c.ws = (g.H+sh-1)/sh, (g.W+sw-1)/sw
	}
	plane := c.hs * c.ws
	// Forward and weight-gradient taps: (kh, kw) reads input row
	// oh*sh + kh - PadH, which is row oh + floor((kh-PadH)/sh) of phase
	// (kh-PadH) mod sh.
	phaseIdx := map[[2]int]int{}
	var taps []ctap
	for kh := range g.KH {
		for kw := range g.KW {
			ph := [2]int{mod(kh-g.PadH, sh), mod(kw-g.PadW, sw)}
			i, ok := phaseIdx[ph]
			if !ok {
				i = len(c.phases)
				phaseIdx[ph] = i
				c.phases = append(c.phases, ph)
			}
			taps = append(taps, ctap{phase: i, dh: floorDiv(kh-g.PadH, sh), dw: floorDiv(kw-g.PadW, sw), k: kh*g.KW + kw})
		}
	}
	c.fwd = newCorr(g.OH, g.OW, c.hs, c.ws, plane, g.C*plane, taps, 4*8*g.C)
	c.wgt = newFMAWgt(g.OH, g.OW, g.OC, g.C, len(c.phases), c.hs, c.ws, taps)
	// Input gradient: dx row r = a + sh*i receives dy row oh from tap kh
	// when oh*sh + kh - PadH = r, that is oh = i + (a + PadH - kh)/sh
	// where that divides exactly.
	for a := 0; a < sh && a < g.H; a++ {
		for b := 0; b < sw && b < g.W; b++ {
			var bt []ctap
			for kh := range g.KH {
				if mod(a+g.PadH-kh, sh) != 0 {
					continue
				}
				for kw := range g.KW {
					if mod(b+g.PadW-kw, sw) != 0 {
						continue
					}
					bt = append(bt, ctap{dh: (a + g.PadH - kh) / sh, dw: (b + g.PadW - kw) / sw, k: kh*g.KW + kw})
				}
			}
			rows, cols := (g.H-a+sh-1)/sh, (g.W-b+sw-1)/sw
			c.bwd = append(c.bwd, bwdPhase{a: a, b: b, rows: rows, cols: cols, direct: !strided,
				corr: newCorr(rows, cols, g.OH, g.OW, g.OH*g.OW, 0, bt, 4*8*g.OC)})
		}
	}
	return c
}

// Geom returns the geometry c was planned for.
func (c *Conv) Geom() ConvGeom { return c.g }

// tiles8 is how many 8-row tiles cover n rows.
func tiles8(n int) int { return (n + 7) / 8 }

// ForwardPanelLen is the floats of the forward weight panel (PackForward).
func (c *Conv) ForwardPanelLen() int { return tiles8(c.g.OC) * c.g.KH * c.g.KW * c.g.C * 8 }

// PackForward writes w (OC, C, KH, KW) into the forward panel: for each
// tile of 8 output channels, for each tap, for each input channel, the 8
// channels' weights (zero past OC).
func (c *Conv) PackForward(panel, w []float32) {
	g := c.g
	kk := g.KH * g.KW
	if len(panel) < c.ForwardPanelLen() || len(w) < g.OC*g.C*kk {
		panic(fmt.Sprintf("gemm: PackForward: panel %d and weights %d floats for %+v", len(panel), len(w), g))
	}
	i := 0
	for t := 0; t < g.OC; t += 8 {
		for k := range kk {
			for ch := range g.C {
				for r := range 8 {
					v := float32(0)
					if t+r < g.OC {
						v = w[((t+r)*g.C+ch)*kk+k]
					}
					panel[i] = v
					i++
				}
			}
		}
	}
}

// PackInputGrad writes w into the input gradient's panel: for each tile
// of 8 input channels, for each tap, for each output channel, the 8
// channels' weights (zero past C).
func (c *Conv) PackInputGrad(panel, w []float32) {
	g := c.g
	kk := g.KH * g.KW
	if len(panel) < c.InputGradPanelLen() || len(w) < g.OC*g.C*kk {
		panic(fmt.Sprintf("gemm: PackInputGrad: panel %d and weights %d floats for %+v", len(panel), len(w), g))
	}
	i := 0
	for t := 0; t < g.C; t += 8 {
		for k := range kk {
			for o := range g.OC {
				for r := range 8 {
					v := float32(0)
					if t+r < g.C {
						v = w[(o*g.C+t+r)*kk+k]
					}
					panel[i] = v
					i++
				}
			}
		}
	}
}

// InputGradPanelLen is the floats of the input gradient's panel.
func (c *Conv) InputGradPanelLen() int { return tiles8(c.g.C) * c.g.KH * c.g.KW * c.g.OC * 8 }

// SplitLen is the floats of one image split into its phases (Split), 0
// at stride 1, where the kernels read the image itself.
func (c *Conv) SplitLen() int {
	if c.bwd[0].direct {
		return 0
	}
	return len(c.phases) * c.g.C * c.hs * c.ws
}

// Split writes image n of x split into the phases the taps read (SplitLen
// floats): phase (a, b)'s plane of channel ch holds x[ch][a+sh*i][b+sw*j],
// zero past the image.
func (c *Conv) Split(dst, x []float32, n int) {
	g := c.g
	hw := g.H * g.W
	if len(dst) < c.SplitLen() || len(x) < (n+1)*g.C*hw {
		panic(fmt.Sprintf("gemm: Split: dst %d and x %d floats, image %d of %+v", len(dst), len(x), n, g))
	}
	splitImage(c, dst, x[n*g.C*hw:(n+1)*g.C*hw])
}

// ForwardScratchLen is the floats of scratch Forward needs.
func (c *Conv) ForwardScratchLen() int { return c.SplitLen() }

// Forward computes image n of y (N, OC, OH, OW) from image n of x and the
// forward panel, adding bias (OC, or nil). scratch holds
// ForwardScratchLen floats.
func (c *Conv) Forward(y, x, panel, bias []float32, n int, scratch []float32) {
	g := c.g
	ohw := g.OH * g.OW
	if n < 0 || n >= g.N || len(y) < (n+1)*g.OC*ohw || len(x) < (n+1)*g.C*g.H*g.W || len(panel) < c.ForwardPanelLen() ||
		(bias != nil && len(bias) < g.OC) || len(scratch) < c.ForwardScratchLen() {
		panic(fmt.Sprintf("gemm: Forward: image %d, y %d, x %d, panel %d, bias %d, scratch %d floats for %+v", n, len(y), len(x), len(panel), len(bias), len(scratch), g))
	}
	src := x[n*g.C*g.H*g.W:]
	if l := c.SplitLen(); l > 0 {
		c.Split(scratch, x, n)
		src = scratch
	}
	tile := g.KH * g.KW * g.C * 8
	for t := 0; t < g.OC; t += 8 {
		var b [8]float32
		if bias != nil {
			copy(b[:], bias[t:min(t+8, g.OC)])
		}
		c.fwd.run(y[(n*g.OC+t)*ohw:], ohw, min(8, g.OC-t), src, panel[t/8*tile:], g.C, &b)
	}
}

// run computes rows of out (each ldy floats apart, the output grid flat)
// from src's planes and the panel's tile, each block in one kernel call.
func (c *corr) run(out []float32, ldy, rows int, src, panel []float32, nc int, bias *[8]float32) {
	for i := range c.blocks {
		b := &c.blocks[i]
		var tp *convTap
		if len(b.taps) > 0 {
			tp = &b.taps[0]
		}
		switch b.nv {
		case 3:
			convFwd8x48(&panel[0], &src[0], tp, len(b.taps), nc, c.plane, &out[b.q0], ldy, rows, b.ymask, &bias[0])
		case 2:
			convFwd8x32(&panel[0], &src[0], tp, len(b.taps), nc, c.plane, &out[b.q0], ldy, rows, b.ymask, &bias[0])
		default:
			convFwd8x16(&panel[0], &src[0], tp, len(b.taps), nc, c.plane, &out[b.q0], ldy, rows, b.ymask, &bias[0])
		}
	}
}

// InputGradScratchLen is the floats of scratch InputGrad needs: every
// phase of dx at strides above 1.
func (c *Conv) InputGradScratchLen() int {
	if c.bwd[0].direct {
		return 0
	}
	return c.g.C * c.g.H * c.g.W
}

// InputGrad computes image n of dx (N, C, H, W), overwriting it, from
// image n of dy and the input gradient's panel. scratch holds
// InputGradScratchLen floats.
func (c *Conv) InputGrad(dx, dy, panel []float32, n int, scratch []float32) {
	g := c.g
	hw, ohw := g.H*g.W, g.OH*g.OW
	if n < 0 || n >= g.N || len(dx) < (n+1)*g.C*hw || len(dy) < (n+1)*g.OC*ohw || len(panel) < c.InputGradPanelLen() || len(scratch) < c.InputGradScratchLen() {
		panic(fmt.Sprintf("gemm: InputGrad: image %d, dx %d, dy %d, panel %d, scratch %d floats for %+v", n, len(dx), len(dy), len(panel), len(scratch), g))
	}
	src := dy[n*g.OC*ohw:]
	img := dx[n*g.C*hw : (n+1)*g.C*hw]
	tile := g.KH * g.KW * g.OC * 8
	var zero [8]float32
	if c.bwd[0].direct {
		p := c.bwd[0]
		for t := 0; t < g.C; t += 8 {
			p.corr.run(img[t*hw:], hw, min(8, g.C-t), src, panel[t/8*tile:], g.OC, &zero)
		}
		return
	}
	off := 0
	for _, p := range c.bwd {
		ld := p.rows * p.cols
		for t := 0; t < g.C; t += 8 {
			p.corr.run(scratch[off+t*ld:], ld, min(8, g.C-t), src, panel[t/8*tile:], g.OC, &zero)
		}
		off += g.C * ld
	}
	mergeImage(c, img, scratch)
}
