package train

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/runstate"
)

// PlanBudget is -mem-budget's planning, before training: it measures one
// step at the real batch shape (loss records the step's forward pass on a
// graph the planner makes, as the training loop would: autocast, the
// batch, the model, the loss scaled), plans what to recompute so that the
// step fits the budget, prints the plan on stderr, and applies it to
// model. The training loop then makes its graphs with the plan's Options.
// Without a budget it returns nil. A budget no plan fits is a usage error
// (exit status 2) naming the smallest budget that fits and its parts.
// accumulate says the step adds its gradients to earlier batches'
// (memplan.Config.Accumulate).
//
// Under -dist the plan counts the bucket the gradients' reduction packs
// while backward runs (DataParallel.PackedBytes as memplan.Config.Reserve),
// and every rank takes rank 0's choice: the ranks time their dry steps
// apart, and the cheapest choice by those times may differ, while the
// memory a choice takes does not. So every rank's steps hold the memory
// rank 0's plan, the one printed, predicts. Whether a budget at the very
// margin fits can differ too (the smallest plan the search finds depends
// on the times among choices whose estimates tie), so the ranks also agree
// on that: where any rank found no plan, every rank stops.
//
// eval, when not nil, is the program's evaluation, which the plan fits as
// well (Plan.FitEval): its batch may be smaller under the plan than
// without one.
func (e *Env) PlanBudget(b cli.MemBudget, model nn.Chain, opt any, accumulate bool, loss func(g *autograd.Graph) *autograd.Var, eval *memplan.Eval) (*memplan.Plan, error) {
	if !b.On() {
		return nil, nil
	}
	c := memplan.Config{Dev: e.Dev, Model: model, Loss: loss, Optim: opt, Accumulate: accumulate}
	if e.dp != nil {
		c.Reserve = e.dp.PackedBytes()
	}
	p, pl, err := planFor(b, c)
	if pl, err = e.rankZerosPlan(b, len(model.Units()), p, pl, err); err != nil {
		return nil, err
	}
	if eval != nil {
		_, err := pl.FitEval(*eval)
		var inf *memplan.EvalInfeasibleError
		if errors.As(err, &inf) {
			return nil, cli.Usagef("-mem-budget %v: %v", b, err)
		}
		if err != nil {
			return nil, err
		}
	}
	fmt.Fprintln(e.Stderr, pl)
	pl.Apply(model)
	return pl, nil
}

// planFor measures c's step and plans it for the budget b: a budget it
// cannot resolve or fit is a usage error.
func planFor(b cli.MemBudget, c memplan.Config) (*memplan.Profile, *memplan.Plan, error) {
	p, err := memplan.Measure(c)
	if err != nil {
		return nil, nil, err
	}
	bytes, err := b.Budget().Resolve(c.Dev, p)
	if err != nil {
		return nil, nil, cli.Usagef("-mem-budget %v: %v", b, err)
	}
	pl, err := p.Plan(bytes)
	var inf *memplan.InfeasibleError
	if errors.As(err, &inf) {
		return nil, nil, cli.Usagef("-mem-budget %v: %v", b, err)
	}
	return p, pl, err
}

// rankZerosPlan returns, under -dist, rank 0's plan for the budget pl was
// made for, on every rank: pl itself on rank 0 and where the choices
// agree, else the plan of rank 0's choice on this rank's profile p
// (measured again). planned is this rank's planning error; if any rank
// had one, every rank returns one, rank 0 alone saying it (Outcome).
// units is the number of the chain's units. Without -dist it returns pl
// and planned.
func (e *Env) rankZerosPlan(b cli.MemBudget, units int, p *memplan.Profile, pl *memplan.Plan, planned error) (*memplan.Plan, error) {
	if e.Comm == nil || e.Ranks < 2 {
		return pl, planned
	}
	// The numbers every rank adds up: how many ranks found no plan; then
	// rank 0's choice: the convolutions' chunk cap, and for each unit the
	// end of the span that starts there, or 0.
	v := make([]float32, 2+units)
	switch {
	case planned != nil:
		v[0] = 1
	case e.Rank == 0:
		v[1] = float32(pl.ConvChunk)
		for _, s := range pl.Spans {
			v[2+s.Lo] = float32(s.Hi)
		}
	}
	if err := distributed.AllReduceHost(e.Comm, e.Dev, v, device.Sum); err != nil {
		return nil, err
	}
	if v[0] > 0 {
		if planned == nil {
			planned = cli.Usagef("-mem-budget %v: %d of the %d ranks found no plan that fits it (the ranks' dry steps differ at the margin); give a larger budget", b, int(v[0]), e.Ranks)
		}
		return nil, e.Outcome(planned)
	}
	var spans []nn.Span
	for i, hi := range v[2:] {
		if hi > 0 {
			spans = append(spans, nn.Span{Lo: i, Hi: int(hi)})
		}
	}
	chunk := int(v[1])
	if chunk == pl.ConvChunk && slices.Equal(spans, pl.Spans) {
		return pl, nil
	}
	if chunk != 0 {
		bp, err := p.Bounded()
		if err != nil {
			return nil, err
		}
		if bp == nil || bp.ConvChunk != chunk {
			return nil, fmt.Errorf("-mem-budget: rank 0 bounds convolutions' scratch to %d images, which rank %d cannot", chunk, e.Rank)
		}
		p = bp
	}
	zero, err := p.PlanSpans(pl.Budget, spans)
	if err == nil && zero.Peak > zero.Budget {
		// A budget of free memory resolves on each rank's own device.
		err = fmt.Errorf("-mem-budget: rank 0's plan peaks at %s, over rank %d's budget of %s", device.FormatBytes(zero.Peak), e.Rank, device.FormatBytes(zero.Budget))
	}
	return zero, err
}

