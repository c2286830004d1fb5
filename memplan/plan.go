package memplan

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/nn"
)

// Plan is the planner's choice for one budget: which spans of the chain to
// recompute, what the step's peak will be, and what it costs.
type Plan struct {
	// Budget is the memory the plan was made to fit, in bytes.
	Budget int64
	// Spans are the runs of units recomputed as one segment each, in
	// order: the choice nn.Chain.SetRecompute takes.
	Spans []nn.Span
	// Segments lists the candidates: each unit, with what recomputing it
	// alone would save and cost, and before the first unit of each chosen
	// span of several units, the span itself.
	Segments []Segment
	// Peak is the peak of a training step under the plan, in bytes,
	// measured by a dry step before the plan was returned (Profile.Peak):
	// the prediction the steps are held to. Unplanned is the peak without
	// recomputation (and with convolutions' scratch as the program has it).
	Peak, Unplanned int64
	// Recompute is the predicted extra time a step spends recomputing, and
	// Overhead that time as a fraction of a step without it (0.1 is 10%
	// slower), both from the dry step's timings. Bounding convolutions'
	// scratch (ConvChunk) changes their speed too, which is not counted:
	// one dry step each cannot time that difference reliably.
	Recompute time.Duration
	Overhead  float64
	// ConvChunk, when not 0, is the cap on convolutions' im2col chunks
	// (autograd.ConvChunk) the plan needs to bound scratch memory: the
	// step's graphs must be made with Options.
	ConvChunk int
	// Eval is how the program evaluates under the plan (FitEval); zero
	// until FitEval ran.
	Eval EvalFit

	profile *Profile
}

// Segment is one candidate of a plan: a unit, or a span of units
// recomputed as one segment.
type Segment struct {
	// Name is a unit's name and module ("3 ReLU()", "h.0.attn ln_1 +
	// attn"), or a span's "span 4-7"; Span the units it covers.
	Name string
	Span nn.Span
	// Saved is the memory recomputing it frees: the bytes it would keep
	// less the output a recomputed span keeps.
	Saved int64
	// Cost is its recomputation's time in the dry step.
	Cost time.Duration
	// Chosen reports whether the plan recomputes it.
	Chosen bool
}

// Plan chooses the spans to recompute with the least added time such that
// the peak of a step is at most budget bytes, and measures the choice
// before it returns it (Peak): the plan's Peak is what every step will
// reach. The search runs on the model's estimates (Estimate), which err
// high where the step frees values early; it is run again against a
// budget lowered by what a choice measured over, or raised by what one
// left unused, a few times, and the cheapest choice measured within the
// budget is kept. If none is with convolutions' scratch as the program
// has it, the planner takes a second dry step with that scratch at its
// least (autograd.ConvChunk, one image at a time) and plans with that.
// When still nothing fits it returns an *InfeasibleError naming the
// smallest budget that does.
func (p *Profile) Plan(budget int64) (*Plan, error) {
	if budget >= p.Unconstrained {
		return p.plan(budget, nil, p.Unconstrained), nil
	}
	spans, peak, ok, err := p.fit(budget)
	if err != nil || ok {
		return p.plan(budget, spans, peak), err
	}
	b, err := p.Bounded()
	if err != nil {
		return nil, err
	}
	if b != nil {
		if budget >= b.Unconstrained {
			return b.plan(budget, nil, b.Unconstrained), nil
		}
		spans, peak, ok, err := b.fit(budget)
		if err != nil || ok {
			return b.plan(budget, spans, peak), err
		}
	}
	min, brk, err := p.Minimum()
	if err != nil {
		return nil, err
	}
	if budget >= min.Peak {
		// The search's rounds missed the choice that the smallest budget
		// measured; it fits.
		fit := *min
		fit.Budget = budget
		return &fit, nil
	}
	return nil, &InfeasibleError{Budget: budget, Minimum: brk}
}

// fitRounds is how many choices Plan measures at most, per profile.
const fitRounds = 6

