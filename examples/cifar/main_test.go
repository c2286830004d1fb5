package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestMissingData: without CIFAR-10 the program says where to get it, on
// one line, and fails.
func TestMissingData(t *testing.T) {
	var out, errb bytes.Buffer
	err := run([]string{"-data", t.TempDir(), "-max-steps", "1"}, &out, &errb)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "cifar-10-binary.tar.gz") || !strings.Contains(err.Error(), "-synthetic") {
		t.Errorf("error %v; want one line naming the archive and -synthetic", err)
	}
}

// TestSynthetic runs the acceptance command's shape on a few steps and
// checks the summary says the data were synthetic.
func TestSynthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	s := clitest.RunJSON(t, run, "-synthetic", "-max-steps", "3", "-amp", "f16", "-checkpoint", "auto", "-batch", "16")
	if s.Data != "synthetic" || s.Steps != 3 || s.PeakBytes.Activation == 0 || s.PeakBytes.Recompute == 0 || s.Diverged {
		t.Errorf("summary %+v; want data synthetic, 3 steps, activation and recompute bytes", s)
	}
	clitest.PeaksAddUp(t, s.PeakBytes, s.AtPeakBytes)
	var out, errb bytes.Buffer
	if err := run([]string{"-synthetic", "-max-steps", "1", "-batch", "8"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(line, "[synthetic data]") {
			t.Errorf("line without the synthetic label: %q", line)
		}
	}
}

// TestTrainsOnCIFARFiles writes a tiny data set in the binary format and
// trains on it, through the real loader and augmentation.
func TestTrainsOnCIFARFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	dir := filepath.Join(t.TempDir(), "cifar10")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, n int) {
		var b bytes.Buffer
		for i := range n {
			b.WriteByte(byte(i % 10))
			px := make([]byte, 3072)
			for j := range px {
				px[j] = byte((i*7 + j) % 256)
			}
			b.Write(px)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5; i++ {
		write("data_batch_"+string(rune('0'+i))+".bin", 8)
	}
	write("test_batch.bin", 8)
	s := clitest.RunJSON(t, run, "-data", filepath.Dir(dir), "-epochs", "1", "-batch", "16")
	if s.Data != "cifar10" || s.Steps != 2 {
		t.Errorf("summary %+v; want cifar10 data and 2 steps (40 samples, batch 16, last dropped)", s)
	}
	var out, errb bytes.Buffer
	err := run([]string{"-data", filepath.Dir(dir), "-batch", "64"}, &out, &errb)
	var ue *cli.UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "40 samples") {
		t.Errorf("-batch 64 on 40 samples: %v; want a usage error saying the set holds 40", err)
	}
}

// TestBadFlagValues is issue 9 item 2: every bad value is refused before
// any work (the data directory does not exist, so a value that got through
// would fail later, with status 1), in one line naming the flag, with exit
// status 2 and no stack trace.
func TestBadFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"-workers", "0"}, {"-workers", "-1"}, {"-wd", "-1"}, {"-wd", "nan"}, {"-wd", "inf"},
		{"-lr", "nan"}, {"-lr", "inf"}, {"-lr", "0"}, {"-lr", "-1"},
		{"-optim", "adam"}, {"-optim", "adamw"}, {"-model", "mlp"}, {"-checkpoint", "0"}, {"-amp", "fp8"},
		{"-batch", "0"}, {"-epochs", "0"}, {"-max-steps", "-2"}, {"-device", "gpu"}, {"-synthetic=2"}, {"stray"},
	} {
		r := clitest.Run(t, nil, append([]string{"-data", "/nonexistent"}, args...)...)
		if r.Code != cli.ExitUsage || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing on stdout (stderr %q)", args, r.Code, r.Stdout, cli.ExitUsage, r.Stderr)
		}
		if bad := clitest.OneLine(r.Stderr); bad != "" || !strings.HasPrefix(r.Stderr, "cifar: ") {
			t.Errorf("%v: stderr %q: %s; want one line starting cifar:", args, r.Stderr, bad)
		}
	}
	// Known only once the data are: a batch larger than the training set,
	// all of which DropLast would drop.
	r := clitest.Run(t, nil, "-synthetic", "-batch", "60000", "-max-steps", "1")
	if r.Code != cli.ExitUsage || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, "-batch 60000") {
		t.Errorf("-batch 60000: exit %d, stderr %q; want %d and one line naming -batch", r.Code, r.Stderr, cli.ExitUsage)
	}
}

