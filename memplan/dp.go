package memplan

import (
	"slices"
	"time"

	"github.com/mixprec/mixprec/nn"
)

// The search. A plan is a path along the chain from unit 0 to unit n, each
// step an edge (keep one unit, or recompute a span of them as one
// segment). After i units a partial plan is summed up by two figures: K,
// what the units so far keep, and the recomputation it costs. Every term
// of the peak is K up to an edge plus that edge's own figure (see
// model.go), checked as the edge is taken, and K at the end plus the
// head's; so a partial plan that costs no less and keeps no less than
// another at the same position can be dropped: dynamic programming over
// the chain, each position keeping only the partial plans no other
// dominates. The result is the cheapest plan whose estimate fits, not a
// heuristic's; TestSearchExhaustive checks it against every choice for
// small chains.

// label is a partial plan: its figures, the position it has reached, and
// the edge that made it with the label it extends, to read the plan back.
type label struct {
	k    int64
	cost int64 // in quanta
	at   int32 // units covered: [0, at)
	prev int32 // index of the label it extends; -1 for the empty plan
	e    int32 // the edge: -1 kept unit at-1, else the span [at-e-1, at)
}

// search returns the cheapest choice of spans whose estimated peak
// (Estimate) is at most budget, that estimate, and whether there is one.
// With ignoreCost it only asks whether one fits (every plan costs
// nothing).
//
// It is a label-setting search (the resource-constrained shortest path's):
// partial plans come off a queue cheapest first, one that keeps no less
// than another already taken at the same position is dropped, and the
// others are extended from there. Recomputation costs nothing negative, so
// the first complete plan taken is the cheapest (of those as cheap, the
// one that keeps least is kept). A label's extensions by longer and longer
// spans cost more and more, so they are queued one at a time, each when
// the one before it comes off the queue: the queue stays about as long as
// the number of labels taken.
func (p *Profile) search(budget int64, ignoreCost bool) ([]nn.Span, int64, bool) {
	n := len(p.Units)
	if est := p.Estimate(nil); est <= budget {
		return nil, est, true // nothing recomputed costs nothing
	}
	if p.pre() > budget {
		return nil, 0, false
	}
	post := p.post()
	// rest[i] is the least K the units [i, n) can add, so that a partial
	// plan at i ends with K at least its own plus rest[i].
	rest := make([]int64, n+1)
	for i := n - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + p.Units[i].keptFwd
		for h := i + 1; h <= n; h++ {
			rest[i] = min(rest[i], rest[h]+p.Units[h-1].Output)
		}
	}
	keep, span, cost := p.allEdges(ignoreCost)
	labels := []label{{prev: -1}}
	// least[i] is the least K of the labels taken at position i: every
	// label taken there costs no more than any still queued, so one that
	// keeps no less is dominated.
	least := make([]int64, n+1)
	for i := range least {
		least[i] = -1
	}
	taken := func(at int, k int64) bool { return least[at] >= 0 && least[at] <= k }
	var q queue
	// extend queues label id's extension by edge j (-1: keep the next
	// unit), or with more the first of j, j+1, ... within the budget.
	extend := func(id int32, j int32, more bool) {
		l := &labels[id]
		i := int(l.at)
		for ; int(j) < n-i; j++ {
			e, c := &keep[i], int64(0)
			if j >= 0 {
				e, c = &span[i][j], cost[i][j]
			}
			if l.k+e.local <= budget {
				t := entry{k: l.k + e.kept, cost: l.cost + c, prev: id, e: j}
				if t.k+rest[e.hi]+post <= budget && !taken(e.hi, t.k) {
					q.push(t)
					return
				}
			}
			if !more {
				return
			}
		}
	}
	extend(0, -1, false)
	extend(0, 0, true)
	for len(q) > 0 {
		t := q.pop()
		if t.e >= 0 {
			extend(t.prev, t.e+1, true)
		}
		at := labels[t.prev].at + 1
		if t.e >= 0 {
			at = labels[t.prev].at + t.e + 1
		}
		if taken(int(at), t.k) {
			continue
		}
		least[at] = t.k
		labels = append(labels, label{k: t.k, cost: t.cost, at: at, prev: t.prev, e: t.e})
		id := int32(len(labels) - 1)
		if int(at) == n {
			spans := readBack(labels, id)
			return spans, p.Estimate(spans), true
		}
		extend(id, -1, false)
		extend(id, 0, true)
	}
	return nil, 0, false
}

// allEdges builds the search's edges once: keep[i], and span[i][h-i-1]
// for [i, h) with cost[i][h-i-1] its cost in quanta (0 with ignoreCost).
func (p *Profile) allEdges(ignoreCost bool) (keep []edge, span [][]edge, cost [][]int64) {
	n := len(p.Units)
	quanta := p.quanta()
	keep, span, cost = make([]edge, n), make([][]edge, n), make([][]int64, n)
	for i := range n {
		keep[i] = p.keepEdge(i)
		span[i] = make([]edge, n-i)
		cost[i] = make([]int64, n-i)
		var c int64
		for h := i + 1; h <= n; h++ {
			span[i][h-i-1] = p.spanEdge(i, h)
			if !ignoreCost {
				c += quanta[h-1]
			}
			cost[i][h-i-1] = c
		}
	}
	return keep, span, cost
}

// readBack is the spans of the plan that label id ends.
func readBack(labels []label, id int32) []nn.Span {
	var spans []nn.Span
	for l := labels[id]; l.prev >= 0; l = labels[l.prev] {
		if l.e >= 0 {
			spans = append(spans, nn.Span{Lo: int(l.at - l.e - 1), Hi: int(l.at)})
		}
	}
	slices.Reverse(spans)
	return spans
}

// queue is a binary heap of extensions of labels by cost, then K (of two
// plans that cost the same, the one that keeps less is taken first).
type queue []entry

// entry is a label not yet taken: its figures, the label it extends and
// the edge (-1 keeps the next unit, j recomputes the next j+1).
type entry struct {
	k, cost int64
	prev, e int32
}

func (a *entry) less(b *entry) bool {
	if a.cost != b.cost {
		return a.cost < b.cost
	}
	return a.k < b.k
}

func (q *queue) push(e entry) {
	*q = append(*q, e)
	h := *q
	for i := len(h) - 1; i > 0; {
		up := (i - 1) / 2
		if !h[i].less(&h[up]) {
			break
		}
		h[i], h[up] = h[up], h[i]
		i = up
	}
}

func (q *queue) pop() entry {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c+1].less(&h[c]) {
			c++
		}
		if !h[c].less(&h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*q = h
	return top
}

// quanta are the units' recomputation times in the search's unit, a
// 256th of the longest: a time measured once on a busy machine is not
// worth more digits, and plans whose costs tie are told apart by their
// peak, and are pruned as equals, which keeps the search fast.
func (p *Profile) quanta() []int64 {
	var longest time.Duration
	for _, u := range p.Units {
		longest = max(longest, u.Recompute)
	}
	q := max(longest/256, 1)
	out := make([]int64, len(p.Units))
	for i, u := range p.Units {
		out[i] = int64((u.Recompute + q/2) / q)
	}
	return out
}
