package scripttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ciRepo is a scratch git repository holding a copy of .ci/run and a
// commit on main with one file under each of the paths .ci/run looks at.
type ciRepo struct {
	t         *testing.T
	dir, bin  string
	makeCalls string
}

// newCIRepo makes the repository and a fake make on PATH that records its
// targets and succeeds.
func newCIRepo(t *testing.T) *ciRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git: .ci/run compares commits with git")
	}
	r := &ciRepo{t: t, dir: t.TempDir(), bin: t.TempDir()}
	r.makeCalls = filepath.Join(r.bin, "calls")
	fake := "#!/bin/sh\necho \"$*\" >>" + r.makeCalls + "\n"
	if err := os.WriteFile(filepath.Join(r.bin, "make"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	r.write(".ci/run", string(script))
	for _, f := range []string{"README.md", "cudaops/kernels/k.cu", "autograd/graph.go", "tools/cuda/bundle.sh", "tools/layercheck/main.go"} {
		r.write(f, "first\n")
	}
	r.git("init", "-q", "-b", "main")
	r.commit("first")
	return r
}

func (r *ciRepo) write(name, content string) {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *ciRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=ci test", "-c", "user.email=ci@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *ciRepo) commit(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

// run runs .ci/run and returns the make targets it ran, in order, and its
// output.
// change writes content to the file name and commits it with msg.
func (r *ciRepo) change(name, content, msg string) {
	r.write(name, content)
	r.commit(msg)
}

func (r *ciRepo) run(env ...string) ([]string, string) {
	r.t.Helper()
	os.Remove(r.makeCalls)
	cmd := exec.Command("sh", ".ci/run")
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "PATH="+r.bin+":"+os.Getenv("PATH"), "MIXPREC_CI_ALL=", "MIXPREC_CI_BASE=", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf(".ci/run: %v\n%s", err, out)
	}
	calls, _ := os.ReadFile(r.makeCalls)
	return strings.Fields(string(calls)), string(out)
}

// ciTargets are the make targets .ci/run may run, in its order.
const (
	lint     = "lint"
	test     = "test"
	kernels  = "check-kernels"
	training = "test-long-training"
	kit      = "test-cuda-kit"
)

// ciCase is a history of changes to a repository and the targets .ci/run
// runs for it.
type ciCase struct {
	name  string
	setup func(r *ciRepo) []string // returns extra environment
	want  []string
}

// ciCases are the histories TestCIRunsWhatChanged tries.
func ciCases(t *testing.T) []ciCase {
	all := []string{lint, kernels, test, training, kit}
	return []ciCase{
		{"only the first commit", func(r *ciRepo) []string { return nil }, all},
		{"a Markdown change on main", func(r *ciRepo) []string {
			r.change("README.md", "second\n", "docs")
			return nil
		}, []string{lint, test}},
		{"a kernel change on main", func(r *ciRepo) []string {
			r.change("cudaops/kernels/k.cu", "second\n", "kernel")
			return nil
		}, []string{lint, kernels, test}},
		{"a library change on main", func(r *ciRepo) []string {
			r.change("autograd/graph.go", "second\n", "autograd")
			return nil
		}, []string{lint, test, training}},
		{"a tool outside every list", func(r *ciRepo) []string {
			r.change("tools/layercheck/main.go", "second\n", "layercheck")
			return nil
		}, []string{lint, test}},
		{"a branch: every commit since main counts", func(r *ciRepo) []string {
			r.git("checkout", "-q", "-b", "work")
			r.change("tools/cuda/bundle.sh", "second\n", "bundle")
			r.change("README.md", "second\n", "docs")
			return nil
		}, []string{lint, test, kit}},
		{"a merge commit on main: the whole merged branch counts", func(r *ciRepo) []string {
			r.git("checkout", "-q", "-b", "work")
			r.change("cudaops/kernels/k.cu", "second\n", "kernel")
			r.change("README.md", "second\n", "docs")
			r.git("checkout", "-q", "main")
			r.git("merge", "-q", "--no-ff", "-m", "merge work", "work")
			return nil
		}, []string{lint, kernels, test}},
		{"a detached HEAD at main's tip", func(r *ciRepo) []string {
			r.change("autograd/graph.go", "second\n", "autograd")
			r.git("checkout", "-q", "--detach", "main")
			return nil
		}, []string{lint, test, training}},
		{"an uncommitted change and a new file", func(r *ciRepo) []string {
			r.change("README.md", "second\n", "docs")
			r.write("examples/mnist/new.go", "new\n")
			r.write("tools/cuda/bundle.sh", "third\n")
			return nil
		}, []string{lint, test, training, kit}},
		{"MIXPREC_CI_BASE", func(r *ciRepo) []string {
			first := r.git("rev-parse", "HEAD")
			r.change("autograd/graph.go", "second\n", "autograd")
			r.change("README.md", "second\n", "docs")
			return []string{"MIXPREC_CI_BASE=" + first}
		}, []string{lint, test, training}},
		{"MIXPREC_CI_ALL=1", func(r *ciRepo) []string {
			r.change("README.md", "second\n", "docs")
			return []string{"MIXPREC_CI_ALL=1"}
		}, all},
		{"a change to .ci/run", func(r *ciRepo) []string {
			script, err := os.ReadFile(filepath.Join(r.dir, ".ci/run"))
			if err != nil {
				t.Fatal(err)
			}
			r.write(".ci/run", string(script)+"# changed\n")
			r.commit("ci")
			return nil
		}, all},
	}
}

// TestCIRunsWhatChanged checks .ci/run's rule: make lint and make test
// always run; check-kernels, test-long-training and test-cuda-kit run only
// when a file they cover differs from the base (the previous commit on
// main, a branch's merge base with main, or $MIXPREC_CI_BASE), and all of
// them with MIXPREC_CI_ALL=1, without a base, or when .ci/run changed.
func TestCIRunsWhatChanged(t *testing.T) {
	all := []string{lint, kernels, test, training, kit}
	for _, c := range ciCases(t) {
		t.Run(c.name, func(t *testing.T) {
			r := newCIRepo(t)
			env := c.setup(r)
			got, out := r.run(env...)
			if !slices.Equal(got, c.want) {
				t.Errorf("make targets %v, want %v\n%s", got, c.want, out)
			}
			checkSkipped(t, all, got, out)
		})
	}
}

// checkSkipped checks that .ci/run's output out names the targets of all
// it did not run (it ran got), and names none when it ran them all.
func checkSkipped(t *testing.T, all, got []string, out string) {
	t.Helper()
	var skipped []string
	for _, target := range all {
		if !slices.Contains(got, target) {
			skipped = append(skipped, target)
		}
	}
	if len(skipped) > 0 && !strings.Contains(out, "not run, as nothing they cover changed (MIXPREC_CI_ALL=1 runs them): "+strings.Join(skipped, " ")+"\n") {
		t.Errorf("output does not name the skipped targets %v:\n%s", skipped, out)
	}
	if len(skipped) == 0 && strings.Contains(out, "not run") {
		t.Errorf("output names skipped targets, but all ran:\n%s", out)
	}
}
