// Package mpitest runs a test binary's own tests as the ranks of an MPI
// job, for the packages whose collectives can only be tested across
// processes (mpi, distributed, cudaops' NCCL). A parent test calls Run,
// which starts one of the binary's tests under mpirun, one process per
// rank, and returns what they printed; that child test begins with Child
// or Comm, so that when the whole binary runs it skips instead of running
// as a world of one.
package mpitest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/mpi"
)

// childEnv is set in every rank Run starts; Child skips without it.
const childEnv = "MIXPREC_MPI_CHILD"

// Run runs this test binary's test named test (the whole name: it is
// matched as ^test$) as np ranks under mpirun, each with env's NAME=value
// variables set, and returns their output, interleaved as mpirun prints
// it, and mpirun's error (an exit status when a rank failed). Without
// mpirun on PATH it skips t, saying what it would have run.
func Run(t testing.TB, np int, test string, env ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skipf("mpirun not found (Debian's openmpi-bin; make test installs it): %s not run on %d ranks", test, np)
	}
	args := []string{"--oversubscribe", "-np", fmt.Sprint(np)}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	for _, e := range append(env, childEnv+"=1") {
		args = append(args, "-x", e)
	}
	args = append(args, os.Args[0], "-test.run", "^"+test+"$", "-test.v")
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// Pass is Run for a child test that every rank must pass: it fails t,
// with the ranks' output, unless mpirun succeeded and np ranks reported
// the test passed, and returns the output.
func Pass(t testing.TB, np int, test string, env ...string) string {
	t.Helper()
	out, err := Run(t, np, test, env...)
	if n := strings.Count(out, "--- PASS: "+test+" "); err != nil || n != np {
		t.Fatalf("%s on %d ranks under mpirun: %d passed, error %v\n%s", test, np, n, err, out)
	}
	return out
}

// Child skips t unless this process is a rank that Run started.
func Child(t testing.TB) {
	t.Helper()
	if os.Getenv(childEnv) != "1" {
		t.Skip("runs as a rank under mpirun, started by its parent test")
	}
}

// Comm is Child, then MPI opened with the given collective timeout; t
// fails if it does not open, and closes it when it ends.
func Comm(t testing.TB, timeout time.Duration) *mpi.Comm {
	t.Helper()
	Child(t)
	c, err := mpi.Open(mpi.Timeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