// Guard holds training to a memory plan: after each step it reads the
// device's peak and, when the step went over the budget, saves a
// checkpoint and stops the run before a later step runs out of memory. A
// nil Guard (no budget) does nothing.
type Guard struct {
	mon   *memplan.Monitor
	plan  *memplan.Plan
	saver *Saver
}

// NewGuard starts holding steps on dev to pl (nil: no budget), saving
// through saver when one goes over.
func NewGuard(dev device.Device, pl *memplan.Plan, saver *Saver) *Guard {
	if pl == nil {
		return nil
	}
	return &Guard{mon: memplan.NewMonitor(dev, pl), plan: pl, saver: saver}
}

// AfterStep checks the step that ended at pos: over the budget, it saves
// pos's checkpoint and returns a *cli.OverBudget, on which the program
// stops as for a signal (its summary printed, marked over_budget) and
// exits with cli.ExitOverBudget.
func (g *Guard) AfterStep(pos runstate.Position) error {
	if g == nil {
		return nil
	}
	return g.over(pos, g.mon.Step())
}

// over saves pos's checkpoint when err is an *memplan.OverBudgetError and
// returns it as a *cli.OverBudget; any other err as it is.
func (g *Guard) over(pos runstate.Position, err error) error {
	var over *memplan.OverBudgetError
	if !errors.As(err, &over) {
		return err
	}
	dir, serr := g.saver.SaveNow(pos)
	if serr != nil {
		return fmt.Errorf("%v, and saving a checkpoint failed: %w", err, serr)
	}
	return &cli.OverBudget{Step: pos.Step, Eval: over.Eval, Peak: over.Peak, Budget: over.Budget, Predicted: over.Predicted, Saved: dir}
}

// AfterEval checks the evaluation that ran after the step that ended at
// pos as AfterStep checks a step.
func (g *Guard) AfterEval(pos runstate.Position) error {
	if g == nil {
		return nil
	}
	return g.over(pos, g.mon.Eval())
}

// Peak is the largest peak the guard has seen, steps and evaluations; 0
// for a nil Guard.
func (g *Guard) Peak() int64 {
	if g == nil {
		return 0
	}
	return g.mon.Peak()
}

// SaveNow saves pos's checkpoint now, for a run that must stop: in -save's
// directory, or without -save in a new directory beside the program
// ("<prog>-stopped-*" in the working directory, made for it, so that no
// file of the user's is touched). It returns the directory to resume
// from.
//
// Under -dist (Together) every rank calls it at the same step, rank 0
// alone writes, and none returns before the checkpoint is whole; the
// other ranks return "".
func (s *Saver) SaveNow(pos runstate.Position) (string, error) {
	dir, err := s.saveNow(pos)
	if berr := s.together(); berr != nil && err == nil {
		err = berr
	}
	return dir, err
}

func (s *Saver) saveNow(pos runstate.Position) (string, error) {
	if s.comm != nil && s.comm.Rank() != 0 {
		return "", nil
	}
	if s.flags.Save != "" {
		if _, err := s.save(pos); err != nil {
			return "", err
		}
		return s.flags.Save, nil
	}
	dir, err := os.MkdirTemp(".", s.prog+"-stopped-")
	if err != nil {
		return "", err
	}
	defer s.signals.Hold(fmt.Sprintf("the checkpoint of step %d", pos.Step))()
	if _, err := runstate.Save(dir, s.run, pos, keep); err != nil {
		return "", err
	}
	return dir, nil
}
