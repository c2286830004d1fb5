package cli

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn/models"
)

func TestAMPSet(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // String after Set; "" for an error
		dt   dtype.DType
	}{
		{"off", "off", dtype.F32},
		{"f32", "off", dtype.F32},
		{"f16", "f16", dtype.F16},
		{"FP16", "f16", dtype.F16},
		{"bf16", "bf16", dtype.BF16},
		{"f8", "", 0},
		{"", "", 0},
	} {
		var a AMP
		err := a.Set(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("Set(%q): got %v, want an error", c.in, a)
			}
			continue
		}
		if err != nil || a.String() != c.want || a.DType() != c.dt || a.On() != (c.dt != dtype.F32) {
			t.Errorf("Set(%q): got %v (dtype %v, on %v), %v; want %s (dtype %v)", c.in, a, a.DType(), a.On(), err, c.want, c.dt)
		}
	}
}

func TestCheckpointSet(t *testing.T) {
	const auto = 7
	for _, c := range []struct {
		in       string
		want     string // String after Set; "" for an error
		segments int    // Segments(auto)
		errText  string
	}{
		{"off", "off", 0, ""},
		{"auto", "auto", auto, ""},
		{"AUTO", "auto", auto, ""},
		{"1", "1", 1, ""},
		{"5", "5", 5, ""},
		{"0", "", 0, "use off"}, // once "off" in one program and "auto" in another
		{"-1", "", 0, "segments >= 1"},
		{"sqrt", "", 0, "segments >= 1"},
		{"", "", 0, "segments >= 1"},
	} {
		c0 := CheckpointSegments(3) // Set must leave it alone on error
		err := c0.Set(c.in)
		if c.want == "" {
			if err == nil || !strings.Contains(err.Error(), c.errText) {
				t.Errorf("Set(%q): error %v; want one mentioning %q", c.in, err, c.errText)
			}
			if c0 != CheckpointSegments(3) {
				t.Errorf("Set(%q) failed but changed the value to %v", c.in, c0)
			}
			continue
		}
		if err != nil || c0.String() != c.want || c0.Segments(auto) != c.segments || c0.On() != (c.segments > 0) {
			t.Errorf("Set(%q): got %v (segments %d, on %v), %v; want %s (segments %d)", c.in, c0, c0.Segments(auto), c0.On(), err, c.want, c.segments)
		}
	}
}

