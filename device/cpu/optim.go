package cpu

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// f32 checks that every non-nil buffer in bufs is a live F32 buffer of this
// device as long as the first, naming op and the operand's position.
func (d *Device) f32(op string, bufs ...device.Buffer) []*Buffer {
	return device.OwnF32s[Buffer](d, "cpu", op, bufs...)
}

// f32At is f32 for one operand, without the slices the optimisers would
// otherwise allocate every step: it checks that b is a live F32 buffer of
// this device with n elements (any number when n < 0), naming op and the
// operand's position i.
func (d *Device) f32At(op string, i int, b device.Buffer, n int) *Buffer {
	return device.OwnF32[Buffer](d, b, "cpu", op, i, n)
}

// SGD is PyTorch's SGD step with momentum, dampening, Nesterov and weight decay.
func (d *Device) SGD(p, g, mom device.Buffer, h device.SGDParams) { d.sgd(p, g, mom, nil, h) }

// SGDCast is SGD that also writes the updated p, rounded, into the 16-bit
// buffer low: device.StepCaster, for autocast's cached weight copies.
func (d *Device) SGDCast(p, g, mom, low device.Buffer, h device.SGDParams) {
	d.sgd(p, g, mom, low, h)
}

func (d *Device) sgd(p, g, mom, low device.Buffer, h device.SGDParams) {
	pb := d.f32At("SGD", 0, p, -1)
	gb := d.f32At("SGD", 1, g, pb.n)
	mb := d.momentum(mom, h, pb.n)
	lb := d.lowCopy("SGDCast", low, pb.n)
	if pb.n <= grain {
		stepCast(pb, lb, 0, pb.n, func(lo, hi int) { sgdPiece(pb, gb, mb, h, lo, hi) })
		return
	}
	d.parallel(pb.n, func(lo, hi int) {
		stepCast(pb, lb, lo, hi, func(lo, hi int) { sgdPiece(pb, gb, mb, h, lo, hi) })
	})
}

// momentum checks SGD's momentum buffer, nil when h has no momentum. (A
// variable assigned once, so that the kernel's closures copy it.)
func (d *Device) momentum(mom device.Buffer, h device.SGDParams, n int) *Buffer {
	if h.Momentum == 0 {
		return nil
	}
	if mom == nil {
		panic("cpu: SGD with momentum needs a momentum buffer")
	}
	return d.f32At("SGD", 2, mom, n)
}

// sgdPiece is the SGD step on [lo, hi).
func sgdPiece(pb, gb, mb *Buffer, h device.SGDParams, lo, hi int) {
	ps, gs := pb.f32[lo:hi], gb.f32[lo:hi]
	if h.Momentum == 0 {
		gs = gs[:len(ps)]
		if h.WeightDecay == 0 {
			done := sgdPlainSIMD(ps, gs, h.LR)
			for i, g := range gs[done:] {
				ps[done+i] -= float32(h.LR * g)
			}
			return
		}
		for i, g := range gs {
			ps[i] -= h.LR * (g + h.WeightDecay*ps[i])
		}
		return
	}
	ms := mb.f32[lo:hi]
	ms, gs = ms[:len(ps)], gs[:len(ps)]
	// The common case, hoisted out of the general loop: plain momentum
	// after the first step, no weight decay.
	if !h.First && !h.Nesterov && h.WeightDecay == 0 {
		damp := 1 - h.Dampening
		for i := sgdMomentumSIMD(ps, gs, ms, h.Momentum, damp, h.LR); i < len(ps); i++ {
			ms[i] = float32(h.Momentum*ms[i]) + float32(damp*gs[i])
			ps[i] -= float32(h.LR * ms[i])
		}
		return
	}
	for i := range ps {
		gi := gs[i]
		if h.WeightDecay != 0 {
			gi += h.WeightDecay * ps[i]
		}
		if h.First {
			ms[i] = gi
		} else {
			ms[i] = h.Momentum*ms[i] + (1-h.Dampening)*gi
		}
		if h.Nesterov {
			gi += h.Momentum * ms[i]
		} else {
			gi = ms[i]
		}
		ps[i] -= h.LR * gi
	}
}

// lowCopy checks the copy a fused step writes (nil for a plain step): a
// live 16-bit buffer of this device with n elements.
func (d *Device) lowCopy(op string, low device.Buffer, n int) *Buffer {
	if low == nil {
		return nil
	}
	lb := d.buf(low, op)
	if !lb.dt.Half() || lb.n != n {
		panic(fmt.Sprintf("cpu: %s: copy of %d %v elements for a parameter of %d; want f16 or bf16 of the same length", op, lb.n, lb.dt, n))
	}
	return lb
}

// castBlock is how many elements a fused step updates before rounding them
// into the copy: 8 KiB of float32, still in L1 when they are read back.
const castBlock = 2048

// stepCast runs step on [lo, hi) and, when lb is not nil, rounds the
// updated parameters into lb block by block, so that the copy costs a pass
// over cached data instead of a second pass over memory. The step is
// elementwise, so splitting it into blocks does not change its results.
// step does not escape: the single-piece paths allocate nothing.
func stepCast(pb, lb *Buffer, lo, hi int, step func(lo, hi int)) {
	if lb == nil {
		step(lo, hi)
		return
	}
	for b := lo; b < hi; b += castBlock {
		e := min(b+castBlock, hi)
		step(b, e)
		dtype.Encode(lb.dt, lb.u16[b:e], pb.f32[b:e])
	}
}

// Adam is PyTorch's Adam step, or AdamW's when h.Decoupled.
func (d *Device) Adam(p, g, m, v device.Buffer, h device.AdamParams) { d.adam(p, g, m, v, nil, h) }

