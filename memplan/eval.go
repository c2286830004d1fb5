package memplan

import (
	"fmt"
	"slices"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/nn"
)

// Eval is a program's evaluation pass, which a plan must fit as well as
// its training steps: programs evaluate between steps, in batches often
// larger than the training batch (the MNIST programs' test set goes in
// thousands), with the training state still live.
type Eval struct {
	// Batch is the batch the program evaluates in without a budget.
	Batch int
	// Pass records one evaluation forward pass of the first n samples
	// on g, a graph made without gradients with the plan's Options, as
	// the program's evaluation does (evaluation mode, autocast, the
	// model's Forward and what the program reads from it).
	Pass func(g *autograd.Graph, n int)
}

// EvalFit is how the program evaluates under a plan: in batches of Batch
// samples (Want is the batch it asked for), which peak at Peak beside the
// training state.
type EvalFit struct {
	Batch, Want int
	Peak        int64
}

// FitEval finds the largest evaluation batch, e.Batch or a half, a
// quarter... of it, whose pass keeps the device's peak within the plan's
// budget beside the training state as it is between steps (parameters,
// the optimiser's state, autocast's weight copies, what else the program
// holds and the plan's reserve; no gradients: a step ends with the
// optimiser's ZeroGrad, which frees them). It never runs a pass it
// expects to go over the budget: it measures passes of one and two
// samples, extrapolates (a pass's memory grows linearly with its batch,
// or slower where scratch is capped), and measures the batch it picks,
// halving again if that pass went over. The passes run under the plan,
// which FitEval applies to the model (Apply), as the program's
// evaluations will. It records the fit in the plan (pl.Eval) and returns
// it; the model's state is left as it was. An evaluation that does not
// fit one sample at a time is an *EvalInfeasibleError. The Monitor
// checks the evaluations as they run (Monitor.Eval).
func (pl *Plan) FitEval(e Eval) (EvalFit, error) {
	p := pl.profile
	dev, model := p.cfg.Dev, p.cfg.Model
	pl.Apply(model)
	resident := p.Param + p.OptimState + p.Other + p.Reserve
	// Autocast's copies training keeps: those of the parameters outside
	// the chain, and of the units the plan does not recompute.
	kept := p.Cast
	for i, u := range p.Units {
		if !slices.ContainsFunc(pl.Spans, func(s nn.Span) bool { return s.Lo <= i && i < s.Hi }) {
			kept += u.casts
		}
	}
	opts := append([]autograd.Option{autograd.WithoutGrad()}, pl.Options()...)
	// measure is the predicted peak of evaluating in batches of n: the
	// pass's peak over where it began, with autocast's weight copies it
	// made for itself (a graph without gradients keeps them no longer than
	// itself), beside those training keeps. It is an upper bound, since
	// the pass makes no copy of a parameter that keeps one.
	measure := func(n int) (int64, error) {
		if err := dev.Sync(); err != nil {
			return 0, fmt.Errorf("memplan: evaluation pass: %w", err)
		}
		before := dev.MemStats().Live
		dev.ResetPeak()
		g := autograd.NewGraph(dev, opts...)
		e.Pass(g, n)
		g.Release()
		if err := dev.Sync(); err != nil {
			return 0, fmt.Errorf("memplan: evaluation pass: %w", err)
		}
		return resident + kept + dev.MemStats().Peak.Total - before.Total, nil
	}
	want := max(e.Batch, 1)
	one, err := measure(1)
	if err != nil {
		return EvalFit{}, err
	}
	if one > pl.Budget {
		return EvalFit{Batch: 1, Want: e.Batch, Peak: one}, &EvalInfeasibleError{Peak: one, Budget: pl.Budget}
	}
	per := int64(0) // bytes a sample
	if want > 1 {
		two, err := measure(2)
		if err != nil {
			return EvalFit{}, err
		}
		per = max(two-one, 0)
	}
	fits := func(n int) bool { return one+per*int64(n-1) <= pl.Budget }
	n := want
	for n > 1 && !fits(n) {
		n = (n + 1) / 2
	}
	for {
		peak := one
		if n > 1 {
			if peak, err = measure(n); err != nil {
				return EvalFit{}, err
			}
		}
		if peak <= pl.Budget || n == 1 {
			pl.Eval = EvalFit{Batch: n, Want: e.Batch, Peak: peak}
			return pl.Eval, nil
		}
		n = (n + 1) / 2
	}
}

// EvalBatch is the batch to evaluate in under pl: the one FitEval fitted,
// or def for a nil plan (no budget) or one FitEval has not fitted.
func (pl *Plan) EvalBatch(def int) int {
	if pl == nil || pl.Eval.Batch == 0 {
		return def
	}
	return pl.Eval.Batch
}

// EvalInfeasibleError is an evaluation that does not fit the budget even
// one sample at a time (FitEval).
type EvalInfeasibleError struct{ Peak, Budget int64 }

func (e *EvalInfeasibleError) Error() string {
	return fmt.Sprintf("evaluating one sample at a time peaks at %s, over the budget of %s",
		device.FormatBytes(e.Peak), device.FormatBytes(e.Budget))
}