func TestNumberFlags(t *testing.T) {
	for _, c := range []struct {
		flag, in string
		ok       bool
	}{
		{"lr", "0.1", true},
		{"lr", "1e-6", true},
		{"lr", "nan", false},
		{"lr", "NaN", false},
		{"lr", "inf", false},
		{"lr", "-inf", false},
		{"lr", "0", false},
		{"lr", "-0.1", false},
		{"lr", "1e39", false},  // +Inf as the optimisers' float32
		{"lr", "1e-50", false}, // 0 as a float32
		{"lr", "x", false},
		{"wd", "0", true},
		{"wd", "5e-4", true},
		{"wd", "-1", false},
		{"wd", "nan", false},
		{"epochs", "1", true},
		{"epochs", "0", false},
		{"epochs", "-3", false},
		{"epochs", "1.5", false},
		{"batch", "65536", true},
		{"batch", "65537", false},
		{"steps", "0", true},
		{"steps", "-1", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		var lr, wd float64
		var epochs, batch, steps int
		FloatVar(fs, &lr, "lr", 0.1, "learning rate", false, "")
		FloatVar(fs, &wd, "wd", 0, "weight decay", true, "")
		IntVar(fs, &epochs, "epochs", 1, 1, 0, "")
		IntVar(fs, &batch, "batch", 1, 1, 1<<16, "")
		IntVar(fs, &steps, "steps", 0, 0, 0, "")
		err := fs.Parse([]string{"-" + c.flag, c.in})
		if (err == nil) != c.ok {
			t.Errorf("-%s %s: error %v; want ok %v", c.flag, c.in, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("-%s %s: error %q spans lines", c.flag, c.in, err)
		}
	}
}

// mnistish are models with different recipes, as examples/mnist registers.
func mnistish(t *testing.T) []models.Spec {
	var s []models.Spec
	for _, name := range []string{"mlp", "wide", "cnn"} {
		spec, err := models.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		s = append(s, spec)
	}
	return s
}

// TestResolveModelDefaults: a model's recipe applies to every flag the
// command line leaves out, and only to those.
func TestResolveModelDefaults(t *testing.T) {
	for _, c := range []struct {
		args      []string
		batch     int
		lr        float64
		optimizer string
		epochs    int
	}{
		{nil, 128, 0.05, "sgd", 1},
		{[]string{"-model", "wide"}, 512, 0.02, "sgd", 1},
		{[]string{"-model", "wide", "-batch", "64"}, 64, 0.02, "sgd", 1},
		{[]string{"-batch", "64", "-model", "wide"}, 64, 0.02, "sgd", 1},
		{[]string{"-model", "cnn"}, 128, 3e-3, "adamw", 1},
		{[]string{"-model", "cnn", "-optim", "sgd", "-lr", "0.5", "-epochs", "4"}, 128, 0.5, "sgd", 4},
	} {
		fs := NewFlagSet("t", "")
		var f Flags
		f.Register(fs, mnistish(t), []string{"sgd", "adam", "adamw"}, "")
		if err := Parse(fs, c.args, &bytes.Buffer{}); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		spec := f.Resolve(fs)
		if spec.Name != f.Model || f.Batch != c.batch || f.LR != c.lr || f.Optimizer != c.optimizer || f.Epochs != c.epochs {
			t.Errorf("%v: got model %s (spec %s), batch %d, lr %v, optim %s, epochs %d; want batch %d, lr %v, optim %s, epochs %d",
				c.args, f.Model, spec.Name, f.Batch, f.LR, f.Optimizer, f.Epochs, c.batch, c.lr, c.optimizer, c.epochs)
		}
	}
}

// TestHelpText: help lists every flag's choices and states defaults that
// hold: per model where they depend on it, never a placeholder 0.
func TestHelpText(t *testing.T) {
	fs := NewFlagSet("prog", "Does things.")
	var f Flags
	f.Register(fs, mnistish(t), []string{"sgd", "adam", "adamw"}, "about sqrt of the layers")
	var out bytes.Buffer
	if err := Parse(fs, []string{"-h"}, &out); err != flag.ErrHelp {
		t.Fatalf("Parse(-h): %v; want flag.ErrHelp", err)
	}
	help := out.String()
	for _, want := range []string{
		"usage: prog [flags]", "Does things.",
		"-model mlp|wide|cnn", "-optim sgd|adam|adamw", "-amp off|f16|bf16", "-checkpoint off|auto|N", "-device auto|cpu|cuda",
		"(default per model: mlp 128, wide 512, cnn 128)", "(default per model: mlp 0.05, wide 0.02, cnn 0.003)",
		"(default per model: mlp sgd, wide sgd, cnn adamw)", "-epochs n\n    \tpasses over the training set (default 1)",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "(0: the model's") {
		t.Errorf("help still calls 0 the model's default:\n%s", help)
	}

	// One model: its values are the plain defaults.
	resnet, _ := models.Lookup("resnet20")
	fs = NewFlagSet("cifar", "")
	f = Flags{}
	f.Register(fs, []models.Spec{resnet}, []string{"sgd-nesterov", "sgd"}, "")
	out.Reset()
	Parse(fs, []string{"-help"}, &out)
	for _, want := range []string{"-lr x\n    \tlearning rate (the peak of the model's schedule) (default 0.1)\n", "-optim sgd-nesterov|sgd\n",
		"optimiser (default sgd-nesterov)", "(default 30)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("one-model help lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "adam") {
		t.Errorf("help offers an optimiser the program refuses:\n%s", out.String())
	}
}

// TestFlagsSayWhatTheyTake: -seed -1 is refused in plain words, not
// "parse error"; -dist-timeout's help shows its real default, not 0s;
// -optim offers the name the summary reports for a recipe with Nesterov
// momentum; and the summary carries its schema.
func TestFlagsSayWhatTheyTake(t *testing.T) {
	fs := NewFlagSet("prog", "")
	var f Flags
	mlp, _ := models.Lookup("mlp")
	resnet, _ := models.Lookup("resnet20")
	f.Register(fs, []models.Spec{mlp}, []string{"sgd"}, "")
	var d DistFlags
	d.Register(fs)
	err := Parse(fs, []string{"-seed", "-1"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "want a whole number from 0 to 18446744073709551615") || strings.Contains(err.Error(), "parse error") {
		t.Errorf("-seed -1: %v; want a refusal in plain words", err)
	}
	if err := Parse(fs, []string{"-seed", "18446744073709551615"}, io.Discard); err != nil || f.Seed != 1<<64-1 {
		t.Errorf("-seed 2^64-1: %v, seed %d", err, f.Seed)
	}
	var help bytes.Buffer
	PrintFlags(&help, fs)
	if !strings.Contains(help.String(), "(a rank stalled or died) (default 5m0s)") {
		t.Errorf("-dist-timeout's help does not show its default 5m0s:\n%s", help.String())
	}
	if got := OptimizerName(resnet.Train); got != "sgd-nesterov" {
		t.Errorf("OptimizerName(resnet20's recipe) = %q, want sgd-nesterov", got)
	}
	if got := OptimizerName(mlp.Train); got != "sgd" {
		t.Errorf("OptimizerName(mlp's recipe) = %q, want sgd", got)
	}
	var b bytes.Buffer
	PrintJSON(&b, Summary{Model: "mlp"})
	if !strings.HasPrefix(b.String(), `{"schema":1,"model":"mlp",`) {
		t.Errorf("summary %s does not start with its schema", b.String())
	}
}
