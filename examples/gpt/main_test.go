package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/safetensors"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// tiny is a model and run small enough for a test.
var tiny = []string{"-corpus", "opticks", "-layers", "2", "-heads", "2", "-embd", "16", "-block", "16", "-batch", "4",
	"-iters", "12", "-warmup", "4", "-eval-windows", "8", "-eval-every", "0", "-seed", "3"}

func summaryOf(t *testing.T, stdout string) summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var s summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %q: %v", lines[len(lines)-1], err)
	}
	return s
}

func runOK(t *testing.T, args ...string) summary {
	t.Helper()
	return summaryOf(t, clitest.RunOK(t, append(args, "-json")...).Stdout)
}

// TestTrains runs a few iterations in each precision: the summary has
// every figure, the loss falls, F16 skips no step.
func TestTrains(t *testing.T) {
	for _, a := range []string{"off", "bf16", "f16"} {
		s := runOK(t, append(tiny, "-amp", a, "-iters", "30", "-lr", "1e-2")...)
		if s.Schema != 1 || s.Model != "gpt" || s.Iters != 30 || s.Params == 0 || !(s.TokensPerSec > 0) || s.PeakBytes.Total == 0 {
			t.Errorf("%s: summary %+v", a, s)
		}
		clitest.PeaksAddUp(t, s.PeakBytes, s.AtPeakBytes)
		if !(s.ValLoss > 0 && s.ValLoss < 3.4 && s.TrainLoss < 3.4) { // ln(91) = 4.5 at the start; 3.2-3.3 measured
			t.Errorf("%s: train loss %v, val loss %v after 30 iterations; want both below 3.4", a, s.TrainLoss, s.ValLoss)
		}
		if s.SkippedSteps > 2 {
			t.Errorf("%s: %d of 30 steps skipped", a, s.SkippedSteps)
		}
	}
}

// TestBadInput checks that every bad input gets one line naming the
// problem and a non-zero exit, never a stack trace.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte(strings.Repeat("ab", 16)), 0o644)
	binary := filepath.Join(dir, "binary.txt")
	os.WriteFile(binary, []byte("abc\xff\xfe"), 0o644)
	weights := filepath.Join(dir, "w.safetensors")
	runOK(t, append(tiny, "-iters", "2", "-save", filepath.Join(dir, "run"))...)
	saved := filepath.Join(dir, "run", "model.safetensors")
	f, err := safetensors.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors { // a c_fc weight of the wrong shape
		if strings.HasSuffix(f.Tensors[i].Name, "h.0.mlp.c_fc.weight") {
			f.Tensors[i].Shape = []int{32, 32}
		}
	}
	if err := safetensors.WriteFile(weights, f.Tensors, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-corpus", filepath.Join(dir, "missing.txt")}, cli.ExitError, "missing.txt"},
		{[]string{"-corpus", binary}, cli.ExitError, "not UTF-8"},
		{[]string{"-corpus", short, "-block", "16"}, cli.ExitUsage, "needs at least 34"},
		{[]string{"-corpus", "opticks", "-heads", "3", "-embd", "16"}, cli.ExitUsage, "-heads 3 does not divide -embd 16"},
		{[]string{"-corpus", "opticks", "-dropout", "1"}, cli.ExitUsage, "-dropout"},
		{[]string{"-corpus", "opticks", "-eval-only"}, cli.ExitUsage, "-init"},
		{[]string{"-corpus", "opticks", "-init", filepath.Join(dir, "none.safetensors")}, cli.ExitError, "none.safetensors"},
		{[]string{"-corpus", "opticks", "-heads", "2", "-init", weights}, cli.ExitError, "transformer.h.0.mlp.c_fc.weight"},
		{[]string{"-corpus", short, "-heads", "2", "-init", saved}, cli.ExitError, "transformer.wte.weight"},
		{[]string{"-corpus", "opticks", "-heads", "2", "-embd", "32", "-init", saved}, cli.ExitError, "-embd"},
		{[]string{"-lr", "nan"}, cli.ExitUsage, "-lr"},
		{[]string{"-amp", "f8"}, cli.ExitUsage, "-amp"},
		{[]string{"-seed", "-1"}, cli.ExitUsage, "a seed has no sign"}, // package flag's "parse error" before
		{[]string{"-device", "tpu"}, cli.ExitUsage, "-device"},         // exit 1 after loading the corpus before
		{[]string{"stray"}, cli.ExitUsage, "stray"},
		{[]string{"-corpus", "opticks", "-prompt", "Light"}, cli.ExitUsage, "-sample"},
		{[]string{"-corpus", "opticks", "-sample", "5", "-prompt", "Ωmega"}, cli.ExitUsage, "'Ω' at byte 0 is not in the vocabulary of opticks"},
	} {
		r := clitest.Run(t, nil, append(c.args, "-iters", "1")...)
		if r.Code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, r.Code, c.code, r.Stderr)
		}
		if bad := clitest.OneLine(r.Stderr); bad != "" || !strings.HasPrefix(r.Stderr, "gpt: ") || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v: stderr %q: %s; want one line starting gpt: and naming %q", c.args, r.Stderr, bad, c.want)
		}
	}
}

