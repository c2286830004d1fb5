package main

import (
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestMemBudget is -mem-budget on the GPT with dropout: the run stays
// within 60% of its unconstrained peak, as planned, with the plan on
// standard error and in the summary, and its losses are those of the run
// without a budget (recomputation changes no number). A budget too small
// is refused before training in one line.
func TestMemBudget(t *testing.T) {
	// tiny's activations are too few beside its weights to reach 60%.
	args := append(append([]string{}, tiny...), "-layers", "3", "-embd", "32", "-block", "64", "-batch", "16", "-dropout", "0.1", "-iters", "4")
	r := clitest.Run(t, nil, append(args, "-mem-budget", "0.6x", "-json")...)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	s := summaryOf(t, r.Stdout)
	clitest.HeldPlan(t, s.Planned, s.PeakBytes.Total)
	if !strings.Contains(r.Stderr, "h.0.attn") || !strings.Contains(r.Stderr, "predicted peak") {
		t.Errorf("no plan on standard error: %q", r.Stderr)
	}
	plain := runOK(t, args...)
	if plain.TrainLoss != s.TrainLoss || plain.ValLoss != s.ValLoss {
		t.Errorf("losses %v, %v with the plan; %v, %v without", s.TrainLoss, s.ValLoss, plain.TrainLoss, plain.ValLoss)
	}
	if plain.MemBudgetBytes != nil {
		t.Errorf("without -mem-budget, mem_budget_bytes is %d", *plain.MemBudgetBytes)
	}
	r = clitest.Run(t, nil, append(args, "-mem-budget", "0.2x")...)
	if r.Code != cli.ExitUsage || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "the smallest that fits is") {
		t.Errorf("0.2x: exit %d, stderr %q; want %d and one line naming the smallest budget", r.Code, r.Stderr, cli.ExitUsage)
	}
}

// TestMemBudgetAccum is -mem-budget with -accum: the plan counts the
// gradients held from each iteration's first batch on (memplan's
// Config.Accumulate), so the run stays within the budget with its peak as
// planned, where a plan for one batch was exceeded at the second and the
// guard stopped the run; its losses are those of the run without a budget.
func TestMemBudgetAccum(t *testing.T) {
	args := append(append([]string{}, tiny...), "-layers", "3", "-embd", "32", "-block", "64", "-batch", "8", "-accum", "2", "-iters", "4")
	r := clitest.Run(t, nil, append(args, "-mem-budget", "0.7x", "-json")...)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	s := summaryOf(t, r.Stdout)
	clitest.HeldPlan(t, s.Planned, s.PeakBytes.Total)
	if s.PeakBytes.Recompute == 0 {
		t.Errorf("nothing recomputed at 70%%: %+v", s.PeakBytes)
	}
	plain := runOK(t, args...)
	if plain.TrainLoss != s.TrainLoss || plain.ValLoss != s.ValLoss {
		t.Errorf("losses %v, %v with the plan; %v, %v without", s.TrainLoss, s.ValLoss, plain.TrainLoss, plain.ValLoss)
	}
}