// TestHelp is issue 9 item 3: -h succeeds, offers only what the program
// accepts, and states defaults without contradicting itself.
func TestHelp(t *testing.T) {
	r := clitest.Run(t, nil, "-h")
	if r.Code != 0 || r.Stderr != "" {
		t.Errorf("-h: exit %d, stderr %q; want 0 and nothing", r.Code, r.Stderr)
	}
	for _, want := range []string{"-optim sgd-nesterov|sgd\n", "-model resnet20\n", "-amp off|f16|bf16", "-checkpoint off|auto|N",
		"(default 0.1)", "(default 0.0005)", "(default 30)", "(default 128)", "one segment per residual stage"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, r.Stdout)
		}
	}
	for _, bad := range []string{"adam", "0: the model's"} {
		if strings.Contains(r.Stdout, bad) {
			t.Errorf("help contains %q:\n%s", bad, r.Stdout)
		}
	}
}

// TestDiverged is issue 9 item 1 for CIFAR: the summary is still strict
// JSON, stderr names the step, and the exit status is 3.
func TestDiverged(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	r := clitest.Run(t, nil, "-synthetic", "-batch", "8", "-lr", "1e30", "-max-steps", "20", "-json")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	last := []byte(lines[len(lines)-1])
	var s cli.Summary
	if !json.Valid(last) || json.Unmarshal(last, &s) != nil {
		t.Fatalf("the last line is not a JSON summary: %q (stderr %q)", last, r.Stderr)
	}
	m := regexp.MustCompile(`^cifar: loss became non-finite \((NaN|[+-]Inf)\) at step (\d+) \(epoch 1\); stopped\n$`).FindStringSubmatch(r.Stderr)
	if r.Code != cli.ExitDiverged || m == nil {
		t.Fatalf("exit %d, stderr %q; want %d and one line naming the step", r.Code, r.Stderr, cli.ExitDiverged)
	}
	if !s.Diverged || s.Steps != s.DivergedStep || s.Steps >= 20 || !bytes.Contains(last, []byte(`"train_loss":null`)) {
		t.Errorf("summary %s; want diverged, stopped at the step, null loss", last)
	}
}

// TestOptimizerNames: -optim takes the name the summary reports
// (sgd-nesterov, the recipe's), and -eval's summary holds what evaluating
// measured, with null for what only training measures.
func TestOptimizerNames(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a step")
	}
	dir := t.TempDir()
	s := clitest.RunJSON(t, run, "-synthetic", "-max-steps", "1", "-batch", "8", "-optim", "sgd-nesterov", "-save", dir)
	if s.Optimizer != "sgd-nesterov" || s.Schema != 1 {
		t.Errorf("summary optimizer %q, schema %d; want sgd-nesterov, 1", s.Optimizer, s.Schema)
	}
	if def := clitest.RunJSON(t, run, "-synthetic", "-max-steps", "1", "-batch", "8"); def.Optimizer != "sgd-nesterov" {
		t.Errorf("default optimizer %q, want sgd-nesterov", def.Optimizer)
	}
	e := clitest.RunJSON(t, run, "-synthetic", "-eval", filepath.Join(dir, "model.safetensors"))
	if !(e.WallSeconds > 0) || !(e.SamplesPerSec > 0) || e.PeakBytes.Total == 0 || !math.IsNaN(float64(e.TrainLoss)) || !math.IsNaN(float64(e.LR)) {
		t.Errorf("-eval summary %+v; want measured time, speed and memory, null training loss and lr", e)
	}
}
