package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// dataDir returns the data root holding MNIST, or skips.
func dataDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{os.Getenv("MIXPREC_DATA"), filepath.Join("..", "..", "data")} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "mnist", "train-images-idx3-ubyte.gz")); err == nil {
			abs, err := filepath.Abs(d) // the programs run in directories of their own (clitest)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	t.Skip("MNIST is not in ../../data/mnist or $MIXPREC_DATA/mnist; run make data")
	return ""
}

// tinyMNIST writes a small data set in MNIST's format (random pixels and
// labels, fixed seed) and returns the data root holding it, for tests about
// the program rather than about learning.
func tinyMNIST(t *testing.T, ntrain, ntest int) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "mnist")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	write := func(name string, header []uint32, n int, max int) {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		for _, h := range header {
			binary.Write(zw, binary.BigEndian, h)
		}
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.IntN(max))
		}
		zw.Write(body)
		zw.Close()
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		prefix string
		n      int
	}{{"train", ntrain}, {"t10k", ntest}} {
		write(s.prefix+"-images-idx3-ubyte.gz", []uint32{0x803, uint32(s.n), 28, 28}, s.n*28*28, 256)
		write(s.prefix+"-labels-idx1-ubyte.gz", []uint32{0x801, uint32(s.n)}, s.n, 10)
	}
	writeSums(t, dir) // not LeCun's files: their digests say what they hold
	return root
}

// writeSums lists the SHA-256 of the files in dir in its SHA256SUMS, which
// the loader checks them against instead of the published files' digests.
func writeSums(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if e.Name() == datasets.SumsFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), e.Name())
	}
	if err := os.WriteFile(filepath.Join(dir, datasets.SumsFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBadDataDirectory checks that missing or corrupt data give one clear
// line naming the problem, not a panic.
func TestBadDataDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	corrupt := t.TempDir()
	if err := os.MkdirAll(filepath.Join(corrupt, "mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write([]byte{0, 0, 8, 3, 0, 0, 0, 9}) // header cut short
		zw.Close()
		if err := os.WriteFile(filepath.Join(corrupt, "mnist", f), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ dir, want string }{
		{missing, "does not exist; fetch MNIST with `make data`"},
		{corrupt, "train-images-idx3-ubyte.gz"},
	} {
		var out, errb bytes.Buffer
		err := run([]string{"-data", c.dir, "-max-steps", "1"}, &out, &errb)
		if err == nil {
			t.Fatalf("-data %s: no error", c.dir)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) || strings.Contains(msg, "datasets.") {
			t.Errorf("-data %s: error %q; want one line mentioning %q, and no Go function", c.dir, msg, c.want)
		}
	}
}

// TestTamperedMNIST alters a copy of the real MNIST after it was fetched
// (labels changed in a valid gzip file, an uncompressed file beside its
// .gz, a file cut short): each run stops before training with one line
// naming the file, where a relabelled file used to train (to 53% with
// every label shifted).
func TestTamperedMNIST(t *testing.T) {
	real := filepath.Join(dataDir(t), "mnist")
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string) string
	}{
		{"relabelled", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "train-labels-idx1-ubyte.gz")
			dims, labels, err := datasets.ReadIDX(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := range labels {
				labels[i] = (labels[i] + 1) % 10
			}
			writeIDX(t, p, 0x801, dims, labels, true)
			return p
		}},
		{"uncompressed beside", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "t10k-labels-idx1-ubyte")
			dims, labels, err := datasets.ReadIDX(p + ".gz")
			if err != nil {
				t.Fatal(err)
			}
			labels[0] = (labels[0] + 1) % 10
			writeIDX(t, p, 0x801, dims, labels, false)
			return p
		}},
		{"cut short", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "t10k-images-idx3-ubyte.gz")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(p, b[:len(b)-100], 0o644)
			return p
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "mnist")
			os.Mkdir(dir, 0o755)
			for _, n := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
				b, err := os.ReadFile(filepath.Join(real, n))
				if err != nil {
					t.Fatal(err)
				}
				os.WriteFile(filepath.Join(dir, n), b, 0o644)
			}
			p := tt.damage(t, dir)
			r := clitest.Run(t, nil, "-data", root, "-max-steps", "20", "-json")
			if r.Code != cli.ExitError || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, p+" has SHA-256") || !strings.Contains(r.Stderr, "make data") {
				t.Errorf("exit %d, stderr %q; want %d and one line naming %s and how to fetch it", r.Code, r.Stderr, cli.ExitError, p)
			}
		})
	}
}

