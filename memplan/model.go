package memplan

import (
	"time"

	"github.com/mixprec/mixprec/nn"
)

// The search's model of a step's peak. A step's graph keeps what a unit
// saves for its backward pass until that pass is done with it, and frees
// what nothing keeps as soon as it is dead (autograd.Graph.Free: a unit's
// output once the next unit has taken it, unless that one keeps it). So
// when the step reaches a unit, going forward or coming back, what is
// live is what the units before it keep (K, the sum of what each kept
// unit adds and each recomputed span's output) and what no choice changes,
// plus the unit's own memory at that moment. Every term of the peak is K
// up to an edge (a kept unit, or a span recomputed as one segment) plus a
// figure of that edge alone:
//
//   - a kept unit's forward pass, and its backward pass (its gradients
//     in flight, its own kept bytes, the gradients made so far);
//   - a recomputed span's first run, which keeps its units' results until
//     it ends; its recomputation, each unit's results kept until the
//     span's backward pass is done with them; and that backward pass;
//
// and once, after the chain, all of K with the head, the loss and their
// backward pass. That is what lets a dynamic programme over the chain
// find the cheapest choice that fits. The figures come from the two dry
// steps (Measure); what the model leaves out (values a unit's layers keep
// to the step's end, a unit that frees its input early) makes it err, so
// the plan the search finds is measured before it is trusted (Peak,
// Profile.Plan). Autocast's weight copies are counted as a run keeping
// every unit keeps them, throughout: an overcount where a plan
// recomputes, by at most the copies.

// edge is one step along the chain in a plan: keeping unit lo (hi = lo+1,
// span false) or recomputing the units [lo, hi) as one segment.
type edge struct {
	lo, hi int
	span   bool
	kept   int64         // what it adds to K
	local  int64         // its terms less K before it
	cost   time.Duration // recomputation
}

// keepEdge is unit i kept: its forward pass, and its backward pass with
// what the run keeping every unit has live then (the units after it done
// with, but for what their layers keep to the step's end: an overcount
// where the plan recomputes them).
func (p *Profile) keepEdge(i int) edge {
	u := p.Units[i]
	return edge{lo: i, hi: i + 1, kept: u.keptFwd, local: max(p.keptBase+u.keptPeak, u.keptBack+u.keptBackPeak)}
}

// spanEdge is the units [lo, hi) recomputed as one segment: its first run,
// then, when the backward pass reaches it, its units recomputed one after
// another and walked back, each with its recomputed forward and backward
// peaks (the first dry step's) on what the run keeping every unit has
// live at that unit less that unit's own kept bytes.
func (p *Profile) spanEdge(lo, hi int) edge {
	e := edge{lo: lo, hi: hi, span: true, kept: p.Units[hi-1].Output}
	var first, re int64
	last := p.Units[hi-1].keptBack - p.Units[hi-1].keptFwd
	for k := lo; k < hi; k++ {
		u := p.Units[k]
		e.cost += u.Recompute
		e.local = max(e.local, p.keptBase+first+u.firstPeak, last+re+u.fwdPeak, u.keptBack-u.keptFwd+re+u.backPeak)
		first += u.firstKept
		re += u.Kept
	}
	return e
}

// post is the term after the chain less K; pre the one before it, which
// no choice changes.
func (p *Profile) post() int64 { return p.keptPost }
func (p *Profile) pre() int64  { return p.keptPre }

// edges turns spans into the chain's edges.
func (p *Profile) edges(spans []nn.Span) []edge {
	nn.CheckSpans("memplan.Estimate", spans, len(p.Units))
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

// Estimate is the peak the model above gives for a step that recomputes
// the given spans of units (nil: none), in bytes: the search's guide,
// computed in no time. Peak measures.
func (p *Profile) Estimate(spans []nn.Span) int64 {
	var k int64
	peak := p.pre()
	for _, e := range p.edges(spans) {
		peak = max(peak, k+e.local)
		k += e.kept
	}
	return max(peak, k+p.post())
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
