package cpu

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu/internal/gemm"
	"github.com/mixprec/mixprec/dtype"
)

// The direct convolution (device.DirectConvKernels): the kernels of
// package gemm read the image planes in place, so a convolution costs no
// im2col columns, no packing of them and no Col2Im. Where they do not run
// (no AVX-512, a dtype they do not take) DirectConv says no and autograd
// takes the column path, which stays the reference the direct one is
// tested against.

var _ device.DirectConvKernels = (*Device)(nil)

// directConvOff turns the direct convolution off for the process
// (MIXPREC_IM2COL=1), to compare it with the column path in one binary.
var directConvOff = os.Getenv("MIXPREC_IM2COL") == "1"

// convGeom is s with oc output channels as gemm's geometry.
func convGeom(s device.ConvShape, oc int) gemm.ConvGeom {
	return gemm.ConvGeom{N: s.N, C: s.C, H: s.H, W: s.W, OC: oc, KH: s.KH, KW: s.KW, StrideH: s.StrideH, StrideW: s.StrideW,
		PadH: s.PadH, PadW: s.PadW, OH: s.OH, OW: s.OW}
}

// DirectConv reports whether the direct kernels run s: F32 operands on a
// CPU with AVX-512, BF16 ones where it has AMX-BF16 too. F16 operands run
// on the F32 kernels, an image at a time: widened as it is taken, its
// result rounded once as it is stored (F16 has no kernels of its own on
// the CPU; through the columns an F16 ResNet-20 step took 1.6x the FP32
// one).
func (d *Device) DirectConv(s device.ConvShape, oc int, dt dtype.DType) bool {
	if directConvOff || !s.Valid() || s.N0 != 0 || s.NB != s.N {
		return false
	}
	switch dt {
	case dtype.F32, dtype.F16:
		return gemm.ConvSupported(convGeom(s, oc))
	case dtype.BF16:
		return gemm.ConvSupportedBF16(convGeom(s, oc))
	}
	return false
}

// directPlans caches gemm's plans by geometry, as c2iPlans does Col2Im's:
// a network has a few shapes and calls each once per step.
var directPlans struct {
	sync.Mutex
	m map[gemm.ConvGeom]*gemm.Conv
}

// directPlan returns the plan for s with oc output channels, panicking
// for a shape DirectConv refuses.
func (d *Device) directPlan(op string, s device.ConvShape, oc int, dt dtype.DType) *gemm.Conv {
	if !d.DirectConv(s, oc, dt) {
		panic(fmt.Sprintf("cpu: %s: shape %+v with %d output channels in %v does not run directly", op, s, oc, dt))
	}
	g := convGeom(s, oc)
	directPlans.Lock()
	defer directPlans.Unlock()
	if c := directPlans.m[g]; c != nil {
		return c
	}
	c := gemm.NewConv(g)
	if directPlans.m == nil {
		directPlans.m = map[gemm.ConvGeom]*gemm.Conv{}
	}
	if len(directPlans.m) < maxC2IPlans {
		directPlans.m[g] = c
	}
	return c
}

// directJob is one direct convolution call's images, or for the weight
// gradient the kernel's pieces, run by the device's parallel pieces from
// a pool (as convJob is). The F32 kernels read and write float32 slices,
// the BF16 ones bfloat16 bits (out16, in16, panel16, x16).
type directJob struct {
	kind           directKind
	c              *gemm.Conv
	out, in, panel []float32
	bias           []float32
	out16, in16    []uint16
	panel16, x16   []uint16
	// The weight gradient: dy (in, in16) and x (x, x16), chunk images a
	// chunk, and the pieces' accumulators (acc).
	x, acc []float32
	chunk  int
}

type directKind uint8

const (
	directForward directKind = iota
	directInputGrad
	directWeightGrad
	directForward16
	directInputGrad16
	directWeightGrad16
	directForwardF16 // the F32 kernels on F16 images (in16, out16), widened one by one
	directInputGradF16
	directWeightGradF16 // the F32 kernels on F16 dy (in16) and x (x16), widened one by one
)

var directJobs = sync.Pool{New: func() any { return new(directJob) }}