// writeIDX writes an IDX file of unsigned bytes, gzipped when gz is set.
func writeIDX(t *testing.T, path string, magic uint32, dims []int, data []byte, gz bool) {
	t.Helper()
	var raw bytes.Buffer
	binary.Write(&raw, binary.BigEndian, magic)
	for _, d := range dims {
		binary.Write(&raw, binary.BigEndian, uint32(d))
	}
	raw.Write(data)
	b := raw.Bytes()
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(b)
		zw.Close()
		b = z.Bytes()
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBadFlagValues is issue 9 item 2: every bad value is refused before
// any work, with one line naming the flag, exit status 2 and no stack trace.
// The data directory does not exist, so a value that got through would fail
// later, with status 1.
func TestBadFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"-lr", "nan"}, {"-lr", "NaN"}, {"-lr", "inf"}, {"-lr", "-inf"}, {"-lr", "0"}, {"-lr", "-0.1"}, {"-lr", "1e39"},
		{"-epochs", "0"}, {"-epochs", "-1"}, {"-batch", "0"}, {"-batch", "-5"}, {"-batch", "1000000000"},
		{"-max-steps", "-1"}, {"-amp", "f8"}, {"-amp", ""}, {"-checkpoint", "0"}, {"-checkpoint", "-1"}, {"-checkpoint", "x"},
		{"-device", "tpu"}, {"-model", "nope"}, {"-model", "resnet20"}, {"-optim", "lbfgs"}, {"-dataset", "cifar"},
		{"-seed", "-1"}, {"-json=maybe"}, {"-nosuch"}, {"stray"},
	} {
		r := clitest.Run(t, nil, append([]string{"-data", "/nonexistent"}, args...)...)
		if r.Code != cli.ExitUsage || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing on stdout (stderr %q)", args, r.Code, r.Stdout, cli.ExitUsage, r.Stderr)
		}
		if bad := clitest.OneLine(r.Stderr); bad != "" || !strings.HasPrefix(r.Stderr, "mnist: ") {
			t.Errorf("%v: stderr %q: %s; want one line starting mnist:", args, r.Stderr, bad)
		}
		if name := strings.TrimLeft(strings.SplitN(args[0], "=", 2)[0], "-"); args[0][0] == '-' && !strings.Contains(r.Stderr, "-"+name) {
			t.Errorf("%v: stderr %q does not name the flag", args, r.Stderr)
		}
	}
}

// TestHelp is issue 9 item 3: -h succeeds and lists the choices and the
// defaults each model really trains with.
func TestHelp(t *testing.T) {
	for _, h := range []string{"-h", "-help", "--help"} {
		r := clitest.Run(t, nil, h)
		if r.Code != 0 || r.Stderr != "" {
			t.Errorf("%s: exit %d, stderr %q; want 0 and nothing", h, r.Code, r.Stderr)
		}
		for _, want := range []string{"-model mlp|wide|deepmlp|cnn\n", "-optim sgd|adam|adamw", "-amp off|f16|bf16",
			"-checkpoint off|auto|N", "-device auto|cpu|cuda", "-dataset mnist|fashion",
			"(default per model: mlp 128, wide 512, deepmlp 256, cnn 128)", "(default per model: mlp 0.05, wide 0.02, deepmlp 0.001, cnn 0.003)"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("%s: help lacks %q:\n%s", h, want, r.Stdout)
			}
		}
	}
}

// TestFashionDirectories: without Fashion-MNIST, the error names every
// directory looked in, not only the last.
func TestFashionDirectories(t *testing.T) {
	dirs := []string{filepath.Join(t.TempDir(), "data", "fashion-mnist"), filepath.Join(t.TempDir(), "system")}
	_, _, err := loadFashion(dirs)
	if err == nil {
		t.Fatal("no error")
	}
	for _, d := range dirs {
		if !strings.Contains(err.Error(), d) {
			t.Errorf("error %q does not name %s", err, d)
		}
	}
	if _, serr := os.Stat(datasets.SystemFashionMNISTDir); serr == nil {
		t.Skipf("%s exists: the program would find it", datasets.SystemFashionMNISTDir)
	}
	data := t.TempDir()
	r := clitest.Run(t, nil, "-dataset", "fashion", "-data", data)
	for _, d := range []string{filepath.Join(data, "fashion-mnist"), datasets.SystemFashionMNISTDir} {
		if r.Code != cli.ExitError || !strings.Contains(r.Stderr, d) || clitest.OneLine(r.Stderr) != "" {
			t.Errorf("exit %d, stderr %q; want %d and one line naming %s", r.Code, r.Stderr, cli.ExitError, d)
		}
	}
}

