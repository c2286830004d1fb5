package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestMemBudget is -mem-budget on the CNN at 95% of its unconstrained peak
// (its smallest budget is about 93% with the direct convolution): the plan is printed on standard
// error before training, every step stays within the budget, and the JSON
// summary carries the budget, the planned peak (within 5% of the measured
// one) and the predicted overhead; without -mem-budget they are null.
func TestMemBudget(t *testing.T) {
	data := tinyMNIST(t, 256, 64)
	r := clitest.RunOK(t, "-data", data, "-model", "cnn", "-amp", "bf16", "-batch", "64", "-max-steps", "3", "-mem-budget", "0.95x", "-json")
	s := clitest.Summary(t, r.Stdout)
	clitest.HeldPlan(t, s.Planned, s.PeakBytes.Total)
	if !strings.Contains(r.Stderr, "memory plan for a budget of") || !strings.Contains(r.Stderr, "predicted peak") {
		t.Errorf("no plan on standard error: %q", r.Stderr)
	}
	if s.OverBudget {
		t.Errorf("summary says a step went over the budget")
	}
	plain := clitest.RunJSON(t, run, "-data", data, "-model", "mlp", "-max-steps", "1")
	if plain.MemBudgetBytes != nil || plain.PlannedPeakBytes != nil || plain.PlannedOverhead != nil {
		t.Errorf("without -mem-budget the plan's fields are %+v; want null", plain.Planned)
	}
}

// TestMemBudgetSmallest: at the smallest budget the program reports, the
// CNN trains within it and so does its evaluation, whose batch of 1000 is
// too large for it: the plan says the batch it fits, the summary carries
// it, and the guard, which checks every evaluation, lets the run finish.
func TestMemBudgetSmallest(t *testing.T) {
	data := tinyMNIST(t, 256, 1000)
	args := []string{"-data", data, "-model", "cnn", "-batch", "32", "-max-steps", "2", "-json"}
	r := clitest.Run(t, nil, append(args, "-mem-budget", "1KiB")...)
	_, smallest, ok := strings.Cut(r.Stderr, "the smallest that fits is ")
	smallest, _, _ = strings.Cut(smallest, ":")
	if r.Code != cli.ExitUsage || !ok {
		t.Fatalf("-mem-budget 1KiB: exit %d, stderr %q; want %d naming the smallest budget", r.Code, r.Stderr, cli.ExitUsage)
	}
	r = clitest.RunOK(t, append(args, "-mem-budget", strings.ReplaceAll(smallest, " ", ""))...)
	s := clitest.Summary(t, r.Stdout)
	clitest.HeldPlan(t, s.Planned, s.PeakBytes.Total)
	if s.PlannedEvalBatch == nil || *s.PlannedEvalBatch >= 1000 || *s.PlannedEvalPeakBytes > *s.MemBudgetBytes {
		t.Fatalf("at the smallest budget, %s: planned evaluation %+v", smallest, s.Planned)
	}
	if want := fmt.Sprintf("evaluation in batches of %d instead of 1000 to fit", *s.PlannedEvalBatch); !strings.Contains(r.Stderr, want) {
		t.Errorf("stderr %q does not say %q", r.Stderr, want)
	}
	if math.IsNaN(float64(s.TestAccuracy)) {
		t.Errorf("no test accuracy: %+v", s)
	}
}

// TestMemBudgetRefused: a budget no plan fits, and -mem-budget beside
// -checkpoint or -eval, stop before training with status 2 and one line; the first
// names the smallest budget that fits and what it is made of. Nothing
// trains: the summary is not printed.
func TestMemBudgetRefused(t *testing.T) {
	data := tinyMNIST(t, 256, 64)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-mem-budget", "0.3x"}, []string{"-mem-budget 0.3x", "too small", "the smallest that fits is", "parameters", "gradients", "optimiser state", "minimum activations", "workspace"}},
		{[]string{"-mem-budget", "1KiB"}, []string{"-mem-budget 1.0 KiB", "the smallest that fits is"}},
		{[]string{"-mem-budget", "0.95x", "-checkpoint", "auto"}, []string{"-mem-budget", "-checkpoint auto"}},
		{[]string{"-mem-budget", "0.95x", "-eval", "weights.safetensors"}, []string{"-eval trains nothing", "-mem-budget"}},
	} {
		r := clitest.Run(t, nil, append([]string{"-data", data, "-model", "cnn", "-batch", "32", "-max-steps", "2", "-json"}, c.args...)...)
		if r.Code != cli.ExitUsage || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing (stderr %q)", c.args, r.Code, r.Stdout, cli.ExitUsage, r.Stderr)
		}
		if bad := clitest.OneLine(r.Stderr); bad != "" {
			t.Errorf("%v: stderr %q: %s", c.args, r.Stderr, bad)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("%v: stderr %q does not say %q", c.args, r.Stderr, w)
			}
		}
	}
}

// TestAccum is -accum on the CNN: 4 parts of each batch of 64 end 6 steps
// at the loss of whole batches (the parts are contiguous, so dropout draws
// the whole batch's masks; only the gradients' sums are associated
// otherwise) in far less memory, and plan -mem-budget for the parts with
// the gradients held across them; more parts than samples is refused.
func TestAccum(t *testing.T) {
	data := tinyMNIST(t, 512, 64)
	args := []string{"-data", data, "-model", "cnn", "-batch", "64", "-max-steps", "6"}
	whole := clitest.RunJSON(t, run, args...)
	parts := clitest.RunJSON(t, run, append(args, "-accum", "4")...)
	t.Logf("train loss %v whole, %v in 4 parts; peak %d and %d bytes", whole.TrainLoss, parts.TrainLoss, whole.PeakBytes.Total, parts.PeakBytes.Total)
	if d := float64(parts.TrainLoss - whole.TrainLoss); d > 1e-5*float64(whole.TrainLoss) || d < -1e-5*float64(whole.TrainLoss) {
		t.Errorf("train loss %v in 4 parts, %v whole: want within 1e-5 of it", parts.TrainLoss, whole.TrainLoss)
	}
	if 2*parts.PeakBytes.Activation > whole.PeakBytes.Activation {
		t.Errorf("activations' peak %d bytes in 4 parts, %d whole: want under half", parts.PeakBytes.Activation, whole.PeakBytes.Activation)
	}
	r := clitest.RunOK(t, append(args, "-accum", "2", "-mem-budget", "0.97x", "-json")...)
	s := clitest.Summary(t, r.Stdout)
	clitest.HeldPlan(t, s.Planned, s.PeakBytes.Total)
	r = clitest.Run(t, nil, append(args, "-accum", "65")...)
	if r.Code != cli.ExitUsage || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "-accum 65 splits -batch 64") {
		t.Errorf("-accum 65: exit %d, stderr %q; want %d and one line", r.Code, r.Stderr, cli.ExitUsage)
	}
}
