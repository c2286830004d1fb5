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

// GradScaler is PyTorch's dynamic loss scaler (torch.amp.GradScaler).
//
// Scale multiplies the loss so that small F16 gradients do not flush to
// zero. Unscale divides the gradients back (multiplying by the F32
// reciprocal of the scale) and records whether any is Inf or NaN. Step
// unscales if that has not happened, then steps the optimiser only when all
// gradients were finite. Update halves the scale after an overflow (and
// restarts the count of clean steps), or doubles it after GrowthInterval
// clean steps in a row; the scale never grows to infinity.
type GradScaler struct {
	scale          float32
	growthFactor   float32
	backoffFactor  float32
	growthInterval int
	tracker        int
	enabled        bool
	note           string
	opts           map[Optimizer]*optState
	skipped        int
	steps          int
}

// ScalerOption configures a GradScaler.
type ScalerOption func(*GradScaler)

// InitScale sets the starting scale (default 2^16).
func InitScale(s float32) ScalerOption { return func(g *GradScaler) { g.scale = s } }

// GrowthFactor sets the factor the scale grows by (default 2).
func GrowthFactor(f float32) ScalerOption { return func(g *GradScaler) { g.growthFactor = f } }

// BackoffFactor sets the factor the scale shrinks by on overflow (default 0.5).
func BackoffFactor(f float32) ScalerOption { return func(g *GradScaler) { g.backoffFactor = f } }

// GrowthInterval sets how many clean steps in a row grow the scale (default 2000).
func GrowthInterval(n int) ScalerOption { return func(g *GradScaler) { g.growthInterval = n } }

// Enabled turns the scaler on or off; a disabled scaler passes everything
// through (Scale returns the loss, Step steps).
func Enabled(on bool) ScalerOption { return func(g *GradScaler) { g.enabled = on } }

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
// 2.0, backoff 0.5, growth interval 2000.
func NewGradScaler(opts ...ScalerOption) *GradScaler {
	s := &GradScaler{scale: 65536, growthFactor: 2, backoffFactor: 0.5, growthInterval: 2000, enabled: true,
		opts: map[Optimizer]*optState{}}
	for _, o := range opts {
		o(s)
	}
	switch {
	case !(s.scale > 0) || math.IsInf(float64(s.scale), 0):
		panic(fmt.Sprintf("amp.NewGradScaler: initial scale %v; want a positive finite number", s.scale))
	case !(s.growthFactor > 1):
		panic(fmt.Sprintf("amp.NewGradScaler: growth factor %v; want > 1", s.growthFactor))
	case !(s.backoffFactor > 0 && s.backoffFactor < 1):
		panic(fmt.Sprintf("amp.NewGradScaler: backoff factor %v; want in (0, 1)", s.backoffFactor))
	case s.growthInterval < 1:
		panic(fmt.Sprintf("amp.NewGradScaler: growth interval %d; want >= 1", s.growthInterval))
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

// Steps is how many times Step was called.
func (s *GradScaler) Steps() int { return s.steps }

// Scale returns loss multiplied by the scale, recorded on g so that
// Backward propagates scaled gradients (the loss itself when disabled).
func (s *GradScaler) Scale(g *autograd.Graph, loss *autograd.Var) *autograd.Var {
	if !s.enabled {
		return loss
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
// device multiplying by the F32 reciprocal) and records whether any was Inf
// or NaN. Call it before gradient clipping; Step then does not unscale
// again. Gradients must be F32: an F16 master gradient would lose the very
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
		if p.Grad == nil {
			continue
		}
		if p.Grad.DType() != dtype.F32 {
			return fmt.Errorf("amp: cannot unscale %v gradients (parameter %s): keep parameters in f32 and let autocast cast them", p.Grad.DType(), p.Name)
		}
		d := p.Grad.Device()
		if _, ok := byDev[d]; !ok {
			order = append(order, d)
		}
		byDev[d] = append(byDev[d], p.Grad.Buffer())
	}
	found := false
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
// the growth interval. A grown scale that would be infinite is not taken.
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
	if found {
		s.scale *= s.backoffFactor
		s.tracker = 0
	} else {
		s.tracker++
		if s.tracker == s.growthInterval {
			if grown := s.scale * s.growthFactor; !math.IsInf(float64(grown), 0) {
				s.scale = grown
			}
			s.tracker = 0
		}
	}
	clear(s.opts)
	return nil
}

// State is a GradScaler's saved state, with PyTorch's state_dict keys.
type State struct {
	Scale          float32 `json:"scale"`
	GrowthFactor   float32 `json:"growth_factor"`
	BackoffFactor  float32 `json:"backoff_factor"`
	GrowthInterval int     `json:"growth_interval"`
	GrowthTracker  int     `json:"_growth_tracker"`
}

// State returns the scaler's state for saving.
func (s *GradScaler) State() State {
	return State{s.scale, s.growthFactor, s.backoffFactor, s.growthInterval, s.tracker}
}

// Load restores a saved state. It fails if called between Unscale or Step
// and Update.
func (s *GradScaler) Load(st State) error {
	if len(s.opts) != 0 {
		return errors.New("amp: Load between Unscale/Step and Update")
	}
	if !(st.Scale > 0) || st.GrowthInterval < 1 || !(st.GrowthFactor > 1) || !(st.BackoffFactor > 0 && st.BackoffFactor < 1) {
		return fmt.Errorf("amp: invalid scaler state %+v", st)
	}
	s.scale, s.growthFactor, s.backoffFactor, s.growthInterval, s.tracker =
		st.Scale, st.GrowthFactor, st.BackoffFactor, st.GrowthInterval, st.GrowthTracker
	return nil
}
