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
// optimiser's ZeroGrad, which frees them), measuring each batch it tries
// with one pass. The passes run under the plan, which FitEval applies to
// the model (Apply), as the program's evaluations will. It records the
// fit in the plan (pl.Eval) and returns it; the model's state is left as
// it was. An evaluation that does not fit one sample at a time is an
// *EvalInfeasibleError. The Monitor checks the evaluations as they run
// (Monitor.Eval).
func (pl *Plan) FitEval(e Eval) (EvalFit, error) {
	p := pl.profile
	dev, model := p.cfg.Dev, p.cfg.Model
	pl.Apply(model)
	defer dropCasts(model)()
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
	fit := EvalFit{Want: e.Batch}
	for n := max(e.Batch, 1); ; n = (n + 1) / 2 {
		if err := dev.Sync(); err != nil {
			return fit, fmt.Errorf("memplan: evaluation pass: %w", err)
		}
		before := dev.MemStats().Live
		dev.ResetPeak()
		g := autograd.NewGraph(dev, opts...)
		e.Pass(g, n)
		g.Release()
		if err := dev.Sync(); err != nil {
			return fit, fmt.Errorf("memplan: evaluation pass: %w", err)
		}
		s := dev.MemStats()
		// The pass's peak over where it began, with autocast's weight copies
		// it made for itself (a graph without gradients keeps them no
		// longer than itself), beside those training keeps: an upper bound,
		// since the pass makes no copy of a parameter that keeps one.
		fit.Batch, fit.Peak = n, resident+kept+s.Peak.Total-before.Total
		if fit.Peak <= pl.Budget {
			pl.Eval = fit
			return fit, nil
		}
		if n == 1 {
			return fit, &EvalInfeasibleError{Peak: fit.Peak, Budget: pl.Budget}
		}
	}
}

// EvalInfeasibleError is an evaluation that does not fit the budget even
// one sample at a time (FitEval).
type EvalInfeasibleError struct{ Peak, Budget int64 }

func (e *EvalInfeasibleError) Error() string {
	return fmt.Sprintf("evaluating one sample at a time peaks at %s, over the budget of %s",
		device.FormatBytes(e.Peak), device.FormatBytes(e.Budget))
}