// TestSaveInitEval trains, saves, and evaluates the saved weights with
// -init -eval-only: the same deterministic validation loss, its sizes read
// from the file; the file holds nanoGPT's names and no lm_head.
func TestSaveInitEval(t *testing.T) {
	dir := t.TempDir()
	s := runOK(t, append(tiny, "-save", dir)...)
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := models.GPTConfigOf(f.Tensors)
	if err != nil || cfg.Layers != 2 || cfg.Embd != 16 || cfg.Block != 16 || cfg.Vocab != 91 || cfg.Bias {
		t.Errorf("the saved file describes %+v (%v)", cfg, err)
	}
	for _, tn := range f.Tensors {
		if tn.Name == "lm_head.weight" {
			t.Error("the saved file has lm_head.weight, which is tied to transformer.wte.weight")
		}
	}
	e := runOK(t, "-corpus", "opticks", "-init", path, "-eval-only", "-eval-windows", "8") // heads from the file's metadata
	if math.Float64bits(float64(e.ValLoss)) != math.Float64bits(float64(s.ValLoss)) {
		t.Errorf("-eval-only of the saved weights: val loss %v, the run ended at %v", e.ValLoss, s.ValLoss)
	}
}

// TestResumeBitwise kills a run part-way and resumes it: the same losses
// and weights as the uninterrupted run, bit for bit, in FP32 and BF16, with
// dropout on.
func TestResumeBitwise(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four short runs; skipped with -short")
	}
	for _, a := range []string{"off", "bf16"} {
		// 40 iterations, not 12, so that the run is still going when the
		// kill comes after the fifth, even on a busy machine.
		full, resumed := clitest.KillAndResume(t, append(tiny, "-amp", a, "-dropout", "0.1", "-iters", "40", "-json"), 5)
		want, got := summaryOf(t, full.Stdout), summaryOf(t, resumed.Stdout)
		if math.Float64bits(float64(got.TrainLoss)) != math.Float64bits(float64(want.TrainLoss)) ||
			math.Float64bits(float64(got.ValLoss)) != math.Float64bits(float64(want.ValLoss)) || got.Iters != want.Iters {
			t.Errorf("%s: resumed: train %v val %v after %d; uninterrupted: %v %v after %d", a, got.TrainLoss, got.ValLoss, got.Iters, want.TrainLoss, want.ValLoss, want.Iters)
		}
	}
}