func (j *directJob) runPieces(lo, hi int) {
	switch j.kind {
	case directForward, directInputGrad, directForwardF16, directInputGradF16:
		j.runF32(lo, hi)
	case directWeightGrad, directWeightGradF16, directWeightGrad16:
		j.wgrad(lo, hi)
	case directForward16, directInputGrad16:
		// The AMX kernels' padded layouts are zero where no image goes:
		// the scratch is cleared once, and each image rewrites the rest.
		n := j.c.ForwardScratchLenBF16()
		if j.kind == directInputGrad16 {
			n = j.c.InputGradScratchLenBF16()
		}
		scr := getScratch(n)
		clear(*scr)
		for i := lo; i < hi; i++ {
			if j.kind == directForward16 {
				j.c.ForwardBF16(j.out16, j.in16, j.panel16, j.bias, i, *scr)
			} else {
				j.c.InputGradBF16(j.out16, j.in16, j.panel16, i, *scr)
			}
		}
		putScratch(scr)
	}
}

// runF32 runs the F32 forward or input-gradient kernel on images [lo, hi):
// in place for F32 operands; for F16 ones each image widened into a
// scratch, computed as image 0 of it, and its result rounded to F16 once.
func (j *directJob) runF32(lo, hi int) {
	fwd := j.kind == directForward || j.kind == directForwardF16
	n := j.c.ForwardScratchLen()
	if !fwd {
		n = j.c.InputGradScratchLen()
	}
	scr := getScratch(n)
	defer putScratch(scr)
	in, out, lin, lout := j.in, j.out, 0, 0
	f16 := j.kind == directForwardF16 || j.kind == directInputGradF16
	if f16 {
		g := j.c.Geom()
		lin, lout = g.C*g.H*g.W, g.OC*g.OH*g.OW
		if !fwd {
			lin, lout = lout, lin
		}
		win, wout := getScratch(lin), getScratch(lout)
		defer putScratch(win)
		defer putScratch(wout)
		in, out = *win, *wout
	}
	for i := lo; i < hi; i++ {
		img := i
		if f16 {
			dtype.DecodeF16(in, j.in16[i*lin:(i+1)*lin])
			img = 0
		}
		if fwd {
			j.c.Forward(out, in, j.panel, j.bias, img, *scr)
		} else {
			j.c.InputGrad(out, in, j.panel, img, *scr)
		}
		if f16 {
			dtype.EncodeF16(j.out16[i*lout:(i+1)*lout], out)
		}
	}
}

// wgrad computes pieces [lo, hi) of the weight gradient over every image,
// a chunk of images at a time in order: each chunk laid out in a scratch,
// then the pieces run over it, adding into their accumulators (set by the
// first chunk). The F32 kernels read F32 images in place and F16 ones
// widened first, an image's dy and x at a time, and laid out as image 0 of
// them; the AMX kernels read BF16. The scratch is this worker's alone, so
// the layout stays in its core's cache for the pieces that read it.
func (j *directJob) wgrad(lo, hi int) {
	c := j.c
	g := c.Geom()
	bf, f16 := j.kind == directWeightGrad16, j.kind == directWeightGradF16
	per, scrLen := c.WeightGradPrepLen(), c.WeightGradScratchLen()
	if bf {
		per, scrLen = c.WeightGradPrepLenBF16(), c.WeightGradScratchLenBF16()
	}
	src, scr := getScratch(j.chunk*per), getScratch(scrLen)
	defer putScratch(src)
	defer putScratch(scr)
	clear(*src) // the layouts' padding; images rewrite the rest
	clear(*scr)
	dy, x, ly, lx := j.in, j.x, 0, 0
	if f16 {
		ly, lx = g.OC*g.OH*g.OW, g.C*g.H*g.W
		wdy, wx := getScratch(ly), getScratch(lx)
		defer putScratch(wdy)
		defer putScratch(wx)
		dy, x = *wdy, *wx
	}
	for n0 := 0; n0 < g.N; n0 += j.chunk {
		nb := min(j.chunk, g.N-n0)
		for i := range nb {
			dst, img := (*src)[i*per:(i+1)*per], n0+i
			switch {
			case bf:
				c.PrepWeightGradBF16(dst, j.in16, j.x16, img, *scr)
				continue
			case f16:
				dtype.DecodeF16(dy, j.in16[img*ly:(img+1)*ly])
				dtype.DecodeF16(x, j.x16[img*lx:(img+1)*lx])
				img = 0
			}
			c.PrepWeightGrad(dst, dy, x, img, *scr)
		}
		for p := lo; p < hi; p++ {
			if bf {
				c.WeightGradBF16(j.acc, *src, nb, p, n0 == 0)
			} else {
				c.WeightGrad(j.acc, *src, nb, p, n0 == 0)
			}
		}
	}
}

