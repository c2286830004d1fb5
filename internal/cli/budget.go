package cli

import (
	"flag"
	"fmt"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/memplan"
)

// ExitOverBudget is the status of a run stopped because a training step
// went over -mem-budget: its summary was printed and a checkpoint saved.
const ExitOverBudget = 4

var _ flag.Value = (*MemBudget)(nil)

// MemBudget is the value of a -mem-budget flag: a memory budget
// (memplan.ParseBudget: 512MiB, 1.5GiB, 800MB, bytes, 0.8 of free device
// memory, 0.6x of the unconstrained peak) or none, the zero value.
type MemBudget struct {
	b  memplan.Budget
	on bool
}

// MemBudgetVar defines -mem-budget on fs, as every training program takes
// it.
func MemBudgetVar(fs *flag.FlagSet, b *MemBudget) {
	fs.Var(b, "mem-budget", "fit each training step into this much device memory: a size (512MiB, 1.5GiB, 800MB),\n"+
		"a fraction of free device memory (0.8) or of the step's peak without a plan (0.6x);\n"+
		"the program measures one step, plans what to recompute, prints the plan and holds\n"+
		"every step to it (takes the place of -checkpoint)")
}

// On reports whether a budget was given.
func (m MemBudget) On() bool { return m.on }

// Budget is the budget given.
func (m MemBudget) Budget() memplan.Budget { return m.b }

// String is the budget as given, or "" for none.
func (m MemBudget) String() string {
	if !m.on {
		return ""
	}
	return m.b.String()
}

// Setting is the budget as the ranks of a data-parallel job compare it:
// as given, or "none".
func (m MemBudget) Setting() string {
	if !m.on {
		return "none"
	}
	return m.b.String()
}

// Set parses a budget.
func (m *MemBudget) Set(s string) error {
	b, err := memplan.ParseBudget(s)
	if err != nil {
		return err
	}
	*m = MemBudget{b: b, on: true}
	return nil
}

// Arg names the flag's value in help.
func (*MemBudget) Arg() string { return "SIZE" }

// Check refuses -mem-budget beside a fixed -checkpoint: the plan chooses
// the checkpointing, so the two would disagree.
func (m MemBudget) Check(ckpt Checkpoint) error {
	if m.on && ckpt.On() {
		return Usagef("-mem-budget chooses what to recompute itself: drop -checkpoint %v (or give -checkpoint off)", ckpt)
	}
	return nil
}

// Planned is the memory plan's part of a JSON summary: null without
// -mem-budget.
type Planned struct {
	MemBudgetBytes   *int64 `json:"mem_budget_bytes"`
	PlannedPeakBytes *int64 `json:"planned_peak_bytes"`
	PlannedOverhead  *Float `json:"planned_overhead"` // predicted step-time overhead of the recomputation, 0.1 for 10%
	// PlannedEvalBatch is the batch evaluation runs in under the plan and
	// PlannedEvalPeakBytes its predicted peak, an upper bound
	// (memplan.Plan.FitEval); null without a budget, or without an
	// evaluation to fit.
	PlannedEvalBatch     *int   `json:"planned_eval_batch"`
	PlannedEvalPeakBytes *int64 `json:"planned_eval_peak_bytes"`
	// OverBudget is set when a step, or the evaluation after it
	// (OverBudgetEval), went over the budget and the run stopped;
	// OverBudgetStep is that step.
	OverBudget     bool `json:"over_budget,omitempty"`
	OverBudgetStep int  `json:"over_budget_step,omitempty"`
	OverBudgetEval bool `json:"over_budget_eval,omitempty"`
}

// PlannedOf fills a summary's Planned from pl (nil: no budget) and the
// over-budget stop, if any.
func PlannedOf(pl *memplan.Plan, over *OverBudget) Planned {
	var p Planned
	if pl == nil {
		return p
	}
	budget, peak, overhead := pl.Budget, pl.Peak, Float(pl.Overhead)
	p.MemBudgetBytes, p.PlannedPeakBytes, p.PlannedOverhead = &budget, &peak, &overhead
	if e := pl.Eval; e.Batch > 0 {
		p.PlannedEvalBatch, p.PlannedEvalPeakBytes = &e.Batch, &e.Peak
	}
	if over != nil {
		p.OverBudget, p.OverBudgetStep, p.OverBudgetEval = true, over.Step, over.Eval
	}
	return p
}

// OverBudget reports a run stopped because a training step's measured
// peak, or an evaluation's, went over -mem-budget, with the checkpoint
// saved then.
type OverBudget struct {
	Step                    int
	Eval                    bool // the evaluation after Step went over, not the step
	Peak, Budget, Predicted int64
	Saved                   string // the checkpoint's directory
}

func (e *OverBudget) Error() string {
	what := fmt.Sprintf("step %d", e.Step)
	if e.Eval {
		what = "the evaluation after " + what
	}
	return fmt.Sprintf("%s peaked at %s, over -mem-budget's %s (planned %s); stopped and saved %s: continue with -resume %s and a larger -mem-budget",
		what, device.FormatBytes(e.Peak), device.FormatBytes(e.Budget), device.FormatBytes(e.Predicted), e.Saved, e.Saved)
}
