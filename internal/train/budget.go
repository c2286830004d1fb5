package train

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
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
func PlanBudget(prog string, stderr io.Writer, b cli.MemBudget, dev device.Device, model nn.Chain, opt any, accumulate bool,
	loss func(g *autograd.Graph) *autograd.Var) (*memplan.Plan, error) {
	if !b.On() {
		return nil, nil
	}
	p, err := memplan.Measure(memplan.Config{Dev: dev, Model: model, Loss: loss, Optim: opt, Accumulate: accumulate})
	if err != nil {
		return nil, err
	}
	bytes, err := b.Budget().Resolve(dev, p)
	if err != nil {
		return nil, cli.Usagef("-mem-budget %v: %v", b, err)
	}
	pl, err := p.Plan(bytes)
	var inf *memplan.InfeasibleError
	if errors.As(err, &inf) {
		return nil, cli.Usagef("-mem-budget %v: %v", b, err)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stderr, pl)
	pl.Apply(model)
	return pl, nil
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
	err := g.mon.Step()
	var over *memplan.OverBudgetError
	if !errors.As(err, &over) {
		return err
	}
	dir, serr := g.saver.SaveNow(pos)
	if serr != nil {
		return fmt.Errorf("%v, and saving a checkpoint failed: %w", err, serr)
	}
	return &cli.OverBudget{Step: pos.Step, Peak: over.Peak, Budget: over.Budget, Predicted: over.Predicted, Saved: dir}
}

// Peak is the largest step peak the guard has seen; 0 for a nil Guard.
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
func (s *Saver) SaveNow(pos runstate.Position) (string, error) {
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
