package memplan

import (
	"time"

	"github.com/mixprec/mixprec/nn"
)

// The peak model. A graph frees nothing of its forward pass until the
// step ends, so every byte a kept unit leaves (Kept) and the output of
// every recomputed span stays through the backward pass: call their sum
// the chain's kept bytes K. A step's peak is then the largest of
//
//   - a kept unit's forward pass: what was live when the chain began, the
//     kept bytes of the units before it, and its own forward peak;
//   - a recomputed span's first run, which keeps its units' results until
//     the span ends (the segment's graph is released then);
//   - after the chain: K, the head, the loss and their backward pass;
//   - a kept unit's backward pass: K, the gradients made so far and the
//     one arriving, and the unit's own backward peak;
//   - a recomputed span's backward pass: K and all of the span's kept
//     bytes again (recomputed before the first of its units is walked
//     back and freed after the last), with each of its units' backward
//     peaks in turn, and the recomputation's own forward peaks;
//   - the end of the backward pass (what comes before the chain).
//
// Every term but the forward ones is K plus a figure that depends only on
// the span or unit it belongs to, which is what lets a dynamic programme
// over the chain find the cheapest choice that fits.

// edge is one step along the chain in a plan: keeping unit lo (hi = lo+1,
// span false) or recomputing the units [lo, hi) as one segment.
type edge struct {
	lo, hi int
	span   bool
	kept   int64         // what it adds to K
	fwd    int64         // its forward peak above the kept bytes before it and fwdBase
	local  int64         // its backward terms less K
	cost   time.Duration // recomputation
}

// keepEdge is unit i kept.
func (p *Profile) keepEdge(i int) edge {
	u := p.Units[i]
	return edge{lo: i, hi: i + 1, kept: u.Kept, fwd: u.fwdPeak, local: u.backBase + u.backPeak - u.Kept}
}

// spanEdge is the units [lo, hi) recomputed as one segment.
func (p *Profile) spanEdge(lo, hi int) edge {
	e := edge{lo: lo, hi: hi, span: true, kept: p.Units[hi-1].Output}
	var first, re, all int64
	for i := lo; i < hi; i++ {
		all += p.Units[i].Kept
		e.cost += p.Units[i].Recompute
	}
	last := p.Units[hi-1].backBase
	for k := lo; k < hi; k++ {
		u := p.Units[k]
		e.fwd = max(e.fwd, first+u.firstPeak)
		first += u.firstKept
		e.local = max(e.local, last+re+u.fwdPeak, u.backBase+all+u.backPeak-u.Kept)
		re += u.Kept
	}
	return e
}

// global is the part of the backward terms no choice changes, less K.
func (p *Profile) global() int64 { return max(p.postBase+p.postPeak, p.preBase) }

// edges turns spans into the chain's edges.
func (p *Profile) edges(spans []nn.Span) []edge {
	nn.CheckSpans("memplan.Predict", spans, len(p.Units))
	var out []edge
	for i := 0; i < len(p.Units); {
		if len(spans) > 0 && spans[0].Lo == i {
			out = append(out, p.spanEdge(spans[0].Lo, spans[0].Hi))
			i = spans[0].Hi
			spans = spans[1:]
			continue
		}
		out = append(out, p.keepEdge(i))
		i++
	}
	return out
}

// Predict is the peak the profile predicts for a step that recomputes the
// given spans of units (nil: none), in bytes.
func (p *Profile) Predict(spans []nn.Span) int64 {
	var k, fwd int64
	q := p.global()
	for _, e := range p.edges(spans) {
		fwd = max(fwd, p.fwdBase+k+e.fwd)
		k += e.kept
		q = max(q, e.local)
	}
	return max(fwd, k+q)
}

// cost is the recomputation spans add to a step.
func (p *Profile) cost(spans []nn.Span) time.Duration {
	var c time.Duration
	for _, s := range spans {
		for i := s.Lo; i < s.Hi; i++ {
			c += p.Units[i].Recompute
		}
	}
	return c
}
