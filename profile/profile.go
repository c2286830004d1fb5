// Package profile shows where a training step's time and memory go: a
// step profiler that attributes each step's wall time to every op kind in
// forward, backward and recompute, to the optimiser's step, the loss
// scaler's unscale, the wait for the data loader, and the host's own
// overhead (the rest); a Chrome trace of the same steps for Perfetto or
// chrome://tracing; and per-step metrics as JSON lines or TensorBoard
// scalars.
//
// A training loop profiles itself with the profiler's two hooks, the
// batches it ranges over and the graph it builds each step:
//
//	prof := profile.New(dev)
//	for b := range prof.Steps(datasets.Batches(train, 128)) { // times the wait for each batch
//		g := autograd.NewGraph(dev, prof.Graph())            // and each op of the step
//		...
//	}
//	prof.Table(os.Stderr)
//
// and marks what runs outside the graph with Phase (or Begin and End):
// prof.Phase(profile.Optim, ...) around the optimiser's step. Every method
// is a no-op on a nil *Profiler, so a program whose profiling is off keeps
// the same code and pays nothing.
//
// # How time is attributed
//
// The profiler keeps one clock and cuts each step into consecutive
// intervals at every event it sees, giving each interval to exactly one
// row: the op or part whose work it was, else the host's overhead. The
// rows of a step therefore add up to its wall time, with nothing counted
// twice: an op run inside the optimiser's phase, or inside another op's
// backward function, is taken out of its parent's time. A forward op is
// seen only once it has run (see autograd.Observer), so its row holds the
// time since the previous event, which includes the Go code of the model
// between ops (and, for a step's first op, the copy of the batch onto the
// device). A checkpointed segment's first run, which records nothing, is
// one "checkpoint" forward row; in backward its ops are seen one by one,
// recomputed (the recompute rows) and then run backwards, nested inside
// the "checkpoint" backward row, which keeps the rest.
//
// On a device whose kernels run asynchronously (a GPU: device.Timer), the
// host's intervals are launch costs; the profiler also records a pair of
// device markers at each cut and reports each row's device time, which is
// what the summary's compute share is made of there. On the CPU the
// kernels run inside the calls, and the wall clock is their time.
//
// A Profiler belongs to the goroutine that runs the training loop.
package profile

import (
	"fmt"
	"iter"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
)

// Part is a piece of a step outside the graph's ops, which a training loop
// marks with Phase, or Begin and End.
type Part uint8

const (
	// Data is the wait for the data loader's next batch (Steps marks it).
	Data Part = iota
	// Unscale is the loss scaler's unscale and Inf/NaN check.
	Unscale
	// Optim is the optimiser's step.
	Optim
	// Comm is the wait for gradients averaged over data-parallel ranks.
	Comm

	numParts
)

// partRows name each part's row: op and phase columns.
var partRows = [numParts][2]string{{"data", "wait"}, {"unscale", "step"}, {"optimizer", "step"}, {"allreduce", "wait"}}

// String is the part's row name.
func (p Part) String() string {
	if p < numParts {
		return partRows[p][0]
	}
	return fmt.Sprintf("Part(%d)", uint8(p))
}

// Profiler attributes the time of training steps; see the package
// documentation. Make one with New.
type Profiler struct {
	dev   device.Device
	t0    time.Time
	clock func() int64 // nanoseconds since t0
	nOps  int          // autograd's op count: ids below nOps*NumPhases are ops
	graph autograd.Option

	rows  []row // totals over counted steps, by id
	steps int
	total int64 // nanoseconds in counted steps

	// The step in progress.
	inStep  bool
	work    bool // something besides the data wait ran in it
	stepT0  int64
	last    int64   // the last cut: where the next interval begins
	stack   []frame // open ops and parts, innermost last
	cur     []row   // this step's rows, by id
	touched []int   // ids with something in cur
	seen    []bool  // by id: in touched

	dt *devTimer // nil on a synchronous device
	tr *tracer   // nil without Trace
}

// row is what one op in one phase, or one part, took.
type row struct {
	ns, devNs int64
	calls     int
}

// frame is an op or part begun and not yet ended.
type frame struct {
	id    int
	start int64
}

// Option configures a Profiler.
type Option func(*Profiler)

