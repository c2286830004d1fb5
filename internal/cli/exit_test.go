package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
)

func TestExit(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		code int
		line string // stderr
	}{
		{"ok", nil, ExitOK, ""},
		{"help", flag.ErrHelp, ExitOK, ""},
		{"usage", Usagef("-x 1: bad"), ExitUsage, "prog: -x 1: bad\n"},
		{"wrapped usage", fmt.Errorf("ctx: %w", &UsageError{errors.New("bad")}), ExitUsage, "prog: ctx: bad\n"},
		{"diverged", &Diverged{Step: 37, Epoch: 2, Loss: math.NaN()}, ExitDiverged,
			"prog: loss became non-finite (NaN) at step 37 (epoch 2); stopped\n"},
		{"inf", &Diverged{Step: 1, Epoch: 1, Loss: math.Inf(1)}, ExitDiverged,
			"prog: loss became non-finite (+Inf) at step 1 (epoch 1); stopped\n"},
		{"over budget", &OverBudget{Step: 12, Peak: 3 << 20, Budget: 2 << 20, Predicted: 2 << 20, Saved: "runs/a"}, ExitOverBudget,
			"prog: step 12 peaked at 3.0 MiB, over -mem-budget's 2.0 MiB (planned 2.0 MiB); stopped and saved runs/a: continue with -resume runs/a and a larger -mem-budget\n"},
		{"error", errors.New("no data"), ExitError, "prog: no data\n"},
		{"multi-line", errors.New("first\nsecond"), ExitError, "prog: first; second\n"},
	} {
		var stderr bytes.Buffer
		if got := Exit(&stderr, "prog", c.err); got != c.code || stderr.String() != c.line {
			t.Errorf("%s: Exit = %d, stderr %q; want %d, %q", c.name, got, stderr.String(), c.code, c.line)
		}
	}
}

// TestCatch: a device's out-of-memory panic becomes one line and status
// 1, naming what to try; errors pass through, and any other panic goes on.
func TestCatch(t *testing.T) {
	oom := &device.OutOfMemoryError{Device: "cuda:0", Request: 1 << 30, Live: 3 << 30, Err: errors.New("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY")}
	err := Catch(func() error { panic(oom) })
	var stderr bytes.Buffer
	want := "gpt: cuda:0 is out of memory: 1.0 GiB more with 3.0 GiB allocated (cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY); " +
		"-mem-budget plans the recomputation that fits the memory you give it, and a smaller -batch needs less\n"
	if code := Exit(&stderr, "gpt", err); code != ExitError || stderr.String() != want || !errors.Is(err, oom) {
		t.Errorf("an out-of-memory panic: Exit = %d, stderr %q; want %d, %q", code, stderr.String(), ExitError, want)
	}
	if err := Catch(func() error { return flag.ErrHelp }); err != flag.ErrHelp {
		t.Errorf("Catch of an error = %v", err)
	}
	defer func() {
		if r := recover(); r != "a bug" {
			t.Errorf("another panic: recovered %v, want it to go on", r)
		}
	}()
	Catch(func() error { panic("a bug") })
	t.Error("another panic was caught")
}

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args  []string
		help  bool
		usage string // part of the UsageError; "" for none
	}{
		{[]string{"-n", "3"}, false, ""},
		{[]string{"-h"}, true, ""},
		{[]string{"-help"}, true, ""},
		{[]string{"--help"}, true, ""},
		{[]string{"-n", "0"}, false, `invalid value "0" for flag -n`},
		{[]string{"-nosuch"}, false, "not defined: -nosuch"},
		{[]string{"stray"}, false, `unexpected argument "stray"`},
		{[]string{"-n", "2", "stray"}, false, `unexpected argument "stray"`},
	} {
		fs := NewFlagSet("prog", "About it.")
		var n int
		IntVar(fs, &n, "n", 1, 1, 0, "how many")
		var stdout bytes.Buffer
		err := Parse(fs, c.args, &stdout)
		var ue *UsageError
		switch {
		case c.help:
			if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stdout.String(), "usage: prog [flags]") || !strings.Contains(stdout.String(), "-n n") {
				t.Errorf("%v: error %v, stdout %q; want flag.ErrHelp and the help on stdout", c.args, err, stdout.String())
			}
		case c.usage != "":
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.usage) || strings.Contains(err.Error(), "\n") || stdout.Len() > 0 {
				t.Errorf("%v: error %v, stdout %q; want one-line UsageError with %q and nothing on stdout", c.args, err, stdout.String(), c.usage)
			}
		case err != nil:
			t.Errorf("%v: %v", c.args, err)
		}
	}
}

// TestSummaryNonFinite: a diverged run's summary is still strict JSON, with
// null where a number is not finite, and reads back as NaN.
func TestSummaryNonFinite(t *testing.T) {
	s := Summary{Model: "mlp", TrainLoss: Float(math.NaN()), TestAccuracy: Float(math.Inf(1)), FinalScale: Float(math.Inf(-1)),
		SamplesPerSec: 1234.5, LR: 1e6, Diverged: true, DivergedStep: 37}
	var out bytes.Buffer
	if err := PrintJSON(&out, s); err != nil {
		t.Fatalf("PrintJSON: %v", err)
	}
	line := out.Bytes()
	if !json.Valid(line) || bytes.Count(line, []byte("\n")) != 1 {
		t.Fatalf("not one line of valid JSON: %q", line)
	}
	for _, want := range []string{`"train_loss":null`, `"test_accuracy":null`, `"final_scale":null`, `"samples_per_sec":1234.5`,
		`"lr":1000000`, `"diverged":true`, `"diverged_step":37`} {
		if !bytes.Contains(line, []byte(want)) {
			t.Errorf("summary lacks %s: %s", want, line)
		}
	}
	var back Summary
	if err := json.Unmarshal(line, &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(back.TrainLoss)) || back.SamplesPerSec != 1234.5 || !back.Diverged || back.DivergedStep != 37 {
		t.Errorf("read back %+v", back)
	}

	// A finite Float encodes as encoding/json encodes a float64.
	for _, x := range []float64{0, 0.1, 1e21, 1e-7, -2.5, 65536} {
		got, _ := json.Marshal(Float(x))
		want, _ := json.Marshal(x)
		if !bytes.Equal(got, want) {
			t.Errorf("Float(%v) encodes as %s, float64 as %s", x, got, want)
		}
	}
	if b, _ := json.Marshal(Summary{}); !bytes.Contains(b, []byte(`"diverged":false`)) {
		t.Errorf("a finished run's summary lacks diverged:false: %s", b)
	}
}
