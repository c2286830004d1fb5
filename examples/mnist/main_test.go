package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
)

// dataDir returns the data root holding MNIST, or skips.
func dataDir(t *testing.T) string {
	t.Helper()
	for _, d := range []string{os.Getenv("MIXPREC_DATA"), filepath.Join("..", "..", "data")} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "mnist", "train-images-idx3-ubyte.gz")); err == nil {
			return d
		}
	}
	t.Skip("MNIST is not in ../../data/mnist or $MIXPREC_DATA/mnist; run make data")
	return ""
}

func runJSON(t *testing.T, args ...string) cli.Summary {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(append(args, "-json"), &out, &errb); err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s cli.Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %q: %v", lines[len(lines)-1], err)
	}
	return s
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
		{missing, "make data"},
		{corrupt, "train-images-idx3-ubyte.gz"},
	} {
		var out, errb bytes.Buffer
		err := run([]string{"-data", c.dir, "-max-steps", "1"}, &out, &errb)
		if err == nil {
			t.Fatalf("-data %s: no error", c.dir)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("-data %s: error %q; want one line mentioning %q", c.dir, msg, c.want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-amp", "f8"}, {"-model", "nope"}, {"-epochs", "0"}, {"-checkpoint", "x"}, {"-device", "tpu"}} {
		var out, errb bytes.Buffer
		if err := run(append(args, "-data", "/nonexistent"), &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestDeterministic trains twice with the same seed and expects bitwise
// identical losses and accuracy.
func TestDeterministic(t *testing.T) {
	d := dataDir(t)
	for _, a := range []string{"off", "f16"} {
		args := []string{"-data", d, "-max-steps", "25", "-seed", "3", "-amp", a}
		s1, s2 := runJSON(t, args...), runJSON(t, args...)
		if math.Float64bits(s1.TrainLoss) != math.Float64bits(s2.TrainLoss) || s1.TestAccuracy != s2.TestAccuracy {
			t.Errorf("-amp %s: two runs differ: loss %v vs %v, accuracy %v vs %v", a, s1.TrainLoss, s2.TrainLoss, s1.TestAccuracy, s2.TestAccuracy)
		}
		s3 := runJSON(t, "-data", d, "-max-steps", "25", "-seed", "4", "-amp", a)
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
	base := runJSON(t, "-data", d, "-epochs", "3")
	t.Logf("fp32: accuracy %.4f, %.0f samples/s", base.TestAccuracy, base.SamplesPerSec)
	if base.TestAccuracy < 0.97 {
		t.Errorf("fp32 accuracy %.4f, want >= 0.97", base.TestAccuracy)
	}
	for _, a := range []string{"f16", "bf16"} {
		s := runJSON(t, "-data", d, "-epochs", "3", "-amp", a)
		t.Logf("%s: accuracy %.4f, %d/%d steps skipped, scale %v, %.0f samples/s", a, s.TestAccuracy, s.SkippedSteps, s.Steps, s.FinalScale, s.SamplesPerSec)
		if math.Abs(s.TestAccuracy-base.TestAccuracy) > 0.003 {
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
	base := runJSON(t, "-data", d, "-model", "cnn", "-epochs", "2")
	t.Logf("cnn fp32: accuracy %.4f, %.0f samples/s, %.1f ms/step", base.TestAccuracy, base.SamplesPerSec, base.MsPerStep)
	if base.TestAccuracy < 0.99 {
		t.Errorf("cnn fp32 accuracy %.4f, want >= 0.99", base.TestAccuracy)
	}
	s := runJSON(t, "-data", d, "-model", "cnn", "-epochs", "2", "-amp", "f16")
	t.Logf("cnn f16: accuracy %.4f, %d/%d steps skipped, %.0f samples/s", s.TestAccuracy, s.SkippedSteps, s.Steps, s.SamplesPerSec)
	if math.Abs(s.TestAccuracy-base.TestAccuracy) > 0.003 {
		t.Errorf("cnn f16 accuracy %.4f is more than 0.3 points from fp32's %.4f", s.TestAccuracy, base.TestAccuracy)
	}
}
