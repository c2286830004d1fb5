package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
	"github.com/mixprec/mixprec/runstate"
	"github.com/mixprec/mixprec/safetensors"
)

// TestSignalsStopCleanly stops runs with SIGINT, SIGTERM and SIGHUP: each
// stops at a step boundary, saves a checkpoint that loads, leaves -metrics,
// -trace and TensorBoard files that parse, prints the JSON summary marked
// interrupted, names the checkpoint in one line and exits with 128 plus
// the signal's number. Before, SIGHUP killed the run unsaved, SIGTERM
// exited 130, and no signal left a summary or a -metrics or -trace file.
func TestSignalsStopCleanly(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			dir, metrics, trace, tb := filepath.Join(tmp, "run"), filepath.Join(tmp, "m.jsonl"), filepath.Join(tmp, "t.json"), filepath.Join(tmp, "tb")
			c := clitest.Start(t, nil, "-data", d, "-batch", "16", "-epochs", "1000", "-json", "-save", dir, "-save-every", "1",
				"-metrics", metrics, "-trace", trace, "-tensorboard", tb)
			c.WaitCheckpoint(t, dir, 3)
			c.Signal(sig)
			r := c.Wait(t)
			if want := 128 + int(sig); r.Code != want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", r.Code, want, r.Stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "mnist: ") || !strings.Contains(last, "saved "+dir) || !strings.Contains(last, "-resume") {
				t.Errorf("last line of stderr %q; want one naming the checkpoint", last)
			}
			s := clitest.Summary(t, r.Stdout)
			if !s.Interrupted || s.Steps < 3 || s.Schema != 1 || !math.IsNaN(float64(s.TestAccuracy)) {
				t.Errorf("summary %+v; want schema 1, interrupted, at least 3 steps, no test accuracy", s)
			}
			info, err := runstate.ReadInfo(runstate.Dir(dir, s.Steps))
			if err != nil || info.Position.Step != s.Steps {
				t.Errorf("the checkpoint of step %d: %+v, %v", s.Steps, info.Position, err)
			}
			checkMetrics(t, metrics, s.Steps)
			if b, err := os.ReadFile(trace); err != nil || !json.Valid(b) {
				t.Errorf("-trace %s: %d bytes, %v; want valid JSON", trace, len(b), err)
			}
			checkEvents(t, tb)
		})
	}
}

// TestSecondSignalWaitsForSave sends a second SIGINT while the checkpoint
// the first asked for is being written (held open for 3 s by
// MIXPREC_TEST_HOLD_PAUSE, so that the second signal arrives during the
// save however fast the disk): the program says it is waiting, finishes
// the save and stops as after one signal.
func TestSecondSignalWaitsForSave(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	dir := filepath.Join(t.TempDir(), "run")
	c := clitest.Start(t, []string{"MIXPREC_TEST_HOLD_PAUSE=3s"}, "-data", d, "-batch", "16", "-epochs", "1000", "-json", "-save", dir, "-save-every", "2")
	c.WaitCheckpoint(t, dir, 2)
	c.Signal(syscall.SIGINT)
	c.WaitStderr(t, "saving a checkpoint in "+dir)
	c.Signal(syscall.SIGINT)
	r := c.Wait(t)
	if r.Code != cli.ExitInterrupted || !strings.Contains(r.Stderr, "interrupt again: ") {
		t.Fatalf("exit %d, stderr %q; want %d and a line saying what it waits for", r.Code, r.Stderr, cli.ExitInterrupted)
	}
	s := clitest.Summary(t, r.Stdout)
	latest := runstate.Dir(dir, s.Steps)
	if _, err := runstate.ReadInfo(latest); err != nil || !s.Interrupted {
		t.Fatalf("checkpoint %v, summary %+v", err, s)
	}
	for _, name := range []string{"model.safetensors", "optim.safetensors"} {
		if _, err := safetensors.ReadFile(filepath.Join(latest, name)); err != nil { // checks the file's SHA-256
			t.Errorf("the checkpoint written through the second signal: %v", err)
		}
	}
}

// checkMetrics requires every line of the -metrics file to be JSON and
// the steps it records to be 1 to steps.
func checkMetrics(t *testing.T, path string, steps int) {
	t.Helper()
	last := 0.0
	for _, l := range clitest.Metrics(t, path) {
		if l["kind"] == "step" {
			last, _ = l["step"].(float64)
		}
	}
	if int(last) != steps {
		t.Errorf("-metrics ends at step %v, the run at %d", last, steps)
	}
}

// checkEvents requires dir to hold one TensorBoard event file made of
// whole records: a length, its CRC, the data and its CRC, to the end.
func checkEvents(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("event file ends in %d bytes that are not a record", len(b))
		}
		size := binary.LittleEndian.Uint64(b)
		if uint64(len(b)) < 16+size {
			t.Fatalf("record %d of %d bytes is cut short", n, size)
		}
		b = b[16+size:]
		n++
	}
	if n < 2 {
		t.Errorf("%d records, want the version and the steps'", n)
	}
}
