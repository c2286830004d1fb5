package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/memplan"
)

// TestMemBudgetFlag parses -mem-budget's forms, refuses bad ones with a
// message naming the forms, and refuses it beside -checkpoint and -dist.
func TestMemBudgetFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // String after parsing; "" for an error
	}{
		{"512MiB", "512.0 MiB"}, {"0.8", "0.8"}, {"0.6x", "0.6x"}, {"1000", "1000 B"},
		{"", ""}, {"0", ""}, {"2x", ""}, {"1.5", ""}, {"lots", ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var b MemBudget
		MemBudgetVar(fs, &b)
		err := fs.Parse([]string{"-mem-budget", c.in})
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), "-mem-budget")):
			t.Errorf("-mem-budget %q: %v; want an error naming the flag", c.in, err)
		case c.want != "" && (err != nil || b.String() != c.want || !b.On()):
			t.Errorf("-mem-budget %q: %v, %q (on %v); want %q", c.in, err, b.String(), b.On(), c.want)
		}
	}
	var none MemBudget
	if none.On() || none.String() != "" || none.Check(CheckpointAuto) != nil {
		t.Errorf("no budget: on %v, %q, check %v", none.On(), none.String(), none.Check(CheckpointAuto))
	}
	var b MemBudget
	if err := b.Set("1GiB"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ckpt Checkpoint
		bad  string
	}{{CheckpointOff, ""}, {CheckpointAuto, "-checkpoint auto"}, {CheckpointSegments(3), "-checkpoint 3"}} {
		err := b.Check(c.ckpt)
		var u *UsageError
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%v: %v", c.ckpt, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !errors.As(err, &u)):
			t.Errorf("%v: %v; want a usage error naming %s", c.ckpt, err, c.bad)
		}
	}
}

// TestPlanned writes the plan's fields into the summary: null without a
// plan, the budget, peak and overhead with one, and the step that went
// over.
func TestPlanned(t *testing.T) {
	enc := func(p Planned) string {
		b, err := json.Marshal(Summary{Planned: p})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if s := enc(PlannedOf(nil, nil)); !strings.Contains(s, `"mem_budget_bytes":null,"planned_peak_bytes":null,"planned_overhead":null`) || strings.Contains(s, "over_budget") {
		t.Errorf("no plan: %s", s)
	}
	pl := &memplan.Plan{Budget: 1000, Peak: 900, Overhead: 0.25}
	if s := enc(PlannedOf(pl, nil)); !strings.Contains(s, `"mem_budget_bytes":1000,"planned_peak_bytes":900,"planned_overhead":0.25`) || strings.Contains(s, "over_budget") {
		t.Errorf("a plan: %s", s)
	}
	if s := enc(PlannedOf(pl, &OverBudget{Step: 7})); !strings.Contains(s, `"over_budget":true,"over_budget_step":7`) || strings.Contains(s, "over_budget_eval") {
		t.Errorf("a step over: %s", s)
	}
	if s := enc(PlannedOf(pl, nil)); !strings.Contains(s, `"planned_eval_batch":null,"planned_eval_peak_bytes":null`) {
		t.Errorf("a plan without an evaluation: %s", s)
	}
	pl.Eval = memplan.EvalFit{Batch: 250, Want: 1000, Peak: 800}
	if s := enc(PlannedOf(pl, &OverBudget{Step: 7, Eval: true})); !strings.Contains(s, `"planned_eval_batch":250,"planned_eval_peak_bytes":800`) ||
		!strings.Contains(s, `"over_budget":true,"over_budget_step":7,"over_budget_eval":true`) {
		t.Errorf("an evaluation fitted, and over: %s", s)
	}
}
