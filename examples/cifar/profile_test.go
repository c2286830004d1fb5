package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestProfileFlags trains ResNet-20 for a few steps on synthetic data with
// -profile, -trace and -metrics: the table on standard error, a trace with
// the convolutions, batch normalisation and the loader's two workers, and
// one metrics line per step.
func TestProfileFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	dir := t.TempDir()
	trace, metrics := filepath.Join(dir, "t.json"), filepath.Join(dir, "m.jsonl")
	var out, errb bytes.Buffer
	if err := run([]string{"-synthetic", "-max-steps", "3", "-batch", "8", "-amp", "bf16",
		"-profile", "-trace", trace, "-metrics", metrics}, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	for _, want := range []string{"profile: 3 steps on cpu", "conv ", "batch_norm ", "optimizer ", "Compute time (cpu): "} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	seen := map[string]bool{}
	tracks := map[string]bool{}
	for _, e := range clitest.Trace(t, trace) {
		if e.Ph == "M" && e.Name == "thread_name" {
			tracks[e.Args["name"].(string)] = true
		} else if op := e.Op(); op != "" {
			seen[op] = true
		}
	}
	for _, want := range []string{"conv forward", "conv backward", "batch_norm forward", "batch_norm backward",
		"linear forward", "cast forward", "data wait", "optimizer step"} {
		if !seen[want] {
			t.Errorf("no %s event in the trace", want)
		}
	}
	if !tracks["training loop"] || !tracks["loader worker 0"] && !tracks["loader worker 1"] {
		t.Errorf("tracks %v; want the training loop and the loader's workers", tracks)
	}
	if steps := clitest.Kinds(clitest.Metrics(t, metrics))["step"]; steps != 3 {
		t.Errorf("%d step lines, want 3", steps)
	}
}

// TestProfileFlagErrors: bad -trace and -metrics values are refused before
// any work, in one line naming the flag.
func TestProfileFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-trace", filepath.Join(dir, "nodir", "t.json")}, {"-metrics", dir}, {"-metrics", "x.jsonl", "-trace", "x.jsonl"},
	} {
		r := clitest.Run(t, nil, append([]string{"-synthetic"}, args...)...)
		if r.Code != cli.ExitUsage || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, args[0]) {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line naming %s", args, r.Code, r.Stderr, cli.ExitUsage, args[0])
		}
	}
}
