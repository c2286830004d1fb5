package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/profile"
)

// TestRecorder checks the recorder's files: nothing under the real name
// until Finish, which renames the metrics into place (replacing an older
// file) and writes the trace; Close without Finish leaves the older file
// and nothing temporary; all flags off, it records nothing and costs a
// nil profiler.
func TestRecorder(t *testing.T) {
	dev := cpu.New()
	scaler := amp.NewGradScaler(amp.For(dtype.F16))
	dir := t.TempDir()
	metrics, trace, tb := filepath.Join(dir, "m.jsonl"), filepath.Join(dir, "t.json"), filepath.Join(dir, "runs", "f16")
	for _, finish := range []bool{false, true} {
		if err := os.WriteFile(metrics, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(filepath.Join(dir, "runs"))
		r, err := NewRecorder(cli.ProfileFlags{Profile: true, Metrics: metrics, Trace: trace, TensorBoard: tb}, dev, profile.RunInfo{Label: "f16"})
		if err != nil {
			t.Fatal(err)
		}
		r.Prof.StepStart()
		r.Prof.StepEnd()
		r.Step(1, 1, 0.5, 0.05, scaler, 32)
		r.Eval(1, 1, 0.9)
		if b, _ := os.ReadFile(metrics); string(b) != "old\n" {
			t.Errorf("before Finish the file holds %q", b)
		}
		var stderr strings.Builder
		if finish {
			if err := r.Finish(&stderr); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
		b, _ := os.ReadFile(metrics)
		lines := strings.Count(string(b), "\n")
		switch {
		case finish && (lines != 3 || !strings.Contains(string(b), `"lr":0.05,`)):
			t.Errorf("after Finish: %q; want 3 lines with lr 0.05", b)
		case !finish && string(b) != "old\n":
			t.Errorf("after Close without Finish: %q; want the old file", b)
		}
		if _, err := os.Stat(trace); (err == nil) != finish {
			t.Errorf("finish %v: trace exists: %v", finish, err == nil)
		}
		if finish && !strings.Contains(stderr.String(), "profile: 1 steps") {
			t.Errorf("table: %q", stderr.String())
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
			t.Errorf("finish %v: temporary files left: %v", finish, left)
		}
		// The event file is kept either way: TensorBoard shows a run that
		// failed up to where it stopped. Its records are checked where
		// they are written (package profile).
		events, _ := filepath.Glob(filepath.Join(tb, "events.out.tfevents.*"))
		if len(events) != 1 {
			t.Errorf("finish %v: event files %v, want one", finish, events)
		} else if fi, err := os.Stat(events[0]); err != nil || fi.Size() < 100 {
			t.Errorf("finish %v: event file %v: %v", finish, fi, err)
		}
		if finish { // every file a run writes is its owner's alone
			for _, p := range append([]string{metrics, trace}, events...) {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v, %v; want mode -rw-------", filepath.Base(p), fi.Mode(), err)
				}
			}
		}
		if s, ok := r.Summary(cli.Summary{}).(cli.ProfiledSummary); !ok || s.Profile == nil {
			t.Errorf("Summary with -profile is %T without a profile", r.Summary(cli.Summary{}))
		}
	}
	off, err := NewRecorder(cli.ProfileFlags{}, dev, profile.RunInfo{})
	if err != nil || off.Prof != nil || off.Report() != nil {
		t.Fatalf("all off: %v, profiler %v", err, off.Prof)
	}
	off.Step(1, 1, 0.5, 0.05, scaler, 32)
	if err := off.Finish(&strings.Builder{}); err != nil {
		t.Error(err)
	}
	if _, ok := off.Summary(cli.Summary{}).(cli.Summary); !ok {
		t.Errorf("Summary without -profile is %T, want the plain summary", off.Summary(cli.Summary{}))
	}
}

func TestLabel(t *testing.T) {
	for _, c := range []struct {
		amp  cli.AMP
		ckpt cli.Checkpoint
		want string
	}{
		{cli.AMPOff, cli.CheckpointOff, "fp32"},
		{cli.AMPTo(dtype.F16), cli.CheckpointOff, "f16"},
		{cli.AMPTo(dtype.BF16), cli.CheckpointAuto, "bf16+ckpt"},
	} {
		if got := Label(c.amp, c.ckpt); got != c.want {
			t.Errorf("Label(%v, %v) = %q, want %q", c.amp, c.ckpt, got, c.want)
		}
	}
}