// fit runs the search against an effective budget that follows the
// measurements, and returns the cheapest choice measured within budget,
// its measured peak, and whether there was one.
func (p *Profile) fit(budget int64) ([]nn.Span, int64, bool, error) {
	quanta := p.quanta()
	cost := func(spans []nn.Span) int64 {
		var c int64
		for _, s := range spans {
			for i := s.Lo; i < s.Hi; i++ {
				c += quanta[i]
			}
		}
		return c
	}
	var best []nn.Span
	var bestPeak, bestCost int64
	found := false
	seen := map[string]bool{}
	eff := budget
	for range fitRounds {
		spans, _, ok := p.search(eff, false)
		if !ok || seen[fmt.Sprint(spans)] {
			break // nothing fits the estimates, or the rounds came back to a choice
		}
		seen[fmt.Sprint(spans)] = true
		peak, err := p.Peak(spans)
		if err != nil {
			return nil, 0, false, err
		}
		if peak > budget {
			eff -= peak - budget
			continue
		}
		if c := cost(spans); !found || c < bestCost || (c == bestCost && peak < bestPeak) {
			best, bestPeak, bestCost, found = spans, peak, c, true
		}
		slack := budget - peak
		if slack <= budget/200 || bestCost == 0 {
			break // within half a percent, or nothing recomputed: little left to gain
		}
		eff += slack
	}
	return best, bestPeak, found, nil
}

// Bounded is the profile of the same step with convolutions' scratch at
// its least (autograd.ConvChunk of one image), measured by a second dry
// step the first time it is asked for; nil when the first dry step used
// no workspace or already bounded it. That step runs the Config's model
// and loss again, so Plan and Minimum, which may ask for it, are called
// while the model lives and between training steps.
func (p *Profile) Bounded() (*Profile, error) {
	if p.Workspace == 0 || p.ConvChunk != 0 || p.cfg.Model == nil {
		return nil, nil
	}
	if p.bounded == nil {
		for _, v := range p.cfg.Model.Params() {
			if v.Value == nil || v.Value.Released() {
				return nil, fmt.Errorf("memplan: bounding convolutions' scratch takes a second dry step, and the model measured has been released")
			}
		}
		c := p.cfg
		c.Options = append(append([]autograd.Option(nil), c.Options...), autograd.ConvChunk(minChunk))
		b, err := measure(c, minChunk)
		if err != nil {
			return nil, err
		}
		b.parent, p.bounded = p, b
	}
	return p.bounded, nil
}

// minChunk is the cap Bounded measures with: one image at a time.
const minChunk = 1

// PlanSpans is the plan that recomputes the given spans, whatever its
// peak (measured): to compare the planner's choice with another
// (checkpointing every √n units, say) under the same model.
func (p *Profile) PlanSpans(budget int64, spans []nn.Span) (*Plan, error) {
	peak, err := p.Peak(spans)
	if err != nil {
		return nil, err
	}
	return p.plan(budget, spans, peak), nil
}

func (p *Profile) plan(budget int64, spans []nn.Span, peak int64) *Plan {
	root := p
	if p.parent != nil {
		root = p.parent
	}
	pl := &Plan{Budget: budget, Spans: spans, Peak: peak, Unplanned: root.Unconstrained, ConvChunk: p.ConvChunk, profile: p}
	chosen := map[int]nn.Span{}
	for _, s := range spans {
		for i := s.Lo; i < s.Hi; i++ {
			chosen[i] = s
		}
	}
	for i, u := range p.Units {
		s, ok := chosen[i]
		if ok && s.Len() > 1 && s.Lo == i {
			pl.Segments = append(pl.Segments, p.segment("span "+s.String(), s, true))
		}
		pl.Segments = append(pl.Segments, p.segment(strings.TrimSpace(u.Name+" "+u.Module), nn.Span{Lo: i, Hi: i + 1}, ok))
	}
	pl.Recompute = p.cost(spans)
	if p.Step > 0 {
		pl.Overhead = float64(pl.Recompute) / float64(p.Step)
	}
	return pl
}

