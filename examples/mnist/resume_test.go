package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
	"github.com/mixprec/mixprec/runstate"
)

// TestResumeAfterKill kills runs with SIGKILL part-way (after a periodic
// checkpoint, at an arbitrary instant, possibly during the next save),
// resumes them with -resume, and requires the uninterrupted run's
// train_loss, test_accuracy and weights bit for bit: the MLP and the CNN
// (dropout, augmentation, AdamW, one-cycle schedule), in FP32, F16 (with
// the loss scaler) and BF16.
//
// make test runs two of the six cases, the MLP in F16 (the scaler's state)
// and the CNN in BF16 (dropout, augmentation, AdamW, the schedule), which
// take every path through saving, killing and resuming; the other four run
// under MIXPREC_LONG=1 (make test-long).
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 18 short runs; skipped with -short")
	}
	long := os.Getenv("MIXPREC_LONG") != ""
	d := dataDir(t)
	for _, c := range []struct {
		model       string
		steps, kill int
		fast        string // the amp mode make test runs
	}{{"mlp", 40, 17, "f16"}, {"cnn", 8, 3, "bf16"}} {
		for _, a := range []string{"off", "f16", "bf16"} {
			t.Run(c.model+"/"+a, func(t *testing.T) {
				if a != c.fast && !long {
					t.Skipf("runs under MIXPREC_LONG=1 (make test-long); make test runs %s/%s", c.model, c.fast)
				}
				args := []string{"-data", d, "-model", c.model, "-amp", a, "-seed", "5", "-max-steps", fmt.Sprint(c.steps), "-json"}
				full, resumed := clitest.KillAndResume(t, args, c.kill)
				clitest.SameRun(t, clitest.Summary(t, resumed.Stdout), clitest.Summary(t, full.Stdout))
			})
		}
	}
}

// TestInterruptSavesAndEval covers SIGINT (a checkpoint, one line, exit
// 130), -eval of the saved weights, and the refusal to resume with another
// configuration.
func TestInterruptSavesAndEval(t *testing.T) {
	if testing.Short() {
		t.Skip("trains three short runs; skipped with -short")
	}
	d := dataDir(t)
	args := []string{"-data", d, "-seed", "2", "-max-steps", "400", "-json"}
	dir := t.TempDir()
	code, stderr := clitest.SignalAt(t, dir, 5, syscall.SIGINT, append(args, "-save", dir, "-save-every", "5")...)
	if code != cli.ExitInterrupted || !strings.Contains(stderr, "saved "+dir) || !strings.Contains(stderr, "-resume") {
		t.Fatalf("SIGINT: exit %d, stderr %q; want %d and a line naming the checkpoint", code, stderr, cli.ExitInterrupted)
	}
	r := clitest.Run(t, nil, append(args, "-resume", dir, "-amp", "bf16")...)
	if r.Code != cli.ExitError || !strings.Contains(r.Stderr, "amp=off, this run has amp=bf16") || clitest.OneLine(r.Stderr) != "" {
		t.Errorf("resuming with another -amp: exit %d, %q; want one line naming amp", r.Code, r.Stderr)
	}
	r = clitest.Run(t, nil, "-data", d, "-seed", "2", "-max-steps", "60", "-json", "-save", dir, "-overwrite") // another run's directory
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	trained := clitest.Summary(t, r.Stdout)
	r = clitest.Run(t, nil, "-data", d, "-json", "-eval", filepath.Join(dir, "model.safetensors"))
	if r.Code != 0 {
		t.Fatalf("-eval: exit %d: %s", r.Code, r.Stderr)
	}
	if got := clitest.Summary(t, r.Stdout); got.TestAccuracy != trained.TestAccuracy || got.Steps != 0 {
		t.Errorf("-eval: accuracy %v after %d steps, the run that saved the weights %v", got.TestAccuracy, got.Steps, trained.TestAccuracy)
	}
	r = clitest.Run(t, nil, "-data", d, "-model", "cnn", "-eval", filepath.Join(dir, "model.safetensors"))
	if r.Code != cli.ExitError || !strings.Contains(r.Stderr, "0.weight") || clitest.OneLine(r.Stderr) != "" {
		t.Errorf("-eval of MLP weights into the CNN: exit %d, %q; want one line naming the tensor", r.Code, r.Stderr)
	}
}

