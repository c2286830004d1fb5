package main

import (
	"math"
	"testing"

	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestMemBudget is -mem-budget on ResNet-20: the run stays within 60% of
// its unconstrained peak, as planned (within 5%), and the summary says so.
func TestMemBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	s := clitest.RunJSON(t, run, "-synthetic", "-max-steps", "2", "-batch", "16", "-mem-budget", "0.6x")
	if s.MemBudgetBytes == nil || s.PlannedPeakBytes == nil || s.PlannedOverhead == nil || s.OverBudget {
		t.Fatalf("summary's plan %+v", s.Planned)
	}
	budget, planned, peak := *s.MemBudgetBytes, *s.PlannedPeakBytes, s.PeakBytes.Total
	if peak > budget || planned > budget || math.Abs(float64(planned-peak))/float64(peak) > 0.05 {
		t.Errorf("peak %d, planned %d, budget %d; want both within the budget and the plan within 5%%", peak, planned, budget)
	}
	if s.PeakBytes.Recompute == 0 {
		t.Errorf("nothing recomputed at 60%%: %+v", s.PeakBytes)
	}
}
