// Package clitest runs a program's main function in a child process from
// its tests, so that they see what a user sees: the exit status and the
// exact standard output and error, a panic's stack trace included.
package clitest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// envVar tells the re-executed test binary to run main instead of tests.
const envVar = "MIXPREC_CLITEST_MAIN"

// Main is a program's TestMain: in a child started by Run it runs main and
// exits 0 when main returns; otherwise it runs the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv(envVar) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Result is what one run of the program left.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs the program's main with args in a child process (the test
// binary itself, through Main) with env added to the environment.
func Run(t *testing.T, env []string, args ...string) Result {
	t.Helper()
	cmd := command(t, env, args)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running %v: %v", args, err)
	}
	return r
}

// OneLine reports a problem with s as a program's error output: it must be
// exactly one line, with no sign of a panic or a stack trace. It returns ""
// when s is fine.
func OneLine(s string) string {
	switch {
	case strings.Contains(s, "panic") || strings.Contains(s, "goroutine "):
		return "a panic or stack trace"
	case strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n"):
		return "not exactly one line"
	}
	return ""
}

// command is the child process that runs the program's main with args:
// the test binary itself, with env added to the environment, in a
// temporary working directory of its own, so that whatever a run writes
// beside itself (a checkpoint saved without -save, a default output file)
// goes with the test instead of into the package's folder.
func command(t *testing.T, env, args []string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(append(os.Environ(), envVar+"=1"), env...)
	cmd.Dir = t.TempDir()
	return cmd
}

// Mpirun runs the program's main with args on ranks processes under
// mpirun (Open MPI's, oversubscribed, as root where need be) and returns
// what the job printed, standard output and error together, and mpirun's
// exit status. It skips the test where mpirun is not installed.
func Mpirun(t *testing.T, ranks int, args ...string) (string, int) {
	t.Helper()
	return MpirunEach(t, alike(ranks, args)...)
}

// alike is ranks copies of the argument list args.
func alike(ranks int, args []string) [][]string {
	each := make([][]string, ranks)
	for i := range each {
		each[i] = args
	}
	return each
}

// MpirunEach is Mpirun with one rank per argument list (mpirun's MPMD
// form: each rank its own command line).
func MpirunEach(t *testing.T, ranks ...[]string) (string, int) {
	t.Helper()
	cmd := mpirunCommand(t, ranks...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("mpirun: %v", err)
	}
	return out.String(), 0
}

// mpirunCommand is the mpirun job that runs the program's main, one rank
// per argument list, in a temporary working directory; it skips the test
// where mpirun is not installed.
func mpirunCommand(t *testing.T, ranks ...[]string) *exec.Cmd {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (Debian's openmpi-bin; make test installs it): data parallelism not tested")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--oversubscribe"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	for i, r := range ranks {
		if i > 0 {
			args = append(args, ":")
		}
		args = append(append(args, "-np", "1", "-x", envVar+"=1", exe), r...)
	}
	cmd := exec.Command(mpirun, args...)
	cmd.Dir = t.TempDir()
	return cmd
}
