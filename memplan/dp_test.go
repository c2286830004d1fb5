package memplan

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mixprec/mixprec/nn"
)

// synthetic is a profile of n units with figures drawn from rng, shaped
// like measured ones (a unit's output is part of what it keeps, its peaks
// at least what it keeps) but otherwise arbitrary.
func synthetic(rng *rand.Rand, n int) *Profile {
	p := &Profile{Units: make([]UnitCost, n), Step: time.Second}
	mb := func(lo, hi int) int64 { return int64(lo+rng.IntN(hi-lo+1)) << 20 }
	p.keptBase = mb(10, 20)
	base := p.keptBase + mb(0, 5)
	for i := range p.Units {
		u := &p.Units[i]
		u.Kept = mb(0, 40)
		u.Output = min(u.Kept, mb(0, 10))
		if rng.IntN(5) == 0 {
			u.Output = mb(1, 10) // a view, cloned when a span ends with it
		}
		u.keptFwd = u.Kept - mb(0, 3)
		u.keptPeak = u.Kept + mb(0, 10)
		u.fwdPeak = u.Kept + mb(0, 10)
		u.firstKept = u.Kept - mb(0, 1)/2
		u.firstPeak = max(u.firstKept, u.fwdPeak-mb(0, 2))
		u.keptBack = base + u.keptFwd + mb(0, 10)
		u.keptBackPeak = u.Kept + mb(0, 20)
		u.backPeak = u.Kept + mb(0, 20)
		u.Recompute = time.Duration(1+rng.IntN(1000)) * time.Microsecond
	}
	p.keptPost, p.keptPre = base+mb(0, 30), base+mb(0, 20)
	return p
}

// allPlans calls fn with every choice of spans over n units.
func allPlans(n int, fn func(spans []nn.Span)) {
	var walk func(i int, spans []nn.Span)
	walk = func(i int, spans []nn.Span) {
		if i == n {
			fn(spans)
			return
		}
		walk(i+1, spans)
		for h := i + 1; h <= n; h++ {
			walk(h, append(spans, nn.Span{Lo: i, Hi: h}))
		}
	}
	walk(0, nil)
}

// quantaOf is the search's cost of spans.
func quantaOf(p *Profile, spans []nn.Span) int64 {
	q := p.quanta()
	var c int64
	for _, s := range spans {
		for i := s.Lo; i < s.Hi; i++ {
			c += q[i]
		}
	}
	return c
}

// TestSearchExhaustive checks the search against every plan of small
// random chains: at each budget it finds a plan exactly when one's
// estimate fits, the plan's estimate fits, and no plan whose estimate fits
// costs less; the least estimate is the least of any plan's.
func TestSearchExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 36))
	for trial := range 60 {
		n := 1 + trial%8
		p := synthetic(rng, n)
		type option struct {
			spans []nn.Span
			peak  int64
			cost  int64
		}
		var all []option
		least := int64(1 << 62)
		allPlans(n, func(spans []nn.Span) {
			o := option{slices.Clone(spans), p.Estimate(spans), quantaOf(p, spans)}
			all = append(all, o)
			least = min(least, o.peak)
		})
		if _, got := p.least(); got != least {
			t.Errorf("trial %d (%d units): least estimate %d, want %d", trial, n, got, least)
		}
		for _, o := range all {
			budget := o.peak
			var best *option
			for i := range all {
				c := &all[i]
				if c.peak <= budget && (best == nil || c.cost < best.cost) {
					best = c
				}
			}
			spans, peak, ok := p.search(budget, false)
			if !ok {
				t.Fatalf("trial %d (%d units): budget %d: no plan; %v fits (estimate %d, cost %d)", trial, n, budget, best.spans, best.peak, best.cost)
			}
			if peak != p.Estimate(spans) || peak > budget {
				t.Fatalf("trial %d: budget %d: plan %v has estimate %d (Estimate %d)", trial, budget, spans, peak, p.Estimate(spans))
			}
			if c := quantaOf(p, spans); c != best.cost {
				t.Fatalf("trial %d (%d units): budget %d: plan %v costs %d; %v costs %d",
					trial, n, budget, spans, c, best.spans, best.cost)
			}
			if _, _, ok := p.search(least-1, false); ok {
				t.Fatalf("trial %d: a plan fits %d, below every plan's estimate", trial, least-1)
			}
		}
	}
}

// TestQueue checks that the heap gives entries back cheapest first, the
// lower K first among equals.
func TestQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 36))
	var q queue
	var want []entry
	for i := range 500 {
		e := entry{k: int64(rng.IntN(10)), cost: int64(rng.IntN(30)), prev: int32(i)}
		q.push(e)
		want = append(want, e)
	}
	slices.SortStableFunc(want, func(a, b entry) int {
		switch {
		case a.less(&b):
			return -1
		case b.less(&a):
			return 1
		}
		return 0
	})
	for i := range want {
		got := q.pop()
		if got.cost != want[i].cost || got.k != want[i].k {
			t.Fatalf("pop %d: cost %d, K %d; want %d, %d", i, got.cost, got.k, want[i].cost, want[i].k)
		}
	}
}
