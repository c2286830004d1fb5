package clitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
)

// RunFunc is a program's run: its arguments, and where it writes.
type RunFunc func(args []string, stdout, stderr io.Writer) error

// RunJSON calls run with args and -json in this process, fails t unless
// it succeeds, and returns its summary.
func RunJSON(t *testing.T, run RunFunc, args ...string) cli.Summary {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(append(args, "-json"), &out, &errb); err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, errb.String())
	}
	return Summary(t, out.String())
}

// RunOK runs the program's main with args in a child process, as Run
// does, and fails t unless it exits 0.
func RunOK(t *testing.T, args ...string) Result {
	t.Helper()
	r := Run(t, nil, args...)
	if r.Code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, r.Code, r.Stderr)
	}
	return r
}

// KillAndResume runs the program with args to its end, saving into one
// directory, and again saving every step into another, killed with
// SIGKILL once it has saved step kill and then resumed there with -resume.
// It fails t unless each run succeeds (and the killed one did not finish
// first) and both leave the same final weights bit for bit, and returns the
// uninterrupted and the resumed runs.
func KillAndResume(t *testing.T, args []string, kill int) (full, resumed Result) {
	t.Helper()
	fullDir := t.TempDir()
	full = RunOK(t, append(args, "-save", fullDir)...)
	dir := t.TempDir()
	if code, stderr := SignalAt(t, dir, kill, syscall.SIGKILL, append(args, "-save", dir, "-save-every", "1")...); code == 0 {
		t.Fatalf("the run finished before it was killed:\n%s", stderr)
	}
	resumed = RunOK(t, append(args, "-resume", dir)...)
	SameWeights(t, filepath.Join(fullDir, "model.safetensors"), filepath.Join(dir, "model.safetensors"))
	return full, resumed
}

// SameRun fails t unless the summaries got and want report the same run:
// the training loss bit for bit, the accuracy, the steps, the skipped
// steps and the final loss scale.
func SameRun(t *testing.T, got, want cli.Summary) {
	t.Helper()
	if math.Float64bits(float64(got.TrainLoss)) != math.Float64bits(float64(want.TrainLoss)) || got.TestAccuracy != want.TestAccuracy ||
		got.Steps != want.Steps || got.SkippedSteps != want.SkippedSteps || got.FinalScale != want.FinalScale {
		t.Errorf("loss %v, accuracy %v, %d steps, %d skipped, scale %v; want %v, %v, %d, %d, %v",
			got.TrainLoss, got.TestAccuracy, got.Steps, got.SkippedSteps, got.FinalScale,
			want.TrainLoss, want.TestAccuracy, want.Steps, want.SkippedSteps, want.FinalScale)
	}
}

// TraceEvent is an event of a -trace file (Chrome's trace format).
type TraceEvent struct {
	Name, Ph, Cat string
	Tid           int
	Args          map[string]any
}

// Op is the op and phase an op's event names ("linear forward"), or ""
// for another event.
func (e TraceEvent) Op() string {
	op, _ := e.Args["op"].(string)
	phase, _ := e.Args["phase"].(string)
	if e.Ph != "X" || e.Cat == "loader" || e.Cat == "step" || op == "" {
		return ""
	}
	return op + " " + phase
}

// Trace reads the -trace file at path and fails t unless it is a trace.
func Trace(t *testing.T, path string) []TraceEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		TraceEvents []TraceEvent `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tf); err != nil {
		t.Fatalf("trace %s: %v", path, err)
	}
	return tf.TraceEvents
}

// Metrics reads the -metrics file at path, one JSON object a line, and
// fails t unless every line is one.
func Metrics(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("-metrics line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// Kinds counts the metrics lines of each kind ("run", "step", "eval").
func Kinds(lines []map[string]any) map[string]int {
	n := map[string]int{}
	for _, l := range lines {
		k, _ := l["kind"].(string)
		n[k]++
	}
	return n
}

// HeldPlan checks a run's summary under -mem-budget: the budget, the
// planned peak and the predicted overhead are reported, no step went over,
// and the measured peak is within the budget and within 5% of the planned
// one, which is within the budget too.
func HeldPlan(t *testing.T, p cli.Planned, peak int64) {
	t.Helper()
	if p.MemBudgetBytes == nil || p.PlannedPeakBytes == nil || p.PlannedOverhead == nil || p.OverBudget {
		t.Fatalf("summary's plan %+v", p)
	}
	budget, planned := *p.MemBudgetBytes, *p.PlannedPeakBytes
	if peak > budget || planned > budget || math.Abs(float64(planned-peak))/float64(peak) > 0.05 {
		t.Errorf("peak %d, planned %d, budget %d; want both within the budget and the plan within 5%%", peak, planned, budget)
	}
}

// PeaksAddUp checks a summary's memory figures: at_peak_bytes's
// categories add up to its total, which is peak_bytes's, and none is
// above that category's own peak.
func PeaksAddUp(t *testing.T, peak, at cli.PeakBytes) {
	t.Helper()
	parts := [...][2]int64{{at.Param, peak.Param}, {at.Grad, peak.Grad}, {at.Optim, peak.Optim}, {at.Activation, peak.Activation},
		{at.Cast, peak.Cast}, {at.Recompute, peak.Recompute}, {at.Temp, peak.Temp}, {at.Workspace, peak.Workspace}}
	var sum int64
	for _, p := range parts {
		sum += p[0]
		if p[0] > p[1] {
			t.Errorf("at_peak_bytes %+v has a category above its own peak in peak_bytes %+v", at, peak)
		}
	}
	if at.Total != peak.Total || sum != at.Total || at.Total == 0 {
		t.Errorf("at_peak_bytes %+v: its categories add up to %d; want its total, peak_bytes's %d", at, sum, peak.Total)
	}
}
