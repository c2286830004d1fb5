package cpu

import (
	"fmt"
	"os"
	"sync"

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

// DirectConv reports whether the direct kernels run s: F32 operands, on a
// CPU with AVX-512.
func (d *Device) DirectConv(s device.ConvShape, oc int, dt dtype.DType) bool {
	return !directConvOff && dt == dtype.F32 && s.Valid() && s.N0 == 0 && s.NB == s.N && gemm.ConvSupported(convGeom(s, oc))
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

// directJob is one direct convolution call's images or tiles, run by the
// device's parallel pieces from a pool (as convJob is).
type directJob struct {
	kind           directKind
	c              *gemm.Conv
	out, in, panel []float32
	bias           []float32
	// The weight gradient: dw, dy, and the chunk's source images from
	// image n0 on (nb of them).
	dw, dy, src []float32
	n0, nb      int
	first       bool
}

type directKind uint8

const (
	directForward directKind = iota
	directInputGrad
	directSplit // split images [n0, n0+nb) of in into src
	directWeightGrad
)

var directJobs = sync.Pool{New: func() any { return new(directJob) }}

func (j *directJob) runPieces(lo, hi int) {
	switch j.kind {
	case directForward, directInputGrad:
		n := j.c.ForwardScratchLen()
		if j.kind == directInputGrad {
			n = j.c.InputGradScratchLen()
		}
		scr := getScratch(n)
		for i := lo; i < hi; i++ {
			if j.kind == directForward {
				j.c.Forward(j.out, j.in, j.panel, j.bias, i, *scr)
			} else {
				j.c.InputGrad(j.out, j.in, j.panel, i, *scr)
			}
		}
		putScratch(scr)
	case directSplit:
		l := j.c.SplitLen()
		for i := lo; i < hi; i++ {
			j.c.Split(j.src[i*l:(i+1)*l], j.in, j.n0+i)
		}
	case directWeightGrad:
		for t := lo; t < hi; t++ {
			j.c.WeightGrad(j.dw, j.dy, j.src, j.n0, j.nb, t, j.first)
		}
	}
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
	j := directJobs.Get().(*directJob)
	*j = directJob{kind: directForward, c: c, out: d.f32Of("ConvForward", yb), in: d.f32Of("ConvForward", xb)}
	if b != nil {
		bb := d.buf(b, "ConvForward")
		d.checkLen("ConvForward", oc, bb)
		j.bias = d.f32Of("ConvForward", bb)
	}
	panel := getScratch(c.ForwardPanelLen())
	c.PackForward(*panel, d.f32Of("ConvForward", wb))
	j.panel = *panel
	d.parallelRunner(s.N, imageGrain(oc*s.C*kk*ohw), j)
	putScratch(panel)
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
	j := directJobs.Get().(*directJob)
	*j = directJob{kind: directInputGrad, c: c, out: d.f32Of("ConvInputGrad", db), in: d.f32Of("ConvInputGrad", gb)}
	panel := getScratch(c.InputGradPanelLen())
	c.PackInputGrad(*panel, d.f32Of("ConvInputGrad", wb))
	j.panel = *panel
	d.parallelRunner(s.N, imageGrain(oc*s.C*kk*ohw), j)
	putScratch(panel)
	*j = directJob{}
	directJobs.Put(j)
}

// wgradChunkFloats bounds a weight-gradient chunk's dy and source images,
// in floats: 256 Ki floats (1 MiB) stay in a core's L2 while every tile
// of the chunk reads them.
const wgradChunkFloats = 1 << 18

// ConvWeightGrad overwrites dw with the weight gradient of dy and x,
// summed over the images a chunk at a time (chunks in order, so the sums
// do not depend on the number of cores), each chunk's tiles shared out
// among the cores.
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
	src := c.SourceLen()
	chunk := max(1, min(s.N, wgradChunkFloats/(oc*ohw+src)))
	var split *[]float32
	if c.SplitLen() > 0 {
		split = getScratch(chunk * src)
	}
	xs := d.f32Of("ConvWeightGrad", xb)
	j := directJobs.Get().(*directJob)
	tiles := c.WeightGradTiles()
	// A tile's work for one chunk, in multiply-adds.
	tileWork := 16 * chunk * ohw
	for n0 := 0; n0 < s.N; n0 += chunk {
		nb := min(chunk, s.N-n0)
		*j = directJob{kind: directWeightGrad, c: c, dw: wb.f32, dy: d.f32Of("ConvWeightGrad", gb), n0: n0, nb: nb, first: n0 == 0}
		if split != nil {
			j.kind, j.in, j.src = directSplit, xs, *split
			d.parallelRunner(nb, imageGrain(src), j)
			j.kind = directWeightGrad
		} else {
			j.src = xs[n0*src : (n0+nb)*src]
		}
		d.parallelRunner(tiles, imageGrain(tileWork), j)
	}
	*j = directJob{}
	directJobs.Put(j)
	if split != nil {
		putScratch(split)
	}
}

// f32Of returns b's float32 storage; the direct kernels take F32 alone.
func (d *Device) f32Of(op string, b *Buffer) []float32 {
	if b.dt != dtype.F32 {
		panic(fmt.Sprintf("cpu: %s: %v operand; want f32", op, b.dt))
	}
	return b.f32
}
