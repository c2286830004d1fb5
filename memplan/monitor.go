package memplan

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

// Monitor holds a training run to its plan: after each step it reads the
// device's peak and reports a step whose peak went over the budget, so
// that the program can stop and save before a later step runs the device
// out of memory. The plan's prediction is exact for the step it measured;
// a step that differs (a longer sequence, another batch size, memory the
// program allocated beside the step) is what it catches.
type Monitor struct {
	dev  device.Device
	plan *Plan
	step int
	peak int64
}

// NewMonitor starts watching dev's peak for pl: the peak so far (the dry
// step's, loading) is set aside.
func NewMonitor(dev device.Device, pl *Plan) *Monitor {
	dev.ResetPeak()
	return &Monitor{dev: dev, plan: pl}
}

// OverBudgetError is a step whose measured peak went over the budget.
type OverBudgetError struct {
	Step         int  // counted from 1 since NewMonitor
	Eval         bool // the evaluation after Step went over (Monitor.Eval)
	Peak, Budget int64
	Predicted    int64
}

func (e *OverBudgetError) Error() string {
	what := fmt.Sprintf("step %d", e.Step)
	if e.Eval {
		what = "the evaluation after " + what
	}
	return fmt.Sprintf("%s peaked at %s, over the memory budget of %s (the plan predicted %s)",
		what, device.FormatBytes(e.Peak), device.FormatBytes(e.Budget), device.FormatBytes(e.Predicted))
}

// Step is called after each training step (and before the next): it
// returns an *OverBudgetError if the device's peak since NewMonitor has
// gone over the plan's budget, which then happened in this step.
func (m *Monitor) Step() error {
	m.step++
	return m.check(false)
}

// Eval is called after an evaluation between steps: it returns an
// *OverBudgetError, Eval set, if the device's peak has gone over the
// budget since the last Step, which then happened in the evaluation.
func (m *Monitor) Eval() error { return m.check(true) }

func (m *Monitor) check(eval bool) error {
	s := m.dev.MemStats()
	m.peak = max(m.peak, s.Peak.Total)
	if s.Peak.Total > m.plan.Budget {
		return &OverBudgetError{Step: m.step, Eval: eval, Peak: s.Peak.Total, Budget: m.plan.Budget, Predicted: m.plan.Peak}
	}
	return nil
}

// Peak is the largest peak the device reached since NewMonitor, as of the
// last Step or Eval.
func (m *Monitor) Peak() int64 { return m.peak }

// PredictionError is the prediction's error relative to the measured
// peak, as of the last Step: (predicted - measured) / measured, 0.01 for a
// prediction 1% high; 0 before the first Step.
func (m *Monitor) PredictionError() float64 {
	if m.peak == 0 {
		return 0
	}
	return float64(m.plan.Peak-m.peak) / float64(m.peak)
}
