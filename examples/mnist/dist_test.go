package main

import (
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestDistMatchesSingle is the data-parallel acceptance run: 2 ranks with
// batch 64 under mpirun take 200 SGD steps of the MLP through the same
// samples as 1 process with batch 128, and end within float tolerance of it
// (test accuracy within 0.2 points, final loss within 0.1%).
func TestDistMatchesSingle(t *testing.T) {
	if testing.Short() {
		t.Skip("two training runs of 200 steps; skipped with -short")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (Debian's openmpi-bin; make test installs it): data parallelism not tested")
	}
	d := dataDir(t)
	args := []string{"-data", d, "-max-steps", "200", "-seed", "7", "-json"}
	r := clitest.Run(t, nil, append(args, "-batch", "128")...)
	if r.Code != 0 {
		t.Fatalf("one process: exit %d\n%s", r.Code, r.Stderr)
	}
	one := clitest.Summary(t, r.Stdout)
	mpiArgs := []string{"--oversubscribe", "-np", "2", "-x", "MIXPREC_CLITEST_MAIN=1"}
	if os.Geteuid() == 0 {
		mpiArgs = append(mpiArgs, "--allow-run-as-root")
	}
	cmd := exec.Command(mpirun, append(append(mpiArgs, os.Args[0]), append(args, "-batch", "64", "-dist", "mpi")...)...)
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("2 ranks under mpirun: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), `"world_size":2`); n != 1 {
		t.Fatalf("%d JSON summaries with world_size 2, want exactly one (rank 0's):\n%s", n, out.String())
	}
	two := clitest.Summary(t, out.String())
	t.Logf("1 x 128: loss %v, accuracy %v; 2 x 64: loss %v, accuracy %v", one.TrainLoss, one.TestAccuracy, two.TrainLoss, two.TestAccuracy)
	if math.Abs(float64(two.TestAccuracy-one.TestAccuracy)) > 0.002 {
		t.Errorf("test accuracy %v with 2 ranks, %v with one: more than 0.2 points apart", two.TestAccuracy, one.TestAccuracy)
	}
	if math.Abs(float64(two.TrainLoss-one.TrainLoss)) > 0.001*math.Abs(float64(one.TrainLoss)) {
		t.Errorf("final loss %v with 2 ranks, %v with one: more than 0.1%% apart", two.TrainLoss, one.TrainLoss)
	}
	if two.Steps != 200 || two.Batch != 64 {
		t.Errorf("2 ranks took %d steps of batch %d, want 200 of 64", two.Steps, two.Batch)
	}
}