// TestDiverged is issue 9 item 1: a run whose loss turns NaN still prints
// its summary as strict JSON (null for what is not finite), says on stderr
// at which step the loss became non-finite, and exits with status 3.
func TestDiverged(t *testing.T) {
	d := tinyMNIST(t, 1024, 100)
	for _, a := range []string{"off", "f16", "bf16"} {
		r := clitest.Run(t, nil, "-data", d, "-lr", "1e10", "-amp", a, "-epochs", "10", "-max-steps", "50", "-json")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		last := []byte(lines[len(lines)-1])
		var s cli.Summary
		if !json.Valid(last) || json.Unmarshal(last, &s) != nil {
			t.Fatalf("-amp %s: the last line is not a JSON summary: %q (stderr %q)", a, last, r.Stderr)
		}
		if r.Code != cli.ExitDiverged {
			t.Errorf("-amp %s: exit %d, want %d", a, r.Code, cli.ExitDiverged)
		}
		m := regexp.MustCompile(`^mnist: loss became non-finite \((NaN|[+-]Inf)\) at step (\d+) \(epoch \d+\); stopped\n$`).FindStringSubmatch(r.Stderr)
		if m == nil {
			t.Fatalf("-amp %s: stderr %q; want one line naming the step", a, r.Stderr)
		}
		if !s.Diverged || m[2] != itoa(s.DivergedStep) || s.Steps != s.DivergedStep || s.Steps >= 50 ||
			!bytes.Contains(last, []byte(`"train_loss":null`)) || !bytes.Contains(last, []byte(`"test_accuracy":null`)) {
			t.Errorf("-amp %s: summary %s; want diverged at step %s, stopped there, null loss and accuracy", a, last, m[2])
		}
	}
	// A run that does not diverge says so.
	s := clitest.RunJSON(t, run, "-data", d, "-max-steps", "3")
	if s.Diverged || s.DivergedStep != 0 {
		t.Errorf("healthy run: diverged %v at %d", s.Diverged, s.DivergedStep)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestModelDefaults is issue 9 item 3: a model's own batch size, learning
// rate and optimiser apply unless a flag gives them.
func TestModelDefaults(t *testing.T) {
	d := tinyMNIST(t, 1024, 10)
	for _, c := range []struct {
		args      []string
		batch     int
		lr        float64
		optimizer string
	}{
		{[]string{"-model", "wide"}, 512, 0.02, "sgd"},
		{[]string{"-model", "cnn", "-batch", "64", "-lr", "0.01", "-optim", "sgd"}, 64, 0.01, "sgd"},
		{[]string{"-model", "deepmlp", "-optim", "adam"}, 256, 1e-3, "adam"},
	} {
		s := clitest.RunJSON(t, run, append([]string{"-data", d, "-max-steps", "1"}, c.args...)...)
		if s.Batch != c.batch || float64(s.LR) != c.lr || s.Optimizer != c.optimizer {
			t.Errorf("%v: batch %d, lr %v, optimiser %s; want %d, %v, %s", c.args, s.Batch, s.LR, s.Optimizer, c.batch, c.lr, c.optimizer)
		}
	}
}

// TestDeterministic trains twice with the same seed and expects bitwise
// identical losses and accuracy.
func TestDeterministic(t *testing.T) {
	d := dataDir(t)
	for _, a := range []string{"off", "f16"} {
		args := []string{"-data", d, "-max-steps", "25", "-seed", "3", "-amp", a}
		s1, s2 := clitest.RunJSON(t, run, args...), clitest.RunJSON(t, run, args...)
		if math.Float64bits(float64(s1.TrainLoss)) != math.Float64bits(float64(s2.TrainLoss)) || s1.TestAccuracy != s2.TestAccuracy {
			t.Errorf("-amp %s: two runs differ: loss %v vs %v, accuracy %v vs %v", a, s1.TrainLoss, s2.TrainLoss, s1.TestAccuracy, s2.TestAccuracy)
		}
		s3 := clitest.RunJSON(t, run, "-data", d, "-max-steps", "25", "-seed", "4", "-amp", a)
		if s3.TrainLoss == s1.TrainLoss {
			t.Errorf("-amp %s: seeds 3 and 4 gave the same loss %v", a, s1.TrainLoss)
		}
	}
}

// TestAccuracy is issue acceptance: three epochs of the MLP reach 97% test
// accuracy, and F16 and BF16 autocast land within 0.3 points of FP32 with
// fewer than 1% of steps skipped.
func TestAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for three epochs three times; skipped with -short")
	}
	d := dataDir(t)
	base := clitest.RunJSON(t, run, "-data", d, "-epochs", "3")
	t.Logf("fp32: accuracy %.4f, %.0f samples/s", base.TestAccuracy, base.SamplesPerSec)
	if base.TestAccuracy < 0.97 {
		t.Errorf("fp32 accuracy %.4f, want >= 0.97", base.TestAccuracy)
	}
	for _, a := range []string{"f16", "bf16"} {
		s := clitest.RunJSON(t, run, "-data", d, "-epochs", "3", "-amp", a)
		t.Logf("%s: accuracy %.4f, %d/%d steps skipped, scale %v, %.0f samples/s", a, s.TestAccuracy, s.SkippedSteps, s.Steps, s.FinalScale, s.SamplesPerSec)
		if math.Abs(float64(s.TestAccuracy-base.TestAccuracy)) > 0.003 {
			t.Errorf("%s accuracy %.4f is more than 0.3 points from fp32's %.4f", a, s.TestAccuracy, base.TestAccuracy)
		}
		if float64(s.SkippedSteps) >= 0.01*float64(s.Steps) {
			t.Errorf("%s skipped %d of %d steps, want < 1%%", a, s.SkippedSteps, s.Steps)
		}
		if s.PeakBytes.Param != base.PeakBytes.Param {
			t.Errorf("%s parameter bytes %d, fp32 %d: master weights must stay f32", a, s.PeakBytes.Param, base.PeakBytes.Param)
		}
	}
}