// TestSample checks that -sample prints that many characters of the
// corpus's alphabet before the summary.
func TestSample(t *testing.T) {
	r := clitest.Run(t, nil, append(tiny, "-sample", "50", "-json")...)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	text := strings.Join(lines[:len(lines)-1], "\n")
	if n := len([]rune(text)); n < 40 || n > 51 { // surrounding newlines are trimmed
		t.Errorf("sampled %d characters: %q", n, text)
	}
	// -prompt is printed, then continued.
	r = clitest.Run(t, nil, append(tiny, "-sample", "50", "-prompt", "Of the Light", "-json")...)
	lines = strings.Split(r.Stdout, "\n")
	if r.Code != 0 || len(lines) < 2 || !strings.HasPrefix(r.Stdout, "Of the Light") || len([]rune(strings.Join(lines[:len(lines)-2], "\n"))) != len("Of the Light")+50 {
		t.Errorf("-prompt: exit %d, stdout %q; want the prompt and 50 characters after it", r.Code, r.Stdout)
	}
}

// TestSignalStops sends SIGTERM to a run part-way: it stops between
// iterations with a checkpoint, its summary marked interrupted, and exits
// 143, as every program of the project does (internal/train's Saver).
func TestSignalStops(t *testing.T) {
	dir := t.TempDir()
	c := clitest.Start(t, nil, append(tiny, "-iters", "100000", "-json", "-save", dir, "-save-every", "1")...)
	c.WaitCheckpoint(t, dir, 2)
	c.Signal(syscall.SIGTERM)
	r := c.Wait(t)
	if r.Code != 143 || !strings.Contains(r.Stderr, "saved "+dir) {
		t.Fatalf("exit %d, stderr %q; want 143 and a line naming the checkpoint", r.Code, r.Stderr)
	}
	if s := summaryOf(t, r.Stdout); !s.Interrupted || s.Iters < 2 || !math.IsNaN(float64(s.ValLoss)) {
		t.Errorf("summary %+v; want interrupted after 2 or more iterations, no validation loss", s)
	}
}

// TestDistMatchesSingle trains on 2 ranks with -batch 4 under mpirun and
// in one process with -batch 8, dropout on: the ranks take the windows
// and dropout masks the one process takes, so the validation loss of the
// weights they end with agrees to float rounding (the gradients' sums are
// associated otherwise); where the ranks drew the same masks, it was
// 1e-3 apart.
func TestDistMatchesSingle(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an MPI job; skipped with -short")
	}
	args := append(slices.Clone(tiny), "-embd", "32", "-iters", "30", "-dropout", "0.2", "-eval-windows", "40", "-json")
	one := runOK(t, append(args, "-batch", "8")...)
	out, code := clitest.Mpirun(t, 2, append(args, "-batch", "4", "-dist", "mpi")...)
	if code != 0 {
		t.Fatalf("2 ranks under mpirun: exit %d\n%s", code, out)
	}
	if n := strings.Count(out, `"world_size":2`); n != 1 {
		t.Fatalf("%d JSON summaries with world_size 2, want exactly one (rank 0's):\n%s", n, out)
	}
	two := summaryOf(t, out)
	t.Logf("1 x 8: val loss %v; 2 x 4: val loss %v", one.ValLoss, two.ValLoss)
	if d := math.Abs(float64(two.ValLoss - one.ValLoss)); !(d <= 2e-5*float64(one.ValLoss)) {
		t.Errorf("val loss %v on 2 ranks, %v in one process: %.1e apart, want within 2e-5 of it", two.ValLoss, one.ValLoss, d/float64(one.ValLoss))
	}
	// The training loss printed is the ranks' mean: the one process's.
	if d := math.Abs(float64(two.TrainLoss - one.TrainLoss)); !(d <= 2e-5*float64(one.TrainLoss)) {
		t.Errorf("train loss %v on 2 ranks, %v in one process: %.1e apart, want within 2e-5 of it", two.TrainLoss, one.TrainLoss, d/float64(one.TrainLoss))
	}
	if two.Iters != 30 || two.Batch != 4 {
		t.Errorf("2 ranks took %d iterations of batch %d, want 30 of 4", two.Iters, two.Batch)
	}
	// Ranks whose flags differ stop before training, rank 0 naming the flag.
	out, code = clitest.MpirunEach(t, append(args, "-dist", "mpi"), append(args, "-dist", "mpi", "-lr", "0.01"))
	if want := "gpt: distributed: the ranks must train with the same settings, and differ in -lr (0.001 on rank 0, 0.01 on rank 1)"; code == 0 || strings.Count(out, want) != 1 {
		t.Errorf("ranks with other -lr: exit %d; want non-zero and one line %q:\n%s", code, want, out)
	}
}

