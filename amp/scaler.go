package amp

import (
	"errors"
	"fmt"
	"math"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Optimizer is what GradScaler needs of an optimiser; package optim's
// optimisers satisfy it.
type Optimizer interface {
	Params() []*autograd.Var
	Step()
}

type stage uint8

const (
	ready stage = iota
	unscaled
	stepped
)

type optState struct {
	stage    stage
	foundInf bool
}

// GradScaler is PyTorch's dynamic loss scaler (torch.amp.GradScaler), with
// a floor under the scale and warnings PyTorch lacks.
//
// Scale multiplies the loss so that small F16 gradients do not flush to
// zero. Unscale divides the gradients back (multiplying by the F32
// reciprocal of the scale) and records whether any is Inf or NaN. Step
// unscales if that has not happened, then steps the optimiser only when all
// gradients were finite. Update backs the scale off after an overflow (and
// restarts the count of clean steps), or grows it after GrowthInterval
// clean steps in a row; the scale never grows to infinity.
//
// # Arithmetic
//
// The scale is a float32 and the growth and backoff factors are float64,
// as in PyTorch, whose _amp_update_scale_ kernels form scale*factor in
// double and round it once to float32. Update does the same, so a scale
// trajectory is PyTorch's bit for bit (with a factor such as 0.9 or 1.1,
// multiplying in float32 instead would part from it within a few updates).
//
// # Where the Inf/NaN check happens
//
// Unscale checks each gradient element after multiplying it by the
// reciprocal, in the same pass (one kernel per device): the test is on the
// unscaled value. PyTorch's _amp_foreach_non_finite_check_and_unscale_
// tests each element before multiplying, on the scaled value. While the
// scale is at least 1 the reciprocal is at most 1, so a finite value stays
// finite and an Inf or NaN stays one: the two verdicts agree exactly.
// Below 1 the reciprocal exceeds 1 and unscaling can itself overflow F32:
// a finite scaled gradient above MaxFloat32 times the scale becomes Inf.
// This scaler sees that Inf and skips the step; PyTorch would not, and
// would hand the optimiser an infinite gradient. Either way the gradients
// are left unscaled, also on a skipped step.
//
// # Floor, recovery and warnings
//
// PyTorch's scale has no floor: under a long run of overflows that do not
// depend on the scale (a forward pass that overflows F16, Inf or NaN in
// the data or the weights) it halves until it is 0, after which 1/scale
// is Inf and every later step is skipped, silently and for ever. Here, by
// default, the scale never falls below MinScale (DefaultMinScale, 2^-14),
// so a run resumes once the overflows stop, and Warnings reports, once
// each time it arises, a run of WarnAfterSkips consecutive skipped steps
// and a scale below 1.
//
// A floor alone would leave a run that survived a storm training at a
// scale of 2^-14 for 60,000 steps (30 growths, 2000 clean steps each,
// back to 2^16), with small gradients flushed to zero all that while. So
// the scale recovers faster from the floor: once an overflow has backed it
// off to the floor, it grows after every RecoveryInterval clean steps
// (DefaultRecoveryInterval, 10: back to 2^16 in 300) instead of every
// GrowthInterval, until the next overflow above the floor, which shows the
// scale has found its level again; then the growth interval is the usual
// one. An overflow that backs the scale off to the floor again restarts
// the recovery.
//
// The rule is the default because a storm that reaches the floor (30
// overflows in a row from 2^16) is a run that would otherwise be lost or
// crippled; until the scale first reaches the floor, the trajectory is
// PyTorch's bit for bit, so ordinary training, whose scale backs off a few
// times and grows back, is unchanged. MinScale(0) removes the floor, and
// with it the recovery: the trajectory is then PyTorch's exactly, also
// after a long storm, down to a scale of 0 at which every step is
// skipped.
type GradScaler struct {
	scale          float32
	minScale       float32
	growthFactor   float64
	backoffFactor  float64
	growthInterval int
	tracker        int
	recoverEvery   int  // RecoveryInterval
	recovering     bool // backed off to the floor, and no overflow above it since
	enabled        bool
	note           string
	opts           map[Optimizer]*optState
	skipped        int
	steps          int
	updates        int
	skipRun        int // consecutive Updates that backed off
	warnSkips      int
	warnedSkips    bool // the current run of skips has been reported
	warnedLow      bool // the current stretch of scale below 1 has been reported
	pending        []Warning
	asStored       bool // UnscaleAsStored
}

// DefaultMinScale is the default floor of the loss scale, 2^-14.
//
// A scale below 1 makes room for unscaled gradients too large for F16
// (above 65504); each halving doubles that room and flushes one more
// binade of small gradients to zero. At 2^-14 the F16 values of the
// backward pass, 2^-24 to 65504, hold unscaled gradients from 2^-10 to
// 2^30 (about 1e9): any larger gradient belongs to a run that has diverged,
// so halving further cannot produce a useful step, only a longer way back
// (from 2^-14, 30 growths return to the default initial scale 2^16).
// 2^-14 is also F16's smallest normal number, and its reciprocal is far
// inside F32's range.
const DefaultMinScale float32 = 0x1p-14

// DefaultRecoveryInterval is how many clean steps grow a scale that is
// recovering from the floor: 10, so that 2^-14 is back to 2^16 in 300
// steps (see GradScaler).
const DefaultRecoveryInterval = 10

// DefaultWarnAfterSkips is how many consecutive skipped steps Warnings
// reports by default: 16, as many halvings as take the default initial
// scale 2^16 down to 1. Calibrating from the default scale skips a few
// steps at the start and growing skips one now and then; 16 in a row means
// the overflow does not go away as the scale falls.
const DefaultWarnAfterSkips = 16

// ScalerOption configures a GradScaler.
type ScalerOption func(*GradScaler)

// InitScale sets the starting scale (default 2^16).
func InitScale(s float32) ScalerOption { return func(g *GradScaler) { g.scale = s } }

// GrowthFactor sets the factor the scale grows by (default 2). Like
// PyTorch's, it is a float64 and the grown scale is rounded once to
// float32.
func GrowthFactor(f float64) ScalerOption { return func(g *GradScaler) { g.growthFactor = f } }

// BackoffFactor sets the factor the scale shrinks by on overflow (default
// 0.5), a float64 as GrowthFactor is.
func BackoffFactor(f float64) ScalerOption { return func(g *GradScaler) { g.backoffFactor = f } }

// GrowthInterval sets how many clean steps in a row grow the scale (default 2000).
func GrowthInterval(n int) ScalerOption { return func(g *GradScaler) { g.growthInterval = n } }

// MinScale sets the floor the scale never backs off below (default
// DefaultMinScale, where the reasons for the default are given). It must be
// 0, or at least F32's smallest normal number 2^-126 (so that the
// reciprocal Unscale multiplies by is finite), and no larger than the
// initial scale. MinScale(0) means no floor, and so no recovery from it:
// PyTorch's trajectory exactly, whatever the storm (see GradScaler).
func MinScale(s float32) ScalerOption { return func(g *GradScaler) { g.minScale = s } }

// RecoveryInterval sets how many clean steps in a row grow a scale that
// has backed off to its floor, until the next overflow above the floor
// (default DefaultRecoveryInterval; see GradScaler). It must be at least
// 1; a value at or above GrowthInterval turns the recovery off.
func RecoveryInterval(n int) ScalerOption { return func(g *GradScaler) { g.recoverEvery = n } }

// WarnAfterSkips sets how many consecutive skipped steps Warnings reports
// (default DefaultWarnAfterSkips); it must be at least 1.
func WarnAfterSkips(n int) ScalerOption { return func(g *GradScaler) { g.warnSkips = n } }

// Enabled turns the scaler on or off; a disabled scaler passes everything
// through (Scale returns the loss, Step steps).
func Enabled(on bool) ScalerOption { return func(g *GradScaler) { g.enabled = on } }

// UnscaleAsStored has Scale tell the graph the loss's scale, so that the
// gradients a product writes whole (each Linear's weight gradient under
// autocast, on the CPU) are unscaled as they are stored, while in cache,
// and Unscale passes over only the others (autograd.Graph.UnscaleAsStored).
// The bits, the steps and the skips are those of unscaling afterwards; what
// differs is that between Backward and Unscale some gradients already hold
// unscaled values, so a loop that reads gradients in between (to log their
// norm before unscaling, say) must not ask for it. Reading them after
// Unscale, to clip them, is as usual. It applies only while the scale is a
// power of two (always, with the default factors) and not on a graph with
// an OnGradReady hook (data-parallel training).
func UnscaleAsStored(on bool) ScalerOption { return func(g *GradScaler) { g.asStored = on } }

// For configures the scaler for training in dt: enabled for F16, disabled
// (with a Note saying why) for BF16 and F32.
func For(dt dtype.DType) ScalerOption {
	return func(g *GradScaler) {
		switch dt {
		case dtype.F16:
			g.enabled = true
		case dtype.BF16:
			g.enabled = false
			g.note = "bf16 has f32's exponent range, so gradients do not underflow: loss scaling is disabled"
		default:
			g.enabled = false
			g.note = "f32 training needs no loss scaling: the scaler is disabled"
		}
	}
}

// NewGradScaler makes a scaler with PyTorch's defaults: scale 65536, growth
// 2.0, backoff 0.5, growth interval 2000; and with a floor of
// DefaultMinScale, recovery from it every DefaultRecoveryInterval clean
// steps and warnings after DefaultWarnAfterSkips skips in a row. Invalid
// options panic, naming the option.
func NewGradScaler(opts ...ScalerOption) *GradScaler {
	s := &GradScaler{scale: 65536, minScale: DefaultMinScale, growthFactor: 2, backoffFactor: 0.5,
		growthInterval: 2000, recoverEvery: DefaultRecoveryInterval, warnSkips: DefaultWarnAfterSkips, enabled: true,
		opts: map[Optimizer]*optState{}}
	for _, o := range opts {
		o(s)
	}
	if err := s.State().check(); err != nil {
		panic("amp.NewGradScaler: " + err.Error())
	}
	if s.warnSkips < 1 {
		panic(fmt.Sprintf("amp.NewGradScaler: WarnAfterSkips(%d); want >= 1", s.warnSkips))
	}
	return s
}

// IsEnabled reports whether the scaler scales.
func (s *GradScaler) IsEnabled() bool { return s.enabled }

// Note explains why a scaler made with For is disabled ("" otherwise).
func (s *GradScaler) Note() string { return s.note }

// LossScale returns the current scale (1 when disabled): PyTorch's
// get_scale.
func (s *GradScaler) LossScale() float32 {
	if !s.enabled {
		return 1
	}
	return s.scale
}

// GrowthTracker is the number of consecutive clean steps since the scale
// last changed.
func (s *GradScaler) GrowthTracker() int { return s.tracker }

// Skipped is how many optimiser steps Step has skipped for non-finite
// gradients.
func (s *GradScaler) Skipped() int { return s.skipped }

// ConsecutiveSkips is how many Updates in a row, up to the last, found an
// Inf or NaN gradient (and so followed a skipped step); 0 after a clean
// one.
func (s *GradScaler) ConsecutiveSkips() int { return s.skipRun }

// MinScale is the floor the scale never backs off below; 0 for none.
func (s *GradScaler) MinScale() float32 { return s.minScale }

// Recovering reports whether the scale is recovering from its floor:
// growing every RecoveryInterval clean steps instead of every
// GrowthInterval.
func (s *GradScaler) Recovering() bool { return s.recovering }

// Steps is how many times Step was called.
func (s *GradScaler) Steps() int { return s.steps }

// Scale returns loss multiplied by the scale, recorded on g so that
// Backward propagates scaled gradients (the loss itself when disabled).
func (s *GradScaler) Scale(g *autograd.Graph, loss *autograd.Var) *autograd.Var {
	if !s.enabled {
		return loss
	}
	if s.asStored {
		if f, _ := math.Frexp(float64(s.scale)); f == 0.5 {
			g.UnscaleAsStored(float32(1 / float64(s.scale)))
		}
	}
	return g.Scale(loss, s.scale)
}

func (s *GradScaler) state(opt Optimizer) *optState {
	st, ok := s.opts[opt]
	if !ok {
		st = &optState{}
		s.opts[opt] = st
	}
	return st
}

// ErrUnscaled is returned by a second Unscale before Update.
var ErrUnscaled = errors.New("amp: Unscale has already been called on this optimizer since the last Update")

// ErrStepped is returned by Unscale or Step after Step and before Update.
var ErrStepped = errors.New("amp: Step has already been called on this optimizer since the last Update")

// Unscale divides opt's gradients by the scale in place (one fused pass per
// device multiplying by the F32 reciprocal, computed in double and rounded
// once as PyTorch does) and records whether any unscaled value is Inf or
// NaN; see GradScaler for how that check differs from PyTorch's. Call it
// before gradient clipping; Step then does not unscale again. Gradients must be F32: an F16 master gradient would lose the very
// values scaling protects, so Unscale refuses it.
func (s *GradScaler) Unscale(opt Optimizer) error {
	if !s.enabled {
		return nil
	}
	st := s.state(opt)
	switch st.stage {
	case unscaled:
		return ErrUnscaled
	case stepped:
		return ErrStepped
	}
	inv := float32(1 / float64(s.scale))
	byDev := map[device.Device][]device.Buffer{}
	var order []device.Device
	for _, p := range opt.Params() {
		if p.Grad != nil && p.Grad.DType() != dtype.F32 {
			return fmt.Errorf("amp: cannot unscale %v gradients (parameter %s): keep parameters in f32 and let autocast cast them", p.Grad.DType(), p.Name)
		}
	}
	found := false
	for _, p := range opt.Params() {
		if p.Grad == nil {
			continue
		}
		if done, nf := autograd.Unscaled(p, inv); done { // by the product that stored it
			found = found || nf
			continue
		}
		d := p.Grad.Device()
		if _, ok := byDev[d]; !ok {
			order = append(order, d)
		}
		byDev[d] = append(byDev[d], p.Grad.Buffer())
	}
	for _, d := range order {
		if d.UnscaleCheck(byDev[d], inv) {
			found = true
		}
	}
	st.foundInf = found
	st.stage = unscaled
	return nil
}

// Step unscales opt's gradients if Unscale has not, then calls opt.Step
// unless a gradient was Inf or NaN. It reports whether the step ran.
func (s *GradScaler) Step(opt Optimizer) (bool, error) {
	s.steps++
	if !s.enabled {
		opt.Step()
		return true, nil
	}
	st := s.state(opt)
	if st.stage == stepped {
		return false, ErrStepped
	}
	if st.stage == ready {
		if err := s.Unscale(opt); err != nil {
			return false, err
		}
	}
	st.stage = stepped
	if st.foundInf {
		s.skipped++
		return false, nil
	}
	opt.Step()
	return true, nil
}

// Update adjusts the scale from the overflow checks since the last Update:
// backoff (and a reset of the growth tracker) if any optimiser saw Inf or
// NaN, else one more clean step, growing the scale when the count reaches
// the growth interval (the recovery interval while the scale recovers from
// its floor). Both products are formed in float64 and rounded once to
// float32, as in PyTorch. A grown scale that would be infinite is not
// taken, and a backed-off scale below MinScale is raised to it, which
// starts the recovery. Update also notes the conditions Warnings reports.
func (s *GradScaler) Update() error {
	if !s.enabled {
		return nil
	}
	if len(s.opts) == 0 {
		return errors.New("amp: Update without any Unscale or Step since the last Update")
	}
	found := false
	for _, st := range s.opts {
		found = found || st.foundInf
	}
	s.updates++
	if found {
		// A NaN product is impossible (both factors are finite and
		// positive), so the comparison catches every value below the floor,
		// 0 included.
		s.scale = max(round32(float64(s.scale)*s.backoffFactor), s.minScale)
		s.tracker = 0
		s.skipRun++
		// At the floor the scale recovers faster; an overflow above it
		// means the scale has found its level, and the recovery is over.
		s.recovering = s.scale <= s.minScale
	} else {
		s.skipRun = 0
		s.tracker++
		if s.tracker >= s.interval() {
			if grown := round32(float64(s.scale) * s.growthFactor); !math.IsInf(float64(grown), 0) {
				s.scale = grown
			}
			s.tracker = 0
		}
	}
	s.noteWarnings()
	clear(s.opts)
	return nil
}

// interval is how many clean steps grow the scale now.
func (s *GradScaler) interval() int {
	if s.recovering {
		return min(s.growthInterval, s.recoverEvery)
	}
	return s.growthInterval
}

// round32 rounds x to the nearest float32 as IEEE 754 does (and as
// PyTorch's static_cast<float> does on the machines it runs on), overflow
// to Inf included: Go leaves the conversion of a value beyond float32's
// range implementation-dependent, so that case is made explicit. Values
// from MaxFloat32 plus half an ulp upwards round to Inf.
func round32(x float64) float32 {
	const overflow = 0x1p128 - 0x1p103 // MaxFloat32 + ulp/2: ties go to the even Inf
	switch {
	case x >= overflow:
		return float32(math.Inf(1))
	case x <= -overflow:
		return float32(math.Inf(-1))
	}
	return float32(x)
}

// WarningKind is a condition of the scaler that Warnings reports.
type WarningKind uint8

const (
	// SkipRun is a run of consecutive skipped steps reaching the
	// WarnAfterSkips threshold.
	SkipRun WarningKind = iota + 1
	// LowScale is the scale falling below 1: steps overflowed even
	// unscaled, and gradients are now scaled down, not up.
	LowScale
)

// Warning is one condition Warnings reports.
type Warning struct {
	Kind WarningKind
	// Update is the number of the Update (counting from 1) at which the
	// condition arose.
	Update int
	// Scale is the loss scale after that Update.
	Scale float32
	// Skips is the number of consecutive skipped steps then.
	Skips int
	// MinScale is the scaler's floor.
	MinScale float32
}

// String is the warning as one line for a log or standard error.
func (w Warning) String() string {
	switch w.Kind {
	case SkipRun:
		return fmt.Sprintf("amp: %d consecutive steps skipped for Inf/NaN gradients (update %d, loss scale %g): "+
			"the overflow does not go away as the scale falls; look for Inf or NaN in the loss, the inputs or the weights",
			w.Skips, w.Update, w.Scale)
	case LowScale:
		return fmt.Sprintf("amp: loss scale fell below 1 (update %d, scale %g, floor %g): steps overflowed even unscaled, "+
			"so gradients are now scaled down and small ones flush to zero in F16", w.Update, w.Scale, w.MinScale)
	}
	return fmt.Sprintf("amp: warning kind %d (update %d, scale %g)", w.Kind, w.Update, w.Scale)
}

// noteWarnings queues each condition that holds after this Update and was
// not reported since it last began: edge-triggered, so a long storm gives
// one SkipRun, not one per step, and a second storm later gives another.
func (s *GradScaler) noteWarnings() {
	w := Warning{Update: s.updates, Scale: s.scale, Skips: s.skipRun, MinScale: s.minScale}
	switch {
	case s.skipRun == 0:
		s.warnedSkips = false
	case s.skipRun >= s.warnSkips && !s.warnedSkips:
		s.warnedSkips = true
		w.Kind = SkipRun
		s.pending = append(s.pending, w)
	}
	switch {
	case s.scale >= 1:
		s.warnedLow = false
	case !s.warnedLow:
		s.warnedLow = true
		w.Kind = LowScale
		s.pending = append(s.pending, w)
	}
}

// Warnings returns the conditions that have arisen since the last call, in
// the order they arose, and forgets them: a consecutive-skip run reaching
// WarnAfterSkips (reported once per run; a clean step ends the run) and the
// scale falling below 1 (reported once each time it falls below). A
// training loop can call it after every Update and print what it returns:
//
//	for _, w := range scaler.Warnings() {
//		fmt.Fprintln(os.Stderr, w)
//	}
func (s *GradScaler) Warnings() []Warning {
	w := s.pending
	s.pending = nil
	return w
}

// State is a GradScaler's saved state, with PyTorch's state_dict keys for
// the fields PyTorch has. The warning threshold is not part of it: it
// decides what a program prints, not how it trains.
type State struct {
	Scale          float32 `json:"scale"`
	GrowthFactor   float64 `json:"growth_factor"`
	BackoffFactor  float64 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
	GrowthTracker  int     `json:"_growth_tracker"`
	// MinScale is the floor; 0 in a state saved before the floor existed
	// (or by PyTorch), which Load reads as "keep the scaler's own", unless
	// NoFloor says the scaler had none.
	MinScale float32 `json:"min_scale,omitempty"`
	NoFloor  bool    `json:"no_floor,omitempty"`
	// RecoveryInterval is the scaler's; 0 in a state saved before it
	// existed, which Load reads as "keep the scaler's own". Recovering
	// says the scale is recovering from the floor.
	RecoveryInterval int  `json:"recovery_interval,omitempty"`
	Recovering       bool `json:"recovering,omitempty"`
	// ConsecutiveSkips is the current run of skipped steps, so that a
	// resumed run counts on from it.
	ConsecutiveSkips int `json:"consecutive_skips,omitempty"`
	// Steps and Skipped are the counts behind [GradScaler.Steps] and
	// [GradScaler.Skipped], so that a resumed run reports the whole run's.
	Steps   int `json:"steps,omitempty"`
	Skipped int `json:"skipped,omitempty"`
}

// State returns the scaler's state for saving.
func (s *GradScaler) State() State {
	return State{Scale: s.scale, GrowthFactor: s.growthFactor, BackoffFactor: s.backoffFactor, GrowthInterval: s.growthInterval,
		GrowthTracker: s.tracker, MinScale: s.minScale, NoFloor: s.minScale == 0, RecoveryInterval: s.recoverEvery,
		Recovering: s.recovering, ConsecutiveSkips: s.skipRun, Steps: s.steps, Skipped: s.skipped}
}

// smallestNormal32 is F32's smallest normal number, 2^-126: the least
// floor whose reciprocal is finite with room to spare.
const smallestNormal32 = 0x1p-126

// check reports the first way st is not a state a scaler can be in, with
// the constructor's rules (a MinScale of 0 without NoFloor is resolved by
// the caller).
func (st State) check() error {
	finite := func(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }
	interval := st.GrowthInterval
	if st.Recovering {
		interval = min(interval, st.RecoveryInterval)
	}
	switch {
	case st.NoFloor && (!(st.Scale >= 0) || !finite(float64(st.Scale))):
		return fmt.Errorf("scale %v; want a finite number >= 0", st.Scale)
	case !st.NoFloor && (!(st.Scale > 0) || !finite(float64(st.Scale))):
		return fmt.Errorf("scale %v; want a positive finite number", st.Scale)
	case !(st.GrowthFactor > 1) || !finite(st.GrowthFactor):
		return fmt.Errorf("growth factor %v; want a finite number > 1", st.GrowthFactor)
	case !(st.BackoffFactor > 0 && st.BackoffFactor < 1):
		return fmt.Errorf("backoff factor %v; want in (0, 1)", st.BackoffFactor)
	case st.GrowthInterval < 1:
		return fmt.Errorf("growth interval %d; want >= 1", st.GrowthInterval)
	case st.RecoveryInterval < 1:
		return fmt.Errorf("recovery interval %d; want >= 1", st.RecoveryInterval)
	case st.GrowthTracker < 0 || st.GrowthTracker >= interval:
		return fmt.Errorf("growth tracker %d; want in [0, growth interval %d)", st.GrowthTracker, interval)
	case st.NoFloor && st.MinScale != 0:
		return fmt.Errorf("minimum scale %v with no floor; want 0", st.MinScale)
	case !st.NoFloor && (!(st.MinScale >= smallestNormal32) || !finite(float64(st.MinScale))):
		return fmt.Errorf("minimum scale %v; want 0 (no floor) or a finite number >= 2^-126", st.MinScale)
	case st.Scale < st.MinScale:
		return fmt.Errorf("scale %v below the minimum scale %v; lower MinScale", st.Scale, st.MinScale)
	case st.ConsecutiveSkips < 0:
		return fmt.Errorf("consecutive skips %d; want >= 0", st.ConsecutiveSkips)
	case st.Steps < 0 || st.Skipped < 0 || st.Skipped > st.Steps:
		return fmt.Errorf("%d skipped of %d steps; want 0 <= skipped <= steps", st.Skipped, st.Steps)
	}
	return nil
}

// Load restores a saved state, after checking it with the constructor's
// rules: an invalid state (an infinite scale, a growth tracker outside
// [0, interval), a scale below the floor, ...) is an error and changes
// nothing. A state without a MinScale (and without NoFloor) keeps the
// scaler's own floor, and one without a RecoveryInterval its own. Load
// re-arms Warnings, so a resumed program reports a condition that still
// holds. It fails if called between Unscale or Step and Update.
func (s *GradScaler) Load(st State) error {
	if len(s.opts) != 0 {
		return errors.New("amp: Load between Unscale/Step and Update")
	}
	if st.MinScale == 0 && !st.NoFloor {
		st.MinScale, st.NoFloor = s.minScale, s.minScale == 0
	}
	if st.RecoveryInterval == 0 {
		st.RecoveryInterval = s.recoverEvery
	}
	if err := st.check(); err != nil {
		return fmt.Errorf("amp: invalid scaler state: %w", err)
	}
	s.scale, s.growthFactor, s.backoffFactor, s.growthInterval, s.tracker, s.minScale, s.skipRun =
		st.Scale, st.GrowthFactor, st.BackoffFactor, st.GrowthInterval, st.GrowthTracker, st.MinScale, st.ConsecutiveSkips
	s.recoverEvery, s.recovering = st.RecoveryInterval, st.Recovering
	s.steps, s.skipped = st.Steps, st.Skipped
	s.warnedSkips, s.warnedLow, s.pending = false, false, nil
	return nil
}