// TestCNNAccuracy is issue acceptance for the CNN: two epochs reach 99%
// test accuracy, and F16 autocast lands within 0.3 points. It trains for
// about ten minutes on two cores, so it runs only with MIXPREC_LONG=1
// (make test-long).
func TestCNNAccuracy(t *testing.T) {
	if testing.Short() || os.Getenv("MIXPREC_LONG") == "" {
		t.Skip("trains the CNN for two epochs twice; set MIXPREC_LONG=1 (make test-long)")
	}
	d := dataDir(t)
	base := clitest.RunJSON(t, run, "-data", d, "-model", "cnn", "-epochs", "2")
	t.Logf("cnn fp32: accuracy %.4f, %.0f samples/s, %.1f ms/step", base.TestAccuracy, base.SamplesPerSec, base.MsPerStep)
	if base.TestAccuracy < 0.99 {
		t.Errorf("cnn fp32 accuracy %.4f, want >= 0.99", base.TestAccuracy)
	}
	s := clitest.RunJSON(t, run, "-data", d, "-model", "cnn", "-epochs", "2", "-amp", "f16")
	t.Logf("cnn f16: accuracy %.4f, %d/%d steps skipped, %.0f samples/s", s.TestAccuracy, s.SkippedSteps, s.Steps, s.SamplesPerSec)
	if math.Abs(float64(s.TestAccuracy-base.TestAccuracy)) > 0.003 {
		t.Errorf("cnn f16 accuracy %.4f is more than 0.3 points from fp32's %.4f", s.TestAccuracy, base.TestAccuracy)
	}
}

// TestEvalReportsMeasured: -eval's summary holds what evaluating measured
// (accuracy, time, samples a second, peak memory, its batch) and null for
// what only training measures, where it used to print zeros.
func TestEvalReportsMeasured(t *testing.T) {
	d := tinyMNIST(t, 200, 50)
	dir := t.TempDir()
	if r := clitest.Run(t, nil, "-data", d, "-batch", "16", "-max-steps", "2", "-save", dir); r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	r := clitest.Run(t, nil, "-data", d, "-json", "-eval", filepath.Join(dir, "model.safetensors"))
	if r.Code != 0 {
		t.Fatalf("-eval: exit %d: %s", r.Code, r.Stderr)
	}
	s := clitest.Summary(t, r.Stdout)
	if s.Schema != 1 || !(s.WallSeconds > 0) || !(s.SamplesPerSec > 0) || s.PeakBytes.Total == 0 || s.Batch != 1000 || s.Steps != 0 {
		t.Errorf("-eval summary %+v; want schema 1, measured time, speed and memory, batch 1000, no steps", s)
	}
	for name, v := range map[string]cli.Float{"train_loss": s.TrainLoss, "ms_per_step": s.MsPerStep, "final_scale": s.FinalScale, "lr": s.LR} {
		if !math.IsNaN(float64(v)) {
			t.Errorf("-eval summary: %s = %v; want null (not measured)", name, v)
		}
	}
}
