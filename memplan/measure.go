package memplan

import (
	"fmt"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// Config is what the dry step needs: the model, the device it is on, and
// the training step's forward pass.
type Config struct {
	// Dev is the device Model is on.
	Dev device.Device
	// Model is the network, a chain of units the planner may recompute.
	Model nn.Chain
	// Loss records one training step's forward pass on g exactly as the
	// program's step does (autocast, the batch at its real shape, the
	// model's Forward, the loss) and returns the loss. The planner calls
	// it once, on a graph of its own, and walks it backwards; it must not
	// install an observer on g.
	Loss func(g *autograd.Graph) *autograd.Var
	// Optim is the optimiser the program steps Model with, or nil. Its
	// state is counted as it will be after its first step, if it has not
	// taken one yet: it says how big that is with a StateBytes() int64
	// method, as package optim's do. An optimiser of another package is
	// taken not to have stepped yet.
	Optim any
	// Options are the options the program makes its step's graphs with
	// (autograd.ConvColumnBudget, ...), for the dry step's graph.
	Options []autograd.Option
	// Accumulate says the step adds its gradients to those of earlier
	// batches (gradient accumulation): every parameter's gradient is then
	// live from the step's start, not made as backward reaches it, so the
	// dry steps hold a zero gradient for every parameter from theirs, and
	// the plan fits the steps after a batch's first (its first has less).
	Accumulate bool
	// Reserve is memory the step may hold beyond what a dry step sees, at
	// any moment of it, in bytes: a data-parallel run's gradient bucket
	// (distributed.DataParallel.BucketBytes), packed while backward runs,
	// once its gradients are done. Every peak the planner measures or
	// estimates counts it, so that a plan fits the budget with the reserve
	// held at its own peak; the prediction errs high by what the reserve
	// is not holding then.
	Reserve int64
}

// stateSizer is an optimiser that can say how much state it will hold
// once it has stepped every parameter.
type stateSizer interface{ StateBytes() int64 }

// UnitCost is what the dry step measured of one unit of the chain.
type UnitCost struct {
	// Name is the unit's name in the chain, Module its module's
	// description.
	Name, Module string
	// Kept is the bytes the unit's forward pass leaves live until the step
	// ends when it runs as it is: what it saves for backward and the
	// results it makes along the way. Recomputing it frees them.
	Kept int64
	// Output is the bytes of its result, which a recomputed span ending
	// with this unit keeps in their place.
	Output int64
	// Recompute is how long its forward pass took in the dry step (the
	// shorter of its two runs there).
	Recompute time.Duration

	fwdPeak      int64 // peak above live when it is recomputed
	firstKept    int64 // bytes its first run inside a checkpointed segment leaves until the segment ends
	firstPeak    int64 // the peak above live during that run
	backPeak     int64 // the peak above that (its recomputed bytes included) during its backward pass
	keptFwd      int64 // what it adds to live when it runs as it is, its input freed if it keeps none (autocast's copies aside)
	keptPeak     int64 // the peak above live as it runs as it is
	keptBack     int64 // live when the backward pass reaches it, run as it is, less the units' before it
	keptBackPeak int64 // the peak above that during its backward pass
	casts        int64 // autocast's copies of its weights that a run keeping it makes
}

// Profile is what the dry steps measured: the chain's units and the memory
// around them, with the device's steady state (gradients, optimiser state,
// autocast's weight copies) as it will be from the second step on. It
// keeps the Config, to measure the choices Plan makes (Peak).
type Profile struct {
	Device string
	Units  []UnitCost
	// Param, Grad and OptimState are the bytes of parameters and of
	// their gradients, and the optimiser's state after its first step;
	// Other is whatever else was live on the device when the step began.
	Param, Grad, OptimState, Other int64
	// Cast is autocast's low-precision copies of the parameters.
	Cast int64
	// Workspace is the largest scratch (kernel workspace) the step used
	// at once.
	Workspace int64
	// Reserve is the Config's, counted in every peak.
	Reserve int64
	// Step is the dry step's time less its recomputation: about one
	// step's forward and backward passes without checkpointing.
	Step time.Duration
	// Measured is the peak the dry step itself reached, every unit
	// checkpointed alone, corrected to the steady state.
	Measured int64

	// ConvChunk is the cap on convolutions' chunks the dry step ran with
	// (autograd.ConvChunk), 0 for none.
	ConvChunk int
	// Unconstrained is the measured peak of a step that recomputes
	// nothing (Peak(nil)).
	Unconstrained int64

	cfg      Config
	optimAdd int64            // the optimiser's state still to come
	keptBase int64            // live when the chain begins, every unit kept, with the copies to come
	keptPost int64            // the peak from the chain's end to its backward pass, less the chain's kept bytes
	keptPre  int64            // the peak from there to the step's end
	peaks    map[string]int64 // Peak's measurements, by choice
	min      *Plan            // Minimum's, once found
	bounded  *Profile         // Bounded's, once measured
	parent   *Profile         // for Bounded's, the profile it bounds
}

// mark is a reading of the device's accounting.
type mark struct {
	live, peak device.Usage
	at         time.Time
}

// meter reads the device's memory at the chain's boundaries during the
// dry step. Each reading starts a new peak.
type meter struct {
	dev   device.Device
	err   error
	units int

	chainStart, chainEnd mark
	first                []mark // before each unit's first run
	firstEnd             []mark // after it
	reStart, reEnd       []mark // before and after each unit's recomputation
	backEnd              []mark // after each unit's backward pass
	postEnd              mark   // the first recomputation's start
}

// read syncs the device (so that time is kernels' time) and reads its
// accounting, then starts a new peak.
func (m *meter) read() mark {
	if err := m.dev.Sync(); err != nil && m.err == nil {
		m.err = err
	}
	s := m.dev.MemStats()
	m.dev.ResetPeak()
	return mark{live: s.Live, peak: s.Peak, at: time.Now()}
}

// probe is the chain's ChainProbe for the dry step.
func (m *meter) probe(g *autograd.Graph, unit int, end bool) {
	switch {
	case unit < 0 && !end:
		m.chainStart = m.read()
	case unit < 0:
		m.chainEnd = m.read()
	case !g.Recomputing() && !end:
		m.first[unit] = m.read()
	case !g.Recomputing():
		m.firstEnd[unit] = m.read()
	case !end:
		if unit == m.units-1 {
			m.postEnd = m.read()
			m.reStart[unit] = m.postEnd
			return
		}
		m.reStart[unit] = m.read()
	default:
		m.reEnd[unit] = m.read()
	}
}

// backObserver reads the device when a checkpointed segment's backward
// pass has ended: the chain's units', last first.
type backObserver struct {
	m    *meter
	next int
}

func (o *backObserver) OpStart(autograd.Op, autograd.Phase) {}

func (o *backObserver) OpEnd(op autograd.Op, ph autograd.Phase) {
	if op != autograd.OpCheckpoint || ph != autograd.Backward || o.next < 0 {
		return
	}
	o.m.backEnd[o.next] = o.m.read()
	o.next--
}

// Measure takes the dry steps: one forward and backward pass at the real
// batch shape with every unit of the chain checkpointed on its own,
// reading the device's accounting before and after each unit's first run,
// its recomputation and its backward pass; and one with every unit run as
// it is, read around each unit, whose peak is Unconstrained. It leaves the
// model as it found it: parameters, buffers (batch normalisation's
// statistics), dropout streams, gradients and autocast's weight copies are
// as they were, and the model's recompute choice is cleared.
func Measure(c Config) (*Profile, error) { return measure(c, 0) }

// measure is Measure with the graph options' conv chunk noted.
func measure(c Config, chunk int) (p *Profile, err error) {
	units := c.Model.Units()
	n := len(units)
	if n == 0 {
		return nil, fmt.Errorf("memplan: the model has no units to plan over")
	}
	m := &meter{dev: c.Dev, units: n, first: make([]mark, n), firstEnd: make([]mark, n),
		reStart: make([]mark, n), reEnd: make([]mark, n), backEnd: make([]mark, n)}

	restore, held := preserve(c.Model, c.Accumulate)
	defer restore() // again, after an early return: it is idempotent
	defer nn.DropNewCasts(c.Model)()

	spans := make([]nn.Span, n)
	for i := range spans {
		spans[i] = nn.Span{Lo: i, Hi: i + 1}
	}
	c.Model.SetRecompute(&nn.Recompute{Spans: spans, Probe: m.probe})
	defer c.Model.SetRecompute(nil)

	if err := c.Dev.Sync(); err != nil {
		return nil, fmt.Errorf("memplan: dry step: %w", err)
	}
	start := m.read()
	g := autograd.NewGraph(c.Dev, c.Options...)
	defer func() {
		if g != nil {
			g.Release()
		}
	}()
	g.Observe(&backObserver{m: m, next: n - 1})
	loss := c.Loss(g)
	if loss == nil {
		return nil, fmt.Errorf("memplan: dry step: the loss function returned no loss")
	}
	g.Backward(loss)
	end := m.read()
	g.Release()
	g = nil
	after := m.read()
	if m.err != nil {
		return nil, fmt.Errorf("memplan: dry step: %w", m.err)
	}
	for i, mk := range [][]mark{m.first, m.firstEnd, m.reStart, m.reEnd, m.backEnd} {
		for u := range mk {
			if mk[u].at.IsZero() {
				return nil, fmt.Errorf("memplan: dry step: unit %d (%s) was not seen (%s); does the loss function run the model's Forward once, and does the model run every unit?",
					u, units[u].Name, [...]string{"first run", "first run's end", "recomputation", "recomputation's end", "backward pass"}[i])
			}
		}
	}
	p = m.profile(c, units, held, start, end, after)
	p.cfg, p.ConvChunk = c, chunk
	restore()
	c.Model.SetRecompute(nil)
	if err := p.keptRun(); err != nil {
		return nil, err
	}
	return p, nil
}

// keptRun is the second dry step: the chain run as it is, read before and
// after each unit's forward pass and, through marks on the tape
// (autograd.Graph.Mark), before and after its backward pass. It gives what
// each unit adds to the step's memory when kept (its input freed when it
// keeps none of it: a Linear's output once the ReLU after it has run),
// what is live when the backward pass reaches it (the units after it done
// with, less what their layers keep to the step's end) and its backward
// peak, the weight copies it makes, and the step's peak without a plan
// (Unconstrained).
func (p *Profile) keptRun() error {
	c := p.cfg
	n := len(p.Units)
	restore, held := preserve(c.Model, c.Accumulate)
	defer restore()
	defer nn.DropNewCasts(c.Model)()
	m := &meter{dev: c.Dev, units: n, first: make([]mark, n+1), firstEnd: make([]mark, n),
		reStart: make([]mark, n), reEnd: make([]mark, n)}
	var top int64 // the largest peak of any reading
	read := func() mark {
		mk := m.read()
		top = max(top, mk.peak.Total)
		return mk
	}
	var postEnd mark // the backward pass's arrival at the chain's end
	probe := func(g *autograd.Graph, unit int, end bool) {
		switch {
		case unit < 0 && !end:
			m.chainStart = read()
			g.Mark(func() { m.chainEnd = read() }) // the backward pass is done with the chain
		case unit < 0:
			m.first[n] = read()
			g.Mark(func() { postEnd = read() })
		case !end:
			m.first[unit] = read()
			g.Mark(func() { m.reEnd[unit] = read() }) // its backward pass is done
		default:
			m.firstEnd[unit] = read()
			g.Mark(func() { m.reStart[unit] = read() }) // its backward pass begins
		}
	}
	c.Model.SetRecompute(&nn.Recompute{Probe: probe})
	defer c.Model.SetRecompute(nil)
	if err := c.Dev.Sync(); err != nil {
		return fmt.Errorf("memplan: dry step: %w", err)
	}
	c.Dev.ResetPeak()
	g := autograd.NewGraph(c.Dev, c.Options...)
	g.Backward(c.Loss(g))
	last := read()
	castEnd := last.live.Category(device.Cast)
	g.Release()
	if m.err != nil {
		return fmt.Errorf("memplan: dry step: %w", m.err)
	}
	if postEnd.at.IsZero() || m.chainEnd.at.IsZero() {
		return fmt.Errorf("memplan: dry step: the backward pass did not reach the chain (does the loss depend on the model's output?)")
	}
	adj := p.optimAdd - held + c.Reserve
	cast := func(mk mark) int64 { return mk.live.Category(device.Cast) }
	var casts, before int64 // before: the kept bytes of the units before the one at hand
	for i := range p.Units {
		u := &p.Units[i]
		s, e, next := m.first[i], m.firstEnd[i], m.first[i+1]
		b, a := m.reStart[i], m.reEnd[i]
		if s.at.IsZero() || e.at.IsZero() || next.at.IsZero() || b.at.IsZero() || a.at.IsZero() {
			return fmt.Errorf("memplan: dry step: unit %d (%s) was not seen run as it is", i, u.Name)
		}
		u.casts = cast(e) - cast(s)
		u.keptFwd = next.live.Total - s.live.Total - (cast(next) - cast(s))
		u.keptPeak = e.peak.Total - s.live.Total - u.casts
		// What is live when the backward pass reaches the unit, less the
		// kept bytes of the units before it (a plan's), and its peak.
		u.keptBack = b.live.Total + adj - before
		u.keptBackPeak = a.peak.Total - b.live.Total
		before += u.keptFwd
		casts += u.casts
	}
	// The copies a run keeping every unit makes are counted from the
	// start, as the second step on finds them: a plan that recomputes a
	// unit instead makes them a pass at a time, which the units' own
	// figures count again (an overcount of no more than the copies).
	p.keptBase = m.chainStart.live.Total + (castEnd - cast(m.chainStart)) + adj
	p.keptPost = postEnd.peak.Total + adj - before
	p.keptPre = last.peak.Total + adj
	p.Unconstrained = top + adj
	if p.peaks == nil {
		p.peaks = map[string]int64{}
	}
	p.peaks[fmt.Sprint([]nn.Span(nil))] = p.Unconstrained
	return nil
}

// Peak is the peak of a training step that recomputes spans (nil: none),
// measured: a dry step at the real batch shape with the choice applied
// (the model's recompute choice and autocast's weight copies are left as
// they were, as in Measure). That is the peak every such step reaches
// on this device, in the steady state of the second step on: the
// optimiser's state counted as after its first step, held gradients not.
// Each choice is measured once; Plan measures the choices it keeps.
func (p *Profile) Peak(spans []nn.Span) (int64, error) {
	key := fmt.Sprint(spans)
	if v, ok := p.peaks[key]; ok {
		return v, nil
	}
	c := p.cfg
	if c.Model == nil {
		return 0, fmt.Errorf("memplan: this profile has no model to measure")
	}
	nn.CheckSpans("memplan.Peak", spans, len(p.Units))
	for _, v := range c.Model.Params() {
		if v.Value == nil || v.Value.Released() {
			return 0, fmt.Errorf("memplan: measuring a plan takes a dry step, and the model measured has been released")
		}
	}
	restore, held := preserve(c.Model, c.Accumulate)
	defer restore()
	defer nn.DropNewCasts(c.Model)()
	// A choice of nothing is still a choice (a GPT's Segments do not
	// apply under a plan).
	c.Model.SetRecompute(&nn.Recompute{Spans: spans})
	defer c.Model.SetRecompute(nil)
	if err := c.Dev.Sync(); err != nil {
		return 0, fmt.Errorf("memplan: dry step: %w", err)
	}
	c.Dev.ResetPeak()
	g := autograd.NewGraph(c.Dev, c.Options...)
	loss := c.Loss(g)
	g.Backward(loss)
	err := c.Dev.Sync()
	peak := c.Dev.MemStats().Peak.Total
	g.Release()
	if err != nil {
		return 0, fmt.Errorf("memplan: dry step: %w", err)
	}
	peak += p.optimAdd - held + c.Reserve
	if p.peaks == nil {
		p.peaks = map[string]int64{}
	}
	p.peaks[key] = peak
	return peak, nil
}

// profile turns the dry step's readings into a Profile.
func (m *meter) profile(c Config, units []nn.Unit, held int64, start, end, after mark) *Profile {
	n := len(units)
	cast := func(u device.Usage) int64 { return u.Category(device.Cast) }
	// Autocast's weight copies live from the first step on; the dry step
	// made them as it went.
	castEnd := cast(after.live)

	p := &Profile{Device: c.Dev.Name(), Units: make([]UnitCost, n)}
	// Optimiser state: as it will be after the first step.
	optimLive := start.live.Category(device.Optim)
	optimAdd := int64(0)
	if s, ok := c.Optim.(stateSizer); ok {
		want := s.StateBytes()
		have := optimState(c.Optim)
		optimAdd = max(want-have, 0)
	}
	p.OptimState, p.optimAdd = optimLive+optimAdd, optimAdd
	p.Param = after.live.Category(device.Param)
	p.Cast = castEnd
	p.Grad = end.live.Category(device.Grad) - held
	// adj turns a reading into the steady state: held gradients are not
	// there (the program's ZeroGrad frees them), the optimiser's state is.
	adj := optimAdd - held

	// The chain's kept bytes during the dry step: each unit's output,
	// which the next unit's segment keeps as its input until its
	// backward pass is done.
	var kmeas int64
	for i := range units {
		u := &p.Units[i]
		u.Name, u.Module = units[i].Name, describe(units[i].M)
		// What a unit's segment left on the chain's graph: the next
		// reading's live bytes less this unit's first run's start, less
		// the weight copies the run made (they stay, but as Param).
		next := m.chainEnd
		if i+1 < n {
			next = m.first[i+1]
		}
		u.Output = next.live.Total - m.first[i].live.Total - (cast(next.live) - cast(m.first[i].live))
		kmeas += u.Output
		u.firstKept = m.firstEnd[i].live.Total - m.first[i].live.Total - (cast(m.firstEnd[i].live) - cast(m.first[i].live))
		u.firstPeak = m.firstEnd[i].peak.Total - m.first[i].live.Total - (cast(m.firstEnd[i].live) - cast(m.first[i].live))
		u.Kept = m.reEnd[i].live.Total - m.reStart[i].live.Total
		u.fwdPeak = m.reEnd[i].peak.Total - m.reStart[i].live.Total
		// The dry step runs each unit's forward pass twice, first without
		// recording and then recomputed: the shorter of the two is the
		// one less disturbed by whatever else the machine did.
		u.Recompute = min(m.reEnd[i].at.Sub(m.reStart[i].at), m.firstEnd[i].at.Sub(m.first[i].at))
		// Its backward peak above what is live as the pass begins.
		u.backPeak = m.backEnd[i].peak.Total - m.reStart[i].live.Total
	}
	p.Other = start.live.Total - held - start.live.Category(device.Param) - start.live.Category(device.Cast) - optimLive
	if c.Accumulate {
		p.Other -= p.Grad // the gradients preserve made for the step to add to
	}
	p.Workspace = max(m.peakOf(device.Workspace), end.peak.Category(device.Workspace))
	var re time.Duration
	for i := range p.Units {
		re += m.reEnd[i].at.Sub(m.reStart[i].at)
	}
	p.Step = end.at.Sub(start.at) - re
	p.Reserve = c.Reserve
	p.Measured = m.maxPeak() + adj + c.Reserve
	return p
}

// peakOf is the largest peak of category c in any reading.
func (m *meter) peakOf(c device.Category) int64 {
	var best int64
	for _, mk := range m.all() {
		best = max(best, mk.peak.Category(c))
	}
	return best
}

// maxPeak is the largest total peak in any reading.
func (m *meter) maxPeak() int64 {
	var best int64
	for _, mk := range m.all() {
		best = max(best, mk.peak.Total)
	}
	return best
}

func (m *meter) all() []mark {
	out := []mark{m.chainStart, m.chainEnd, m.postEnd}
	for _, s := range [][]mark{m.first, m.firstEnd, m.reStart, m.reEnd, m.backEnd} {
		out = append(out, s...)
	}
	return out
}

// preserve records what a training step changes in the model besides its
// gradients' memory (buffers, dropout streams, gradients held), takes the
// held gradients off for the dry step, and returns the function that puts
// everything back, and the held gradients' bytes. With accumulate, every
// parameter that takes a gradient gets a zero one for the dry step to add
// to (Config.Accumulate).
func preserve(model nn.Module, accumulate bool) (restore func(), held int64) {
	type saved struct {
		v    *autograd.Var
		data []float32
	}
	var buffers []saved
	for _, s := range nn.State(model) {
		if !s.Var.RequiresGrad() && s.Var.Value != nil {
			buffers = append(buffers, saved{s.Var, s.Var.Value.ToHost()})
		}
	}
	var counters []uint64
	rngs := nn.RNGs(model)
	for _, r := range rngs {
		counters = append(counters, r.RNG.Counter)
	}
	params := model.Params()
	grads := make([]*tensor.Tensor, len(params))
	for i, p := range params {
		grads[i] = p.Grad
		if p.Grad != nil {
			held += device.Bytes(p.Grad.DType(), p.Grad.Numel())
		}
		p.Grad = nil
		if accumulate && p.RequiresGrad() {
			p.Grad = tensor.New(p.Value.Device(), p.Value.DType(), device.Grad, p.Shape()...)
			p.Value.Device().Fill(p.Grad.Buffer(), 0)
		}
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		for _, b := range buffers {
			b.v.SetValues(b.data)
		}
		for i, r := range rngs {
			r.RNG.Counter = counters[i]
		}
		for i, p := range params {
			if p.Grad != grads[i] {
				p.FreeGrad()
				p.Grad = grads[i]
			}
		}
	}, held
}

// optimState is the bytes of state opt holds now, for the optimisers of
// package optim; 0 for another (see Config.Optim).
func optimState(opt any) int64 {
	var ts []*tensor.Tensor
	switch o := opt.(type) {
	case *optim.SGD:
		ts = o.State()
	case *optim.Adam:
		m, v := o.State()
		ts = append(append(ts, m...), v...)
	}
	var n int64
	for _, t := range ts {
		if t != nil {
			n += device.Bytes(t.DType(), t.Numel())
		}
	}
	return n
}

// describe is a module's String, or its type without one.
func describe(m nn.Module) string {
	if s, ok := m.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", m)
}