// segment describes the span s as a candidate.
func (p *Profile) segment(name string, s nn.Span, chosen bool) Segment {
	var kept int64
	for i := s.Lo; i < s.Hi; i++ {
		kept += p.Units[i].Kept
	}
	return Segment{Name: name, Span: s, Saved: kept - p.Units[s.Hi-1].Output, Cost: p.cost([]nn.Span{s}), Chosen: chosen}
}

// Apply makes m recompute the plan's spans, and nothing else (a GPT's
// Segments do not apply under a plan).
func (pl *Plan) Apply(m nn.Chain) { m.SetRecompute(&nn.Recompute{Spans: pl.Spans}) }

// Options are the graph options a training step must be made with for the
// plan to hold (autograd.ConvChunk when it bounds scratch); none
// otherwise, and none for a nil plan (no budget).
func (pl *Plan) Options() []autograd.Option {
	if pl == nil || pl.ConvChunk == 0 {
		return nil
	}
	return []autograd.Option{autograd.ConvChunk(pl.ConvChunk)}
}

// Profile is the dry step's measurements the plan was made from.
func (pl *Plan) Profile() *Profile { return pl.profile }

// String is the plan as a table: each candidate with the memory
// recomputing it saves, its cost and whether it is chosen, then the
// predicted peak against the budget and the predicted overhead.
func (pl *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "memory plan for a budget of %s on %s:\n", device.FormatBytes(pl.Budget), pl.profile.Device)
	w := len("segment")
	for _, s := range pl.Segments {
		w = max(w, len(s.Name))
	}
	// A unit recomputed within a span of several is indented under it.
	inner := func(s Segment) bool {
		return s.Span.Len() == 1 && s.Chosen && slices.ContainsFunc(pl.Spans, func(sp nn.Span) bool {
			return sp.Len() > 1 && sp.Lo <= s.Span.Lo && s.Span.Lo < sp.Hi
		})
	}
	w += 2
	fmt.Fprintf(&b, "  %-*s  %10s  %10s  %s\n", w, "segment", "saves", "recompute", "chosen")
	for _, s := range pl.Segments {
		mark, name := "no", s.Name
		if s.Chosen {
			mark = "yes"
		}
		if inner(s) {
			name = "  " + name
		}
		fmt.Fprintf(&b, "  %-*s  %10s  %10s  %s\n", w, name, device.FormatBytes(s.Saved), fmtDuration(s.Cost), mark)
	}
	if pl.ConvChunk != 0 {
		fmt.Fprintf(&b, "convolutions unroll one image at a time (scratch bounded)\n")
	}
	fmt.Fprintf(&b, "predicted peak %s (%s without recomputation), budget %s; predicted step-time overhead %.1f%% (%s a step)",
		device.FormatBytes(pl.Peak), device.FormatBytes(pl.Unplanned), device.FormatBytes(pl.Budget), 100*pl.Overhead, fmtDuration(pl.Recompute))
	switch e := pl.Eval; {
	case e.Batch == 0:
	case e.Batch < e.Want:
		fmt.Fprintf(&b, "\nevaluation in batches of %d instead of %d to fit: peak at most %s", e.Batch, e.Want, device.FormatBytes(e.Peak))
	default:
		fmt.Fprintf(&b, "\nevaluation in batches of %d: peak at most %s", e.Batch, device.FormatBytes(e.Peak))
	}
	return b.String()
}

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.0f µs", float64(d)/1e3)
}

// InfeasibleError is a budget no plan fits: it names the smallest that
// does and what that peak is made of.
type InfeasibleError struct {
	Budget  int64
	Minimum Breakdown
}

// Breakdown is a step's predicted peak split by what holds the memory.
type Breakdown struct {
	Total int64
	// Param is the parameters with autocast's copies of them, Grad their
	// gradients, OptimState the optimiser's state, Workspace the largest
	// kernel scratch, Other what else was live on the device before the
	// step, Activations the rest: what the forward pass keeps and
	// recomputes, the batch, and the backward pass's gradients in flight.
	Param, Grad, OptimState, Workspace, Other, Activations int64
	// Reserve is the Config's (a data-parallel run's gradient bucket).
	Reserve int64
}

