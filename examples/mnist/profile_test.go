package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestProfileFlags trains a few steps with -profile, -trace and -metrics
// and checks each output: the table and the three-line summary on
// standard error, the "profile" object in the JSON summary, a trace that
// parses with an event for every op the MLP runs, and one metrics line per
// step and per evaluation. Nothing temporary is left beside the files.
func TestProfileFlags(t *testing.T) {
	root := tinyMNIST(t, 300, 100)
	out := t.TempDir()
	trace, metrics := filepath.Join(out, "trace.json"), filepath.Join(out, "m.jsonl")
	tb := filepath.Join(out, "runs")
	for _, amp := range []string{"off", "f16"} {
		t.Run(amp, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"-data", root, "-epochs", "2", "-batch", "64", "-amp", amp, "-profile", "-trace", trace, "-metrics", metrics, "-tensorboard", filepath.Join(tb, amp), "-json"}
			if err := run(args, &stdout, &stderr); err != nil {
				t.Fatalf("run: %v\n%s", err, stderr.String())
			}
			ops, dev := profiledOps(t, stdout.String())
			// -device auto: the CPU measures compute time, a GPU the time
			// its events measured on the device.
			timed := "Compute time (" + dev + "): "
			if dev != "cpu" {
				timed = "Device time (" + dev + "): "
			}
			for _, want := range []string{"profile: 10 steps on " + dev, "op ", "linear ", "forward", "backward", "optimizer", "unscale",
				"data ", "host ", timed, "Data loading time: ", "Host overhead: "} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			checkTraceOps(t, trace, ops)
			checkMetricsLines(t, metrics, map[string]string{"off": "fp32", "f16": "f16"}[amp])
			if events, _ := filepath.Glob(filepath.Join(tb, amp, "events.out.tfevents.*")); len(events) != 1 {
				t.Errorf("-tensorboard: event files %v, want one", events)
			}
			left, _ := filepath.Glob(filepath.Join(out, ".*"))
			if len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// profiledOps checks the JSON summary's profile of a run of 10 steps of
// the MLP (the shares of its time add up; 3 Linears a step, one optimizer
// step and one wait for data; device time where the device is not the
// CPU) and returns the calls of each op by op and phase, and the device.
func profiledOps(t *testing.T, stdout string) (map[string]int, string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var s struct {
		cli.Summary
		Profile *struct {
			Summary struct {
				Steps       int     `json:"steps"`
				ComputePct  float64 `json:"compute_pct"`
				DataPct     float64 `json:"data_pct"`
				OverheadPct float64 `json:"overhead_pct"`
				DeviceTime  bool    `json:"device_time"`
			} `json:"summary"`
			Ops []struct {
				Name, Phase string
				Calls       int
				Ms          float64
			} `json:"ops"`
		} `json:"profile"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil || s.Profile == nil {
		t.Fatalf("summary %q: %v; want one with a profile", lines[len(lines)-1], err)
	}
	ps := s.Profile.Summary
	if s.Steps != 10 || ps.Steps != 10 {
		t.Errorf("steps %d, profile %+v; want 10", s.Steps, ps)
	}
	if shares := ps.ComputePct + ps.DataPct + ps.OverheadPct; shares < 99.999 || shares > 100.001 {
		t.Errorf("compute, data and overhead add up to %v%%", shares)
	}
	if ps.DeviceTime != (s.Device != "cpu") {
		t.Errorf("device_time %v on %s", ps.DeviceTime, s.Device)
	}
	ops := map[string]int{}
	for _, o := range s.Profile.Ops {
		ops[o.Name+" "+o.Phase] = o.Calls
	}
	if ops["linear forward"] != 30 || ops["optimizer step"] != 10 || ops["data wait"] != 10 {
		t.Errorf("ops %v; want 3 linear forward per step, one optimizer step and data wait", ops)
	}
	return ops, s.Device
}

// checkTraceOps checks that the trace at path has its 10 steps and an
// event for every op the profile counted.
func checkTraceOps(t *testing.T, path string, ops map[string]int) {
	t.Helper()
	inTrace := map[string]bool{}
	steps := 0
	for _, e := range clitest.Trace(t, path) {
		if e.Ph == "X" && e.Cat == "step" {
			steps++
		} else if op := e.Op(); op != "" {
			inTrace[op] = true
		}
	}
	for k := range ops {
		if k != "host overhead" && !inTrace[k] {
			t.Errorf("%s ran (%d calls) but is not in the trace", k, ops[k])
		}
	}
	if steps != 10 {
		t.Errorf("%d steps in the trace, want 10", steps)
	}
}

// checkMetricsLines checks the -metrics file of two epochs of 5 steps: a
// run line with the run's label, a line a step and one an evaluation.
func checkMetricsLines(t *testing.T, path, label string) {
	t.Helper()
	lines := clitest.Metrics(t, path)
	for _, l := range lines {
		if l["kind"] == "run" && l["label"] != label {
			t.Errorf("run line %v: label, want %s", l, label)
		}
	}
	if kinds := clitest.Kinds(lines); kinds["run"] != 1 || kinds["step"] != 10 || kinds["eval"] != 2 {
		t.Errorf("metrics lines %v; want 1 run, 10 step (one per step), 2 eval", kinds)
	}
}

// TestProfileFlagErrors checks the new flags' bad values (one line naming
// the flag, exit status 2, nothing run) and that a run that fails leaves
// an existing file of the same name as it was.
func TestProfileFlagErrors(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.jsonl")
	if err := os.WriteFile(existing, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-trace", filepath.Join(dir, "nodir", "t.json")},
		{"-trace", dir},
		{"-trace", ""},
		{"-metrics", filepath.Join(dir, "nodir", "m.jsonl")},
		{"-metrics", dir},
		{"-metrics", existing, "-trace", existing},
		{"-profile", "-eval", existing},
		{"-tensorboard", existing},
		{"-tensorboard", filepath.Join(existing, "runs")},
		{"-profile=sometimes"},
	} {
		r := clitest.Run(t, nil, append([]string{"-data", "/nonexistent"}, args...)...)
		if r.Code != cli.ExitUsage || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing on stdout (stderr %q)", args, r.Code, r.Stdout, cli.ExitUsage, r.Stderr)
		}
		if bad := clitest.OneLine(r.Stderr); bad != "" || !strings.HasPrefix(r.Stderr, "mnist: ") {
			t.Errorf("%v: stderr %q: %s; want one line starting mnist:", args, r.Stderr, bad)
		}
		name := strings.SplitN(args[0], "=", 2)[0]
		if !strings.Contains(r.Stderr, name) {
			t.Errorf("%v: stderr %q does not name %s", args, r.Stderr, name)
		}
	}

	// A run that fails part-way, after its outputs were opened (here: the
	// first checkpoint, 2 MB, does not fit in a 64 KiB file system that
	// took the -save probe's few bytes), keeps the existing file and
	// leaves nothing temporary.
	small := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v; the run that fails part-way is not tried", err)
	}
	defer exec.Command("umount", small).Run()
	root := tinyMNIST(t, 300, 100)
	r := clitest.Run(t, nil, "-data", root, "-batch", "64", "-metrics", existing, "-trace", filepath.Join(dir, "t.json"), "-profile",
		"-save", filepath.Join(small, "sub"), "-save-every", "2")
	if r.Code != cli.ExitError || !strings.Contains(r.Stderr, "no space left on device") {
		t.Errorf("unsavable checkpoint: exit %d, want %d for a full file system (%s)", r.Code, cli.ExitError, r.Stderr)
	}
	if b, _ := os.ReadFile(existing); string(b) != "precious\n" {
		t.Errorf("the existing metrics file now holds %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
		t.Errorf("files in the directory: %v; want only the old one", left)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
