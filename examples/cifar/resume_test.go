package main

import (
	"testing"

	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestResumeAfterKill kills a run on synthetic data with SIGKILL after a
// checkpoint, resumes it, and requires the uninterrupted run's loss and
// weights bit for bit (ResNet-20: batch norm, SGD with Nesterov momentum,
// the cosine schedule, random crops and flips), in F16 with the scaler and
// in BF16.
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps six times; skipped with -short")
	}
	for _, a := range []string{"f16", "bf16"} {
		t.Run(a, func(t *testing.T) {
			args := []string{"-synthetic", "-batch", "16", "-max-steps", "6", "-amp", a, "-seed", "4", "-json"}
			full, resumed := clitest.KillAndResume(t, args, 3)
			clitest.SameRun(t, clitest.Summary(t, resumed.Stdout), clitest.Summary(t, full.Stdout))
		})
	}
}