// AdamCast is Adam that also writes the updated p, rounded, into the 16-bit
// buffer low: device.StepCaster, for autocast's cached weight copies.
func (d *Device) AdamCast(p, g, m, v, low device.Buffer, h device.AdamParams) {
	d.adam(p, g, m, v, low, h)
}

func (d *Device) adam(p, g, m, v, low device.Buffer, h device.AdamParams) {
	pb := d.f32At("Adam", 0, p, -1)
	gb, mb, vb := d.f32At("Adam", 1, g, pb.n), d.f32At("Adam", 2, m, pb.n), d.f32At("Adam", 3, v, pb.n)
	if h.Step < 1 {
		panic(fmt.Sprintf("cpu: Adam step %d, want >= 1", h.Step))
	}
	k := adamConstsOf(h) // assigned once, so that the closures copy it
	lb := d.lowCopy("AdamCast", low, pb.n)
	if pb.n <= grain {
		stepCast(pb, lb, 0, pb.n, func(lo, hi int) { adamPiece(pb, gb, mb, vb, k, lo, hi) })
		return
	}
	d.parallel(pb.n, func(lo, hi int) {
		stepCast(pb, lb, lo, hi, func(lo, hi int) { adamPiece(pb, gb, mb, vb, k, lo, hi) })
	})
}

// adamConstsOf computes the per-element constants of the step h.
func adamConstsOf(h device.AdamParams) adamConsts {
	stepSize, bc2sqrt, decay := h.Scalars()
	k := adamConsts{omb1: 1 - h.Beta1, b2: h.Beta2, omb2: 1 - h.Beta2, stepSize: stepSize,
		bc2sqrt: bc2sqrt, eps: h.Eps, decay: decay, wd: h.WeightDecay}
	switch {
	case h.WeightDecay == 0:
	case h.Decoupled:
		k.mode = adamDecoupled
	default:
		k.mode = adamCoupled
	}
	return k
}

// adamPiece is the Adam step on [lo, hi). k is a copy: the assembly reads
// it through a pointer that does not escape.
func adamPiece(pb, gb, mb, vb *Buffer, k adamConsts, lo, hi int) {
	ps, gs, ms, vs := pb.f32[lo:hi], gb.f32[lo:hi], mb.f32[lo:hi], vb.f32[lo:hi]
	done := adamSIMD(ps, gs, ms, vs, &k)
	adamGo(ps[done:], gs[done:], ms[done:], vs[done:], &k)
}

// adamConsts are an Adam step's per-element constants, laid out for the
// assembly loop (offsets 0 to 32).
type adamConsts struct {
	omb1, b2, omb2, stepSize, bc2sqrt, eps, decay, wd float32
	mode                                              int32
}

// Weight-decay modes of adamConsts.
const (
	adamNoDecay   = 0
	adamCoupled   = 1 // Adam: the decay joins the gradient
	adamDecoupled = 2 // AdamW: the decay shrinks the weight
)

// adamGo is the reference loop; adamAVX512 and adamAVX2 perform the same
// operations. Here and in the SGD loops the conversions around products
// round them, which keeps the compiler from fusing a product and a sum
// into an FMA (it does under GOAMD64=v3): the assembly does not fuse.
func adamGo(ps, gs, ms, vs []float32, k *adamConsts) {
	gs, ms, vs = gs[:len(ps)], ms[:len(ps)], vs[:len(ps)]
	for i := range ps {
		gi := gs[i]
		switch k.mode {
		case adamCoupled:
			gi += float32(k.wd * ps[i])
		case adamDecoupled:
			ps[i] *= k.decay
		}
		ms[i] += float32(k.omb1 * (gi - ms[i]))
		vs[i] = float32(k.b2*vs[i]) + float32(k.omb2*gi*gi)
		denom := float32(math.Sqrt(float64(vs[i])))/k.bc2sqrt + k.eps
		ps[i] -= k.stepSize * ms[i] / denom
	}
}

// UnscaleCheck multiplies every gradient by inv and reports any Inf or NaN.
// The gradients' pieces are shared out among the cores as one task (see
// multiPieces). OR is order-independent, so the answer does not depend on
// which goroutine ran which piece.
func (d *Device) UnscaleCheck(grads []device.Buffer, inv float32) bool {
	u := unscaleMultis.Get().(*unscaleMulti)
	u.bufs, u.inv = u.bufs[:0], inv
	u.found.Store(false)
	for i, g := range grads {
		u.bufs = append(u.bufs, d.f32At("UnscaleCheck", i, g, -1))
	}
	d.parallelRunner(u.cut(u.length, len(u.bufs)), 1, u)
	found := u.found.Load()
	clear(u.bufs[:cap(u.bufs)])
	unscaleMultis.Put(u)
	return found
}

// unscaleMulti is one UnscaleCheck call, pooled.
type unscaleMulti struct {
	multiPieces
	bufs  []*Buffer
	inv   float32
	found atomic.Bool
}

var unscaleMultis = sync.Pool{New: func() any { return new(unscaleMulti) }}

func (u *unscaleMulti) length(i int) int { return u.bufs[i].n }

func (u *unscaleMulti) runPieces(lo, hi int) {
	for p := lo; p < hi; p++ {
		t, l, h := u.at(p, u.length)
		if unscalePiece(u.bufs[t], u.inv, l, h) {
			u.found.Store(true)
		}
	}
}

// unscalePiece multiplies b[lo:hi] by inv and reports any Inf or NaN.
func unscalePiece(b *Buffer, inv float32, lo, hi int) bool {
	s := b.f32[lo:hi]
	done, nf := unscaleSIMD(s, inv)
	for i, v := range s[done:] {
		i += done
		v *= inv
		s[i] = v
		if v-v != 0 { // NaN for Inf and NaN alike
			nf = true
		}
	}
	return nf
}