// String gives the total rounded up (a budget of that figure fits) and its
// parts rounded to the nearest.
func (b Breakdown) String() string {
	s := fmt.Sprintf("%s: parameters %s, gradients %s, optimiser state %s, minimum activations %s, workspace %s",
		device.FormatBytesUp(b.Total), device.FormatBytes(b.Param), device.FormatBytes(b.Grad), device.FormatBytes(b.OptimState),
		device.FormatBytes(b.Activations), device.FormatBytes(b.Workspace))
	if b.Reserve > 0 {
		s += ", data-parallel gradient bucket " + device.FormatBytes(b.Reserve)
	}
	if b.Other > 0 {
		s += ", other memory already in use " + device.FormatBytes(b.Other)
	}
	return s
}

func (e *InfeasibleError) Error() string {
	return fmt.Sprintf("a budget of %s is too small: the smallest that fits is %s", device.FormatBytes(e.Budget), e.Minimum)
}

// Minimum is the plan for the smallest budget the planner fits, and what
// that budget is made of: of the choices the search finds least by its
// estimates, and recomputing every unit alone or all together, the one
// whose measured peak is least. It may take the second dry step of
// Bounded.
func (p *Profile) Minimum() (*Plan, Breakdown, error) {
	if p.min != nil {
		return p.min, p.min.profile.breakdown(p.min.Peak), nil
	}
	pl, err := p.minimum()
	if err != nil {
		return nil, Breakdown{}, err
	}
	b, err := p.Bounded()
	if err != nil {
		return nil, Breakdown{}, err
	}
	if b != nil {
		bp, err := b.minimum()
		if err != nil {
			return nil, Breakdown{}, err
		}
		if bp.Peak < pl.Peak {
			pl = bp
		}
	}
	p.min = pl
	return pl, pl.profile.breakdown(pl.Peak), nil
}

// minimum is this profile's smallest plan.
func (p *Profile) minimum() (*Plan, error) {
	n := len(p.Units)
	least, _ := p.least()
	var best []nn.Span
	bestPeak := int64(-1)
	for _, spans := range [][]nn.Span{least, singles(n), allSpan(n)} {
		peak, err := p.Peak(spans)
		if err != nil {
			return nil, err
		}
		if bestPeak < 0 || peak < bestPeak {
			best, bestPeak = spans, peak
		}
	}
	return p.plan(bestPeak, best, bestPeak), nil
}

// least is the choice whose estimated peak is least, and that estimate.
func (p *Profile) least() ([]nn.Span, int64) {
	n := len(p.Units)
	hi := p.Estimate(nil)
	for _, s := range [][]nn.Span{allSpan(n), singles(n)} {
		hi = min(hi, p.Estimate(s))
	}
	// hi fits the estimates; nothing at lo or below does. Halve.
	lo := int64(0)
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if _, _, ok := p.search(mid, true); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	least, est, ok := p.search(hi, false)
	if !ok {
		panic("memplan: the smallest estimate does not fit its own plan")
	}
	return least, est
}

// breakdown splits a peak into its parts.
func (p *Profile) breakdown(total int64) Breakdown {
	b := Breakdown{Total: total, Param: p.Param + p.Cast, Grad: p.Grad, OptimState: p.OptimState, Workspace: p.Workspace, Other: max(p.Other, 0),
		Reserve: p.Reserve}
	b.Activations = max(total-b.Param-b.Grad-b.OptimState-b.Workspace-b.Other-b.Reserve, 0)
	return b
}

func allSpan(n int) []nn.Span { return []nn.Span{{Lo: 0, Hi: n}} }

func singles(n int) []nn.Span {
	s := make([]nn.Span, n)
	for i := range s {
		s[i] = nn.Span{Lo: i, Hi: i + 1}
	}
	return s
}