// packedF32 packs the weights w for the F32 kernels into a scratch of n
// floats, widening them first when they are F16.
func packedF32(w *Buffer, n int, pack func(panel, w []float32)) *[]float32 {
	panel := getScratch(n)
	if w.dt != dtype.F16 {
		pack(*panel, w.f32)
		return panel
	}
	w32 := getScratch(w.n)
	dtype.DecodeF16(*w32, w.u16)
	pack(*panel, *w32)
	putScratch(w32)
	return panel
}

// imageGrain is how many images make a parallel piece of work per image
// (multiply-adds): about 64K multiply-adds or more, so that a piece costs
// far more than claiming it.
func imageGrain(work int) int { return max(1, (1<<16)/max(work, 1)) }

// ConvForward computes y = x ⋆ w + b with the direct kernels, images
// shared out among the cores.
func (d *Device) ConvForward(y, x, w, b device.Buffer, s device.ConvShape, oc int) {
	yb, xb, wb := d.buf(y, "ConvForward"), d.buf(x, "ConvForward"), d.buf(w, "ConvForward")
	c := d.directPlan("ConvForward", s, oc, xb.dt)
	kk, ohw := s.KH*s.KW, s.OH*s.OW
	d.checkLen("ConvForward", s.N*oc*ohw, yb)
	d.checkLen("ConvForward", s.N*s.C*s.H*s.W, xb)
	d.checkLen("ConvForward", oc*s.C*kk, wb)
	sameDType("ConvForward", xb, yb, wb)
	j := directJobs.Get().(*directJob)
	*j = directJob{c: c}
	var bias *[]float32
	if b != nil {
		bb := d.buf(b, "ConvForward")
		d.checkLen("ConvForward", oc, bb)
		sameDType("ConvForward", xb, bb)
		bias = getScratch(oc)
		get := read(bb, 0, oc)
		copy(*bias, get.v)
		get.done()
		j.bias = *bias
	}
	var panel *[]float32
	switch xb.dt {
	case dtype.BF16:
		j.kind, j.out16, j.in16 = directForward16, yb.u16, xb.u16
		panel = getScratch((c.ForwardPanelLenBF16() + 1) / 2)
		j.panel16 = halves(*panel)
		c.PackForwardBF16(j.panel16, wb.u16)
	default:
		j.kind, j.out, j.in = directForward, yb.f32, xb.f32
		if xb.dt == dtype.F16 {
			j.kind, j.out16, j.in16 = directForwardF16, yb.u16, xb.u16
		}
		panel = packedF32(wb, c.ForwardPanelLen(), c.PackForward)
		j.panel = *panel
	}
	d.parallelRunner(s.N, imageGrain(oc*s.C*kk*ohw), j)
	putScratch(panel)
	if bias != nil {
		putScratch(bias)
	}
	*j = directJob{}
	directJobs.Put(j)
}

// ConvInputGrad overwrites dx with the input gradient of dy through w,
// images shared out among the cores.
func (d *Device) ConvInputGrad(dx, dy, w device.Buffer, s device.ConvShape, oc int) {
	db, gb, wb := d.buf(dx, "ConvInputGrad"), d.buf(dy, "ConvInputGrad"), d.buf(w, "ConvInputGrad")
	c := d.directPlan("ConvInputGrad", s, oc, gb.dt)
	kk, ohw := s.KH*s.KW, s.OH*s.OW
	d.checkLen("ConvInputGrad", s.N*s.C*s.H*s.W, db)
	d.checkLen("ConvInputGrad", s.N*oc*ohw, gb)
	d.checkLen("ConvInputGrad", oc*s.C*kk, wb)
	sameDType("ConvInputGrad", gb, db, wb)
	j := directJobs.Get().(*directJob)
	*j = directJob{c: c}
	var panel *[]float32
	switch gb.dt {
	case dtype.BF16:
		j.kind, j.out16, j.in16 = directInputGrad16, db.u16, gb.u16
		panel = getScratch((c.InputGradPanelLenBF16() + 1) / 2)
		j.panel16 = halves(*panel)
		c.PackInputGradBF16(j.panel16, wb.u16)
	default:
		j.kind, j.out, j.in = directInputGrad, db.f32, gb.f32
		if gb.dt == dtype.F16 {
			j.kind, j.out16, j.in16 = directInputGradF16, db.u16, gb.u16
		}
		panel = packedF32(wb, c.InputGradPanelLen(), c.PackInputGrad)
		j.panel = *panel
	}
	d.parallelRunner(s.N, imageGrain(oc*s.C*kk*ohw), j)
	putScratch(panel)
	*j = directJob{}
	directJobs.Put(j)
}

