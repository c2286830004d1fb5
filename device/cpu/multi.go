package cpu

import (
	"fmt"
	"sync"

	"github.com/mixprec/mixprec/device"
)

// multiPieces cuts tensors of the given lengths into pieces of at most
// grain elements: piece p of the whole is elements [lo, hi) of tensor t.
// The cut depends on the lengths alone, so per-piece results combined in
// piece order do not depend on the number of workers.
type multiPieces struct {
	start []int // start[t] is tensor t's first piece; start[len] the total
}

func (mp *multiPieces) cut(lengths func(i int) int, n int) int {
	mp.start = mp.start[:0]
	total := 0
	for i := range n {
		mp.start = append(mp.start, total)
		total += (lengths(i) + grain - 1) / grain
	}
	mp.start = append(mp.start, total)
	return total
}

// at returns piece p's tensor and element range, for tensors of lengths.
func (mp *multiPieces) at(p int, length func(i int) int) (t, lo, hi int) {
	// Binary search over the starts: a model has tens of tensors.
	l, h := 0, len(mp.start)-1
	for l+1 < h {
		m := (l + h) / 2
		if mp.start[m] <= p {
			l = m
		} else {
			h = m
		}
	}
	lo = (p - mp.start[l]) * grain
	return l, lo, min(lo+grain, length(l))
}

// adamMulti is one AdamMulti call, pooled so that a step allocates nothing.
type adamMulti struct {
	multiPieces
	ps, gs, ms, vs, lows []*Buffer
	ks                   []adamConsts
}

var adamMultis = sync.Pool{New: func() any { return new(adamMulti) }}

func (a *adamMulti) length(i int) int { return a.ps[i].n }

func (a *adamMulti) runPieces(lo, hi int) {
	for p := lo; p < hi; p++ {
		t, l, h := a.at(p, a.length)
		pb, gb, mb, vb, k := a.ps[t], a.gs[t], a.ms[t], a.vs[t], a.ks[t]
		stepCast(pb, a.lows[t], l, h, func(lo, hi int) { adamPiece(pb, gb, mb, vb, k, lo, hi) })
	}
}

// AdamMulti is Adam or AdamCast on every step, its pieces shared out among
// the cores as one task.
func (d *Device) AdamMulti(steps []device.AdamStep) {
	a := adamMultis.Get().(*adamMulti)
	a.ps, a.gs, a.ms, a.vs, a.lows, a.ks = a.ps[:0], a.gs[:0], a.ms[:0], a.vs[:0], a.lows[:0], a.ks[:0]
	for _, s := range steps {
		pb := d.f32At("AdamMulti", 0, s.P, -1)
		if s.H.Step < 1 {
			panic(fmt.Sprintf("cpu: AdamMulti step %d, want >= 1", s.H.Step))
		}
		a.ps = append(a.ps, pb)
		a.gs = append(a.gs, d.f32At("AdamMulti", 1, s.G, pb.n))
		a.ms = append(a.ms, d.f32At("AdamMulti", 2, s.M, pb.n))
		a.vs = append(a.vs, d.f32At("AdamMulti", 3, s.V, pb.n))
		a.lows = append(a.lows, d.lowCopy("AdamMulti", s.Low, pb.n))
		a.ks = append(a.ks, adamConstsOf(s.H))
	}
	total := a.cut(a.length, len(a.ps))
	d.parallelRunner(total, 1, a)
	clear(a.ps[:cap(a.ps)]) // drop the buffers for the pool
	clear(a.gs[:cap(a.gs)])
	clear(a.ms[:cap(a.ms)])
	clear(a.vs[:cap(a.vs)])
	clear(a.lows[:cap(a.lows)])
	adamMultis.Put(a)
}

// sumSquares is one SumSquares call: a float64 partial sum per piece.
type sumSquares struct {
	multiPieces
	bufs []*Buffer
	part []float64
}

var sumSquaresPool = sync.Pool{New: func() any { return new(sumSquares) }}

func (s *sumSquares) length(i int) int { return s.bufs[i].n }

func (s *sumSquares) runPieces(lo, hi int) {
	for p := lo; p < hi; p++ {
		t, l, h := s.at(p, s.length)
		s.part[p] = sumSqDev64(s.bufs[t].f32[l:h], 0)
	}
}

// SumSquares returns the float64 sum of squares of every element of bufs,
// each piece's sum added in piece order.
func (d *Device) SumSquares(bufs []device.Buffer) float64 {
	s := sumSquaresPool.Get().(*sumSquares)
	s.bufs = s.bufs[:0]
	for i, b := range bufs {
		s.bufs = append(s.bufs, d.f32At("SumSquares", i, b, -1))
	}
	total := s.cut(s.length, len(s.bufs))
	if cap(s.part) < total {
		s.part = make([]float64, total)
	}
	s.part = s.part[:total]
	d.parallelRunner(total, 1, s)
	var sum float64
	for _, v := range s.part {
		sum += v
	}
	clear(s.bufs[:cap(s.bufs)])
	sumSquaresPool.Put(s)
	return sum
}

var _ device.MultiTensor = (*Device)(nil)