// TestResumeRefusesBadPosition edits the position in a checkpoint's
// state.json (and makes its checksum right again): -resume refuses each
// with one line naming the position, where a batch index of 10^9 or an
// epoch of -5 used to panic and a step of -100 was taken.
func TestResumeRefusesBadPosition(t *testing.T) {
	d := tinyMNIST(t, 200, 50) // 13 batches of 16 an epoch
	args := []string{"-data", d, "-batch", "16", "-max-steps", "3", "-json"}
	for _, tt := range []struct{ name, old, new string }{
		{"batch 1e9", `"batch": 3,`, `"batch": 1000000000,`},
		{"epoch -5", `"epoch": 0,`, `"epoch": -5,`},
		{"step -100", `"step": 3,`, `"step": -100,`},
		{"epoch 7", `"epoch": 0,`, `"epoch": 7,`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if r := clitest.Run(t, nil, append(args, "-save", dir)...); r.Code != 0 {
				t.Fatalf("exit %d: %s", r.Code, r.Stderr)
			}
			latest, err := runstate.Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			clitest.EditState(t, latest, func(s string) string { return strings.Replace(s, tt.old, tt.new, 1) })
			r := clitest.Run(t, nil, append(args, "-resume", dir)...)
			if r.Code != cli.ExitError || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "position") {
				t.Errorf("exit %d, stderr %q; want %d and one line about the position", r.Code, r.Stderr, cli.ExitError)
			}
		})
	}
}

// TestResumeFallsBack flips a byte of the newest checkpoint's weights:
// -resume passes over it, says which and why, resumes from the one before
// and ends as the uninterrupted run does, bit for bit.
func TestResumeFallsBack(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	args := []string{"-data", d, "-batch", "16", "-max-steps", "6", "-seed", "3", "-json"}
	full := t.TempDir()
	want := clitest.Summary(t, clitest.RunOK(t, append(args, "-save", full)...).Stdout)
	dir := t.TempDir()
	clitest.RunOK(t, append(args, "-save", dir, "-save-every", "1")...)
	p := filepath.Join(runstate.Dir(dir, 6), "model.safetensors")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-5] ^= 1
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := clitest.RunOK(t, append(args, "-resume", dir)...) // past a corrupt checkpoint
	for _, s := range []string{"step-00000006", "model.safetensors has SHA-256", "resuming from the newest intact checkpoint, " + runstate.Dir(dir, 5)} {
		if !strings.Contains(r.Stderr, s) {
			t.Errorf("stderr %q does not say %q", r.Stderr, s)
		}
	}
	clitest.SameRun(t, clitest.Summary(t, r.Stdout), want)
	clitest.SameWeights(t, filepath.Join(full, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
}

// TestResumeCleansKilledSave plants what a save killed half-way leaves (a
// temporary checkpoint directory, a temporary weights file): the next
// start of the run removes them and says so.
func TestResumeCleansKilledSave(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	args := []string{"-data", d, "-batch", "16", "-max-steps", "3", "-json"}
	dir := t.TempDir()
	if r := clitest.Run(t, nil, append(args, "-save", dir)...); r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	left := []string{filepath.Join(dir, ".tmp-step-4242"), filepath.Join(dir, ".model.safetensors.77.tmp")}
	if err := os.Mkdir(left[0], 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(left[0], "model.safetensors"), []byte("half a file"), 0o600)
	os.WriteFile(left[1], []byte("half a file"), 0o600)
	r := clitest.Run(t, nil, append(args, "-resume", dir)...)
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	for _, p := range left {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
		if !strings.Contains(r.Stderr, "removed "+p+", left by a save that did not finish") {
			t.Errorf("stderr %q does not say %s was removed", r.Stderr, p)
		}
	}
}

// TestResumeNamesModel resumes an MLP's checkpoint with -model cnn: the
// refusal names the model, not the learning rate the model's recipe
// changes with it.
func TestResumeNamesModel(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	dir := t.TempDir()
	args := []string{"-data", d, "-batch", "16", "-max-steps", "2"}
	if r := clitest.Run(t, nil, append(args, "-save", dir)...); r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	r := clitest.Run(t, nil, append(args, "-resume", dir, "-model", "cnn")...)
	if r.Code != cli.ExitError || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "made with model=mlp, this run has model=cnn") {
		t.Errorf("exit %d, stderr %q; want one line naming the model", r.Code, r.Stderr)
	}
}

