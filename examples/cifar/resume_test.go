package main

import (
	"math"
	"path/filepath"
	"syscall"
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
			full := t.TempDir()
			r := clitest.Run(t, nil, append(args, "-save", full)...)
			if r.Code != 0 {
				t.Fatalf("uninterrupted run: exit %d\n%s", r.Code, r.Stderr)
			}
			want := clitest.Summary(t, r.Stdout)
			dir := t.TempDir()
			if code, stderr := clitest.SignalAt(t, dir, 3, syscall.SIGKILL, append(args, "-save", dir, "-save-every", "1")...); code == 0 {
				t.Fatalf("the run finished before it was killed:\n%s", stderr)
			}
			r = clitest.Run(t, nil, append(args, "-resume", dir)...)
			if r.Code != 0 {
				t.Fatalf("resumed run: exit %d\n%s", r.Code, r.Stderr)
			}
			got := clitest.Summary(t, r.Stdout)
			if math.Float64bits(float64(got.TrainLoss)) != math.Float64bits(float64(want.TrainLoss)) || got.TestAccuracy != want.TestAccuracy || got.Steps != want.Steps {
				t.Errorf("resumed: loss %v, accuracy %v, %d steps; uninterrupted %v, %v, %d", got.TrainLoss, got.TestAccuracy, got.Steps, want.TrainLoss, want.TestAccuracy, want.Steps)
			}
			clitest.SameWeights(t, filepath.Join(full, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
		})
	}
}