// wgradChunkFloats bounds a weight-gradient chunk's prepared images, in
// floats: 256 Ki floats (1 MiB) stay in a core's L2 while every piece of
// the kernel reads them.
const wgradChunkFloats = 1 << 18

// ConvWeightGrad overwrites dw with the weight gradient of dy and x. The
// cores share out the kernel's pieces (parts of dw), a run of them each,
// and each core goes through every image in chunks, laying each chunk out
// itself and running its pieces over it: every piece adds the chunks in
// order, so dw's bits do not depend on the number of cores. The layouts
// are made once a core, not once in all: when the cores shared each
// chunk's layouts instead, each read the other's and met it at two
// barriers a chunk, and at two cores the ResNet-20 shapes ran no faster
// than at one.
func (d *Device) ConvWeightGrad(dw, dy, x device.Buffer, s device.ConvShape, oc int) {
	wb, gb, xb := d.buf(dw, "ConvWeightGrad"), d.buf(dy, "ConvWeightGrad"), d.buf(x, "ConvWeightGrad")
	c := d.directPlan("ConvWeightGrad", s, oc, xb.dt)
	kk, ohw := s.KH*s.KW, s.OH*s.OW
	if wb.dt != dtype.F32 {
		panic(fmt.Sprintf("cpu: ConvWeightGrad into %v; want f32", wb.dt))
	}
	d.checkLen("ConvWeightGrad", oc*s.C*kk, wb)
	d.checkLen("ConvWeightGrad", s.N*oc*ohw, gb)
	d.checkLen("ConvWeightGrad", s.N*s.C*s.H*s.W, xb)
	sameDType("ConvWeightGrad", xb, gb)
	bf := xb.dt == dtype.BF16
	per, accLen, pieces := c.WeightGradPrepLen(), c.WeightGradAccLen(), c.WeightGradPieces()
	if bf {
		per, accLen, pieces = c.WeightGradPrepLenBF16(), c.WeightGradAccLenBF16(), c.WeightGradPiecesBF16()
	}
	acc := getScratch(accLen)
	j := directJobs.Get().(*directJob)
	*j = directJob{kind: directWeightGrad, c: c, acc: *acc, chunk: max(1, min(s.N, wgradChunkFloats/per))}
	switch xb.dt {
	case dtype.BF16:
		j.kind, j.in16, j.x16 = directWeightGrad16, gb.u16, xb.u16
	case dtype.F16:
		j.kind, j.in16, j.x16 = directWeightGradF16, gb.u16, xb.u16
	default:
		j.in, j.x = gb.f32, xb.f32
	}
	d.parallelRunner(pieces, (pieces+d.workers-1)/d.workers, j)
	if bf {
		c.FinishWeightGradBF16(wb.f32, *acc)
	} else {
		c.FinishWeightGrad(wb.f32, *acc)
	}
	*j = directJob{}
	directJobs.Put(j)
	putScratch(acc)
}

// sameDType panics unless every buffer has a's dtype: the direct kernels
// take one dtype for all their operands.
func sameDType(op string, a *Buffer, bs ...*Buffer) {
	for _, b := range bs {
		if b.dt != a.dt {
			panic(fmt.Sprintf("cpu: %s: operands in %v and %v; want one dtype", op, a.dt, b.dt))
		}
	}
}

// halves views a float32 scratch as bfloat16 bits, two to a word.
func halves(f []float32) []uint16 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&f[0])), 2*len(f))
}