// TestSaveDirOwned: a run owns its -save directory. A second run into it
// while the first lives is refused, naming the first's process; a
// directory holding another run's checkpoints or weights is refused,
// untouched, unless -resume continues that run or -overwrite deletes it;
// and the lock of a run killed with SIGKILL does not stop the next.
func TestSaveDirOwned(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	args := []string{"-data", d, "-batch", "16"}
	t.Run("live", func(t *testing.T) {
		dir := t.TempDir()
		first := clitest.Start(t, nil, append(args, "-epochs", "1000", "-save", dir, "-save-every", "1")...)
		first.WaitCheckpoint(t, dir, 1)
		r := clitest.Run(t, nil, append(args, "-max-steps", "2", "-save", dir)...)
		if r.Code != cli.ExitError || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, fmt.Sprintf("in use by process %d", first.PID())) {
			t.Errorf("a second run into a live run's directory: exit %d, %q; want one line naming process %d", r.Code, r.Stderr, first.PID())
		}
		first.Signal(syscall.SIGKILL)
		first.Wait(t)
		if _, err := os.Stat(filepath.Join(dir, runstate.LockFile)); err != nil {
			t.Errorf("SIGKILL left no lock to take over: %v", err)
		}
		r = clitest.Run(t, nil, append(args, "-max-steps", "2", "-save", dir, "-overwrite")...)
		if r.Code != 0 {
			t.Errorf("a run into the directory of one killed with SIGKILL: exit %d, %q", r.Code, r.Stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, runstate.LockFile)); err == nil {
			t.Error("the lock is still there after the run ended")
		}
	})
	t.Run("another run", func(t *testing.T) {
		dir := t.TempDir()
		if r := clitest.Run(t, nil, append(args, "-max-steps", "3", "-save-every", "1", "-save", dir)...); r.Code != 0 {
			t.Fatalf("exit %d: %s", r.Code, r.Stderr)
		}
		before := tree(t, dir)
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"-max-steps", "3", "-model", "cnn"}, "model=mlp, this run has model=cnn"},
			{[]string{"-max-steps", "3"}, "an earlier run's 2 checkpoints (steps 2 to 3) and model.safetensors with the same settings"},
			{[]string{"-max-steps", "5", "-seed", "4"}, "other differences: seed (0, now 4)"},
		} {
			r := clitest.Run(t, nil, append(append(args, c.args...), "-save", dir)...)
			if r.Code != cli.ExitError || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, c.want) || !strings.Contains(r.Stderr, "-overwrite") {
				t.Errorf("%v into another run's directory: exit %d, %q; want one line saying %q", c.args, r.Code, r.Stderr, c.want)
			}
			if after := tree(t, dir); after != before {
				t.Errorf("%v: the refused run changed the directory:\n%s\nwas\n%s", c.args, after, before)
			}
		}
		r := clitest.Run(t, nil, append(args, "-max-steps", "2", "-model", "cnn", "-save", dir, "-overwrite")...)
		if r.Code != 0 || !strings.Contains(r.Stderr, "deleted the earlier run's 2 checkpoints (steps 2 to 3) and model.safetensors") {
			t.Fatalf("-overwrite: exit %d, %q", r.Code, r.Stderr)
		}
		if c, _ := runstate.Inspect(dir); fmt.Sprint(c.Steps) != "[2]" || c.Newest.Config["model"] != "cnn" {
			t.Errorf("after -overwrite the directory holds %+v; want the new run's step 2 alone", c)
		}
	})
	t.Run("weights", func(t *testing.T) {
		dir := t.TempDir()
		mine := filepath.Join(dir, "model.safetensors")
		os.WriteFile(mine, []byte("the user's weights"), 0o644)
		r := clitest.Run(t, nil, append(args, "-max-steps", "2", "-save", dir)...)
		if b, _ := os.ReadFile(mine); r.Code != cli.ExitError || string(b) != "the user's weights" || !strings.Contains(r.Stderr, "holds another run's model.safetensors") {
			t.Errorf("a directory with weights in it: exit %d, %q, the file now %q", r.Code, r.Stderr, b)
		}
	})
}

// tree lists the files under dir with their sizes and modification times.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			fmt.Fprintf(&b, "%s %d %v\n", p, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return b.String()
}

// TestSaveProbe gives -save directories that cannot be written: each run
// stops before it trains, with one line naming the directory and why,
// where it used to train to the end and lose the work at the save.
func TestSaveProbe(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("not a directory"), 0o644)
	cases := []struct{ name, dir, why string }{
		{"a file", file, "not a directory"},
		{"under a file", filepath.Join(file, "run"), "not a directory"},
		{"in /proc", "/proc/mixprec-run", "cannot make the directory"},
	}
	for _, m := range []struct{ name, opts, why string }{
		{"read-only", "ro,size=64k", "read-only file system"},
		{"full", "size=4k", "no space left on device"},
	} {
		mnt := filepath.Join(tmp, m.name)
		os.Mkdir(mnt, 0o755)
		if err := exec.Command("mount", "-t", "tmpfs", "-o", m.opts, "tmpfs", mnt).Run(); err != nil {
			t.Logf("cannot mount a %s tmpfs (needs root): %v; not tried", m.name, err)
			continue
		}
		t.Cleanup(func() { exec.Command("umount", mnt).Run() })
		if m.name == "full" {
			os.WriteFile(filepath.Join(mnt, "filler"), make([]byte, 4096), 0o644) // fills it; the error is not wanted
		}
		cases = append(cases, struct{ name, dir, why string }{m.name, filepath.Join(mnt, "run"), m.why})
		if m.name == "read-only" {
			cases[len(cases)-1].dir = mnt
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := clitest.Run(t, nil, "-data", d, "-batch", "16", "-max-steps", "5", "-save", c.dir)
			if r.Code != cli.ExitUsage || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "-save "+c.dir+": ") ||
				!strings.Contains(r.Stderr, c.why) || r.Stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d before any training, and one line naming %s and %q",
					r.Code, r.Stdout, r.Stderr, cli.ExitUsage, c.dir, c.why)
			}
		})
	}
}