// New returns a profiler for training steps on dev. On a device that
// implements device.Timer it also measures device time.
func New(dev device.Device, opts ...Option) *Profiler {
	p := &Profiler{dev: dev, t0: time.Now(), nOps: len(autograd.Ops())}
	p.clock = func() int64 { return int64(time.Since(p.t0)) }
	p.rows = make([]row, p.overheadID()+1)
	p.cur = make([]row, len(p.rows))
	p.seen = make([]bool, len(p.rows))
	p.graph = autograd.WithObserver(p)
	if t, ok := dev.(device.Timer); ok {
		p.dt = &devTimer{t: t}
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// The rows' ids: ops by phase, then the parts, then the host's overhead.
func (p *Profiler) opID(op autograd.Op, ph autograd.Phase) int {
	if int(op) >= p.nOps || ph >= autograd.NumPhases {
		panic(fmt.Sprintf("profile: op %v in phase %v is not one autograd lists", op, ph))
	}
	return int(op)*autograd.NumPhases + int(ph)
}
func (p *Profiler) partID(pt Part) int {
	if pt >= numParts {
		panic(fmt.Sprintf("profile: %v is not a part", pt))
	}
	return p.nOps*autograd.NumPhases + int(pt)
}
func (p *Profiler) overheadID() int { return p.nOps*autograd.NumPhases + int(numParts) }

// computes reports whether row id is compute: an op, the unscale or the
// optimiser's step.
func (p *Profiler) computes(id int) bool {
	return id < p.partID(0) || id == p.partID(Unscale) || id == p.partID(Optim)
}

// names returns the op and phase columns of row id.
func (p *Profiler) names(id int) (op, phase string) {
	switch n := p.nOps * autograd.NumPhases; {
	case id < n:
		return autograd.Op(id / autograd.NumPhases).String(), autograd.Phase(id % autograd.NumPhases).String()
	case id < n+int(numParts):
		r := partRows[id-n]
		return r[0], r[1]
	}
	return "host", "overhead"
}

// Graph is the option that makes a graph report its ops to p:
// autograd.NewGraph(dev, p.Graph()). On a nil Profiler it does nothing.
func (p *Profiler) Graph() autograd.Option {
	if p == nil {
		return noObserver
	}
	return p.graph
}

func noObserver(*autograd.Graph) {}

// Steps returns seq with each element made a step: the step begins before
// the wait for the batch (timed as Data) and ends when the loop body
// returns. A body that stops the loop (break) before anything else was
// timed, as a loop that checks a step limit at its top does, leaves no
// step. On a nil Profiler it returns seq itself.
func (p *Profiler) Steps(seq iter.Seq[datasets.Batch]) iter.Seq[datasets.Batch] {
	if p == nil {
		return seq
	}
	return func(yield func(datasets.Batch) bool) {
		p.StepStart()
		p.Begin(Data)
		for b := range seq {
			p.End(Data)
			more := yield(b)
			p.endStep(false)
			if !more {
				return
			}
			p.StepStart()
			p.Begin(Data)
		}
		p.abandon() // the last wait found no batch
	}
}

// StepStart begins a step (ending one still open). Time is attributed only
// inside steps.
func (p *Profiler) StepStart() {
	if p == nil {
		return
	}
	if p.inStep {
		p.endStep(true)
	}
	now := p.clock()
	p.inStep, p.work = true, false
	p.stepT0, p.last = now, now
	p.stack = p.stack[:0]
	if p.dt != nil {
		p.dt.begin(now)
	}
	if p.tr != nil {
		p.tr.startStep(p.steps)
	}
}

// StepEnd ends the step and adds it to the totals. Ops or parts still
// open are closed as the host's overhead.
func (p *Profiler) StepEnd() {
	if p != nil && p.inStep {
		p.endStep(true)
	}
}

// endStep ends the step; a step in which nothing but the data wait ran is
// dropped unless keepIdle.
func (p *Profiler) endStep(keepIdle bool) {
	if !p.inStep {
		return
	}
	now := p.cut(p.overheadID())
	p.inStep = false
	p.stack = p.stack[:0]
	if p.dt != nil {
		p.dt.end(p)
	}
	if !p.work && !keepIdle {
		p.clearStep()
		if p.tr != nil {
			p.tr.dropStep()
		}
		return
	}
	for _, id := range p.touched {
		r := &p.rows[id]
		c := p.cur[id]
		r.ns += c.ns
		r.devNs += c.devNs
		r.calls += c.calls
	}
	if p.tr != nil {
		p.tr.endStep(p.steps, p.stepT0, now)
	}
	p.clearStep()
	p.steps++
	p.total += now - p.stepT0
}

// abandon ends a step that turned out not to be one.
func (p *Profiler) abandon() {
	if p.inStep {
		p.work = false
		p.endStep(false)
	}
}

func (p *Profiler) clearStep() {
	for _, id := range p.touched {
		p.cur[id] = row{}
		p.seen[id] = false
	}
	p.touched = p.touched[:0]
}

// add gives ns (and a call, when call) to row id of the current step.
func (p *Profiler) add(id int, ns int64, call bool) {
	p.touch(id)
	r := &p.cur[id]
	r.ns += ns
	if call {
		r.calls++
	}
}

// addDevice gives ns of device time to row id of the current step.
func (p *Profiler) addDevice(id int, ns int64) {
	p.touch(id)
	p.cur[id].devNs += ns
}

func (p *Profiler) touch(id int) {
	if !p.seen[id] {
		p.seen[id] = true
		p.touched = append(p.touched, id)
	}
}

// cut ends the interval since the last cut, gives it to row id, and
// returns the time of the cut.
func (p *Profiler) cut(id int) int64 {
	now := p.clock()
	p.add(id, now-p.last, false)
	if p.dt != nil {
		p.dt.cut(p, id, p.last, now)
	}
	p.last = now
	return now
}

// top is the innermost open op or part, whose own time the interval
// before a nested one begins is; the overhead when none is open.
func (p *Profiler) top() int {
	if n := len(p.stack); n > 0 {
		return p.stack[n-1].id
	}
	return p.overheadID()
}

func (p *Profiler) begin(id int) {
	now := p.cut(p.top())
	p.stack = append(p.stack, frame{id, now})
}

// end closes row id: the open frame when it is the innermost, else (a
// forward op, seen only once it has run) the interval since the last cut.
func (p *Profiler) end(id int, part bool) {
	start := p.last
	if n := len(p.stack); n > 0 && p.stack[n-1].id == id {
		start = p.stack[n-1].start
		p.stack = p.stack[:n-1]
	} else if part {
		op, _ := p.names(id)
		panic(fmt.Sprintf("profile: End(%s) without Begin(%s) innermost", op, op))
	}
	now := p.cut(id)
	p.add(id, 0, true)
	if id != p.partID(Data) {
		p.work = true
	}
	if p.tr != nil {
		p.tr.span(p, id, start, now)
	}
}

// OpStart is autograd.Observer's: an op's backward function begins.
func (p *Profiler) OpStart(op autograd.Op, ph autograd.Phase) {
	if p.inStep {
		p.begin(p.opID(op, ph))
	}
}

// OpEnd is autograd.Observer's: an op's work has ended.
func (p *Profiler) OpEnd(op autograd.Op, ph autograd.Phase) {
	if p.inStep {
		p.end(p.opID(op, ph), false)
	}
}

// Begin starts timing part pt of the step; End stops it. Parts nest with
// each other and with ops, innermost ending first.
func (p *Profiler) Begin(pt Part) {
	if p != nil && p.inStep {
		p.begin(p.partID(pt))
	}
}

// End stops timing part pt, which must be the innermost open one.
func (p *Profiler) End(pt Part) {
	if p != nil && p.inStep {
		p.end(p.partID(pt), true)
	}
}

// Phase runs fn as part pt of the step and returns its error. On a nil
// Profiler it only runs fn.
func (p *Profiler) Phase(pt Part, fn func() error) error {
	p.Begin(pt)
	err := fn()
	p.End(pt)
	return err
}

// StepCount is the number of steps profiled.
func (p *Profiler) StepCount() int {
	if p == nil {
		return 0
	}
	return p.steps
}

// Elapsed is the wall time of the steps profiled.
func (p *Profiler) Elapsed() time.Duration {
	if p == nil {
		return 0
	}
	return time.Duration(p.total)
}

// Err is the error that stopped device timing, if one did; the host's
// figures are unaffected.
func (p *Profiler) Err() error {
	if p == nil || p.dt == nil {
		return nil
	}
	return p.dt.err
}

// Close frees the device markers; the figures stay readable.
func (p *Profiler) Close() {
	if p != nil && p.dt != nil {
		p.dt.close()
	}
}
