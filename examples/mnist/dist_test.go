package main

import (
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
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
	d := dataDir(t)
	args := []string{"-data", d, "-max-steps", "200", "-seed", "7", "-json"}
	r := clitest.Run(t, nil, append(args, "-batch", "128")...)
	if r.Code != 0 {
		t.Fatalf("one process: exit %d\n%s", r.Code, r.Stderr)
	}
	one := clitest.Summary(t, r.Stdout)
	out, code := clitest.Mpirun(t, 2, append(args, "-batch", "64", "-dist", "mpi")...)
	if code != 0 {
		t.Fatalf("2 ranks under mpirun: exit %d\n%s", code, out)
	}
	if n := strings.Count(out, `"world_size":2`); n != 1 {
		t.Fatalf("%d JSON summaries with world_size 2, want exactly one (rank 0's):\n%s", n, out)
	}
	two := clitest.Summary(t, out)
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

// TestDistSettingsMustMatch starts two ranks whose flags differ: the job
// stops before training, with one line from rank 0 naming the flag and
// the ranks' values, where a different -batch or -max-steps used to end in
// MPI's truncation error or a segfault and a different -seed or -lr
// trained silently.
func TestDistSettingsMustMatch(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs; skipped with -short")
	}
	d, other := tinyMNIST(t, 200, 50), tinyMNIST(t, 201, 50) // other: one more training sample
	base := []string{"-data", d, "-dist", "mpi", "-batch", "16", "-max-steps", "5", "-json"}
	for _, c := range []struct {
		name  string
		other []string
		want  string
	}{
		{"batch", []string{"-batch", "32"}, "-batch (16 on rank 0, 32 on rank 1)"},
		{"max-steps", []string{"-max-steps", "9"}, "-max-steps (5 on rank 0, 9 on rank 1)"},
		{"seed", []string{"-seed", "3"}, "-seed (0 on rank 0, 3 on rank 1)"},
		{"lr", []string{"-lr", "0.01"}, "-lr (0.05 on rank 0, 0.01 on rank 1)"},
		{"model", []string{"-model", "cnn"}, "-model (mlp on rank 0, cnn on rank 1)"},
		{"amp", []string{"-amp", "bf16"}, "-amp (off on rank 0, bf16 on rank 1)"},
		{"epochs", []string{"-epochs", "2"}, "-epochs (1 on rank 0, 2 on rank 1)"},
		{"optim", []string{"-optim", "adam"}, "-optim (sgd on rank 0, adam on rank 1)"},
		{"checkpoint", []string{"-checkpoint", "auto"}, "-checkpoint (off on rank 0, auto on rank 1)"},
		{"mem-budget", []string{"-mem-budget", "0.9x"}, "-mem-budget (none on rank 0, 0.9x on rank 1)"},
		{"data", []string{"-data", other}, "data (mnist/train: 200 samples of [1 28 28], labels "},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := clitest.MpirunEach(t, base, append(slices.Clone(base), c.other...))
			want := "mnist: distributed: the ranks must train with the same settings, and differ in "
			if code == 0 || strings.Count(out, want) != 1 || !strings.Contains(out, c.want) {
				t.Errorf("exit %d; want non-zero and one line %q... naming %q:\n%s", code, want, c.want, out)
			}
			for _, bad := range []string{"MPI_ERR", "Segmentation", "goroutine ", "panic", `"steps"`} {
				if strings.Contains(out, bad) {
					t.Errorf("the job printed %q:\n%s", bad, out)
				}
			}
		})
	}
}

// TestDistMPIAlone runs -dist mpi without mpirun: a world of one process
// is refused in one line, where it used to train alone without a word.
func TestDistMPIAlone(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("no Open MPI here: data parallelism not tested")
	}
	r := clitest.Run(t, nil, "-data", tinyMNIST(t, 200, 50), "-dist", "mpi", "-max-steps", "2")
	if r.Code != cli.ExitUsage || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "not started by mpirun") || r.Stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and one line saying it was not started by mpirun", r.Code, r.Stdout, r.Stderr, cli.ExitUsage)
	}
}
