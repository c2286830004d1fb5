package main

import (
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
	clitest.HeldPlan(t, s.Planned, s.PeakBytes.Total)
	if s.PeakBytes.Recompute == 0 {
		t.Errorf("nothing recomputed at 60%%: %+v", s.PeakBytes)
	}
}