// TestAccumMatchesBatch: -accum 2 with -batch 4 trains on the windows of
// -batch 8 and adds up their gradients, so the weights it ends with give
// the validation loss of -batch 8 to float rounding; under F16 autocast
// and its scaler too (the gradients then unscaled after the sum, not as
// the GEMMs store them), within F16's rounding.
func TestAccumMatchesBatch(t *testing.T) {
	args := append(slices.Clone(tiny), "-embd", "32", "-iters", "20", "-eval-windows", "40", "-json")
	for _, c := range []struct {
		amp string
		tol float64
	}{{"off", 2e-5}, {"f16", 1e-4}} {
		one := runOK(t, append(args, "-amp", c.amp, "-batch", "8")...)
		acc := runOK(t, append(args, "-amp", c.amp, "-batch", "4", "-accum", "2")...)
		t.Logf("%s: -batch 8: val loss %v; -batch 4 -accum 2: %v", c.amp, one.ValLoss, acc.ValLoss)
		if d := math.Abs(float64(acc.ValLoss - one.ValLoss)); !(d <= c.tol*float64(one.ValLoss)) || acc.SkippedSteps > one.SkippedSteps {
			t.Errorf("%s: val loss %v with -accum 2, %v with -batch 8 (%.1e apart, want within %.0e); %d and %d steps skipped",
				c.amp, acc.ValLoss, one.ValLoss, d/float64(one.ValLoss), c.tol, acc.SkippedSteps, one.SkippedSteps)
		}
	}
}

// TestDistSignal stops a 2-rank run under mpirun with SIGTERM to mpirun,
// which forwards it to each rank: the ranks stop after the same
// iteration, rank 0 alone names the checkpoint it wrote, no collective
// fails, and the same job resumed from it finishes the run. Before the
// ranks agreed on stopping, the job ended in an MPI error, or with no
// checkpoint at all.
func TestDistSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs; skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"-corpus", "opticks", "-layers", "1", "-heads", "2", "-embd", "16", "-block", "16", "-batch", "2",
		"-iters", "20000", "-eval-windows", "4", "-eval-every", "0", "-dist", "mpi", "-save", dir}
	c := clitest.StartMpirun(t, 2, args...)
	c.WaitStdout(t, "parameters, on cpu, 2 ranks") // rank 0's first line: training is about to begin
	time.Sleep(300 * time.Millisecond)
	c.Signal(syscall.SIGTERM)
	r := c.Wait(t)
	out := r.Stdout + r.Stderr
	for _, bad := range []string{"MPI_ERR", "panic", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Fatalf("the job printed %q:\n%s", bad, out)
		}
	}
	if n := strings.Count(out, "gpt: terminated after step "); n != 1 {
		t.Fatalf("%d lines naming the stop, want rank 0's one:\n%s", n, out)
	}
	var step int
	fmt.Sscanf(out[strings.Index(out, "gpt: terminated after step ")+len("gpt: terminated after step "):], "%d", &step)
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("step-%08d", step))); err != nil {
		t.Fatalf("no checkpoint of step %d, where the ranks stopped: %v\n%s", step, err, out)
	}
	res, code := clitest.Mpirun(t, 2, append(args, "-resume", dir)...)
	if code != 0 || !strings.Contains(res, fmt.Sprintf("resuming from iteration %d of ", step)) || !strings.Contains(res, "20000 iterations: train loss") {
		t.Errorf("resumed from step %d: exit %d\n%s", step, code, res)
	}
}
