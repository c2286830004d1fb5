package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

// TestHelp is issue 9 item 3: -h exits 0 for the tool and every command,
// prints help to standard output and nothing else.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"-h"}, []string{"usage: mixprec <command>", "memcompare"}},
		{[]string{"help"}, []string{"usage: mixprec <command>"}},
		{[]string{"device", "-h"}, []string{"usage: mixprec device [flags]", "-json"}},
		{[]string{"bench", "-h"}, []string{"usage: mixprec bench matmul"}},
		{[]string{"bench", "matmul", "-h"}, []string{"usage: mixprec bench matmul [flags]", "-cpu-n n", "-dtypes f32,f16,bf16", "-gpu-only"}},
		{[]string{"memcompare", "-help"}, []string{"usage: mixprec memcompare [flags]", "-model mlp|wide|deepmlp|cnn|resnet20|gpt\n",
			"-checkpoint auto|N", "-amp f16|bf16", "-device auto|cpu|cuda", "per model: mlp 128, wide 512"}},
	} {
		r := clitest.Run(t, nil, c.args...)
		if r.Code != 0 || r.Stderr != "" {
			t.Errorf("%v: exit %d, stderr %q; want 0 and nothing", c.args, r.Code, r.Stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("%v: help lacks %q:\n%s", c.args, w, r.Stdout)
			}
		}
	}
}

// TestBadFlagValues is issue 9 item 2: one line naming the problem, exit
// status 2, no table of dashes and no stack trace.
func TestBadFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nosuch"},
		{"bench"},
		{"bench", "conv"},
		{"bench", "matmul", "-cpu-n", "0"},
		{"bench", "matmul", "-cpu-n", "-1"},
		{"bench", "matmul", "-n", "0"},
		{"bench", "matmul", "-n", "1000000"},
		{"bench", "matmul", "-reps", "0"},
		{"bench", "matmul", "-cpu-reps", "0"},
		{"bench", "matmul", "-dtypes", "f32,f8"},
		{"bench", "matmul", "-dtypes", ""},
		{"bench", "matmul", "stray"},
		{"device", "stray"},
		{"device", "-nosuch"},
		{"memcompare", "-checkpoint", "0"}, // once silently 2 segments
		{"memcompare", "-checkpoint", "off"},
		{"memcompare", "-checkpoint", "-3"},
		{"memcompare", "-amp", "off"},
		{"memcompare", "-amp", "f32"},
		{"memcompare", "-model", "gpt2"},
		{"memcompare", "-batch", "0"},
		{"memcompare", "-steps", "0"},
		{"memcompare", "-device", "tpu"},
		{"memcompare", "-seed", "-1"}, // package flag's "parse error" before
		{"memcompare", "-png", filepath.Join(t.TempDir(), "missing", "chart.png")},
		{"memcompare", "-verify", "3"},
		{"memcompare", "-mem-budget", "1GiB"},
		{"memcompare", "-mem-budget", "lots", "-verify", "3"},
		{"memcompare", "-budget-sweep", "-mem-budget", "1GiB"},
		{"memcompare", "-budget-sweep", "-verify", "2"},
		{"memcompare", "-budget-sweep", "-points", "1"},
		{"memcompare", "-budget-sweep", "-checkpoint", "2"},
		{"memcompare", "-points", "4"},
		{"memcompare", "-mem-budget", "1GiB", "-verify", "2", "-png", filepath.Join(t.TempDir(), "v.png")},
		{"memcompare", "-model", "mlp", "-dropout", "0.1"},
		{"memcompare", "-model", "gpt", "-dropout", "1"},
		{"memcompare", "-model", "gpt", "-batch", "2", "-mem-budget", "0.05x", "-verify", "2"}, // below any plan
	} {
		r := clitest.Run(t, nil, args...)
		if r.Code != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d (stdout %q, stderr %q)", args, r.Code, cli.ExitUsage, r.Stdout, r.Stderr)
		}
		if len(args) == 0 {
			continue // the command list, as usage
		}
		if bad := clitest.OneLine(r.Stderr); bad != "" || r.Stdout != "" {
			t.Errorf("%v: stderr %q: %s; stdout %q; want one line and nothing on stdout", args, r.Stderr, bad, r.Stdout)
		}
	}
}

// TestMemcompareBudgetSweep runs a small sweep: the unconstrained row,
// one plan per budget (each within its budget, as predicted), checkpointing
// every √n units and every block, and the chart.
func TestMemcompareBudgetSweep(t *testing.T) {
	png := filepath.Join(t.TempDir(), "sweep.png")
	r := clitest.Run(t, nil, "memcompare", "-model", "gpt", "-batch", "4", "-steps", "1", "-budget-sweep", "-points", "3", "-device", "cpu", "-json", "-png", png)
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	var rep sweepReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v: %q", err, r.Stdout)
	}
	var configs []string
	for _, row := range rep.Rows {
		configs = append(configs, row.Config)
		if math.Abs(float64(row.Error)) > 0.05 || !(row.StepMillis > 0) {
			t.Errorf("%s: predicted %d, measured %d, %v ms", row.Config, row.Predicted, row.Peak, row.StepMillis)
		}
		if row.Budget != nil && row.Peak > *row.Budget {
			t.Errorf("%s: peak %d over the budget %d", row.Config, row.Peak, *row.Budget)
		}
	}
	if got, want := strings.Join(configs, ","), "unconstrained,plan,plan,plan,every √n units,every block"; got != want {
		t.Errorf("rows %s, want %s", got, want)
	}
	if b := rep.Rows[1].Budget; b == nil || *b != rep.Minimum || rep.Rows[3].Recomputed != "" {
		t.Errorf("the sweep goes from %v to a plan recomputing %q; want from the minimum %d to nothing", b, rep.Rows[3].Recomputed, rep.Minimum)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("chart: %v", err)
	}
}

// TestMemcompareVerify is the acceptance check the lead runs: the GPT with
// dropout and ResNet-20 (batch normalisation, convolutions) at 60% of
// their unconstrained peak, within the budget, as predicted, bitwise.
func TestMemcompareVerify(t *testing.T) {
	for _, args := range [][]string{
		{"-model", "gpt", "-dropout", "0.1"},
		{"-model", "resnet20", "-batch", "16", "-amp", "bf16"},
	} {
		r := clitest.Run(t, nil, append(append([]string{"memcompare"}, args...), "-mem-budget", "0.6x", "-verify", "3", "-device", "cpu", "-json")...)
		if r.Code != 0 {
			t.Fatalf("%v: exit %d, stderr %q, stdout %q", args, r.Code, r.Stderr, r.Stdout)
		}
		var rep verifyReport
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &rep); err != nil {
			t.Fatalf("stdout is not the JSON report: %v: %q", err, r.Stdout)
		}
		if !rep.Within || !rep.Bitwise || math.Abs(float64(rep.Error)) > 0.05 || rep.Recomputed == "" || !(rep.TimeRatio > 0) {
			t.Errorf("%v: %+v", args, rep)
		}
	}
}

// TestGPUOnlyWithoutGPU: -gpu-only with no GPU is an error that says why
// CUDA is unavailable, not a table of dashes.
func TestGPUOnlyWithoutGPU(t *testing.T) {
	_, cerr := device.Open("cuda")
	if cerr == nil {
		t.Skip("a GPU is present")
	}
	r := clitest.Run(t, nil, "bench", "matmul", "-gpu-only", "-n", "64")
	why := strings.TrimPrefix(cerr.Error(), "device cuda: ")
	if r.Code != cli.ExitError || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, why) || strings.Contains(r.Stdout, " - ") {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and one line with %q", r.Code, r.Stdout, r.Stderr, cli.ExitError, why)
	}
}

// TestMemcompare runs the smallest comparison and checks the report: what
// auto means, and that every column trained.
func TestMemcompare(t *testing.T) {
	png := filepath.Join(t.TempDir(), "chart.png")
	r := clitest.Run(t, nil, "memcompare", "-model", "mlp", "-batch", "16", "-steps", "1", "-device", "cpu", "-json", "-png", png)
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	var rep mcReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v: %q", err, r.Stdout)
	}
	// mlp is 5 layers (3 Linear, 2 ReLU): auto is round(sqrt(5)) = 2.
	if rep.Segments != 2 || len(rep.Results) != 5 || rep.Batch != 16 {
		t.Errorf("report %+v; want 2 segments, 5 columns, batch 16", rep)
	}
	for _, res := range rep.Results {
		if !(res.FinalLoss > 0) || res.Peak.Total == 0 {
			t.Errorf("%s: loss %v, peak %d", res.Config, res.FinalLoss, res.Peak.Total)
		}
		checkAtPeak(t, res)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("chart: %v", err)
	}
}

// checkAtPeak checks what a column says its peak was made of: categories
// that add up to the peak, none above its own peak, and all the parameters
// and optimiser state there (the timed steps come after a first step has
// made the optimiser's moments).
func checkAtPeak(t *testing.T, res mcResult) {
	t.Helper()
	at, pk := res.AtPeak, res.Peak
	parts := []int64{at.Param, at.Grad, at.Optim, at.Activation, at.Cast, at.Recompute, at.Temp, at.Workspace}
	own := []int64{pk.Param, pk.Grad, pk.Optim, pk.Activation, pk.Cast, pk.Recompute, pk.Temp, pk.Workspace}
	var sum int64
	for i, v := range parts {
		sum += v
		if v < 0 || v > own[i] {
			t.Errorf("%s: category %d at the peak holds %d bytes, its own peak is %d", res.Config, i, v, own[i])
		}
	}
	if sum != pk.Total || at.Total != pk.Total {
		t.Errorf("%s: at the peak the categories add up to %d and the total is %d; the peak is %d", res.Config, sum, at.Total, pk.Total)
	}
	if at.Param != pk.Param || at.Optim != pk.Optim {
		t.Errorf("%s: at the peak %+v; want every parameter and moment (peak %+v)", res.Config, at, pk)
	}
}

// TestMemcompareGPT runs the GPT's comparison: each block its own
// checkpointed segment under auto, AMP halving the activations' bytes
// roughly, checkpointing cutting them to the blocks' inputs, and the same
// loss in every column to a few roundings.
func TestMemcompareGPT(t *testing.T) {
	r := clitest.Run(t, nil, "memcompare", "-model", "gpt", "-steps", "1", "-device", "cpu", "-amp", "bf16", "-json")
	if r.Code != 0 {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Stderr)
	}
	var rep mcReport
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v: %q", err, r.Stdout)
	}
	if rep.Model != "gpt" || rep.Segments != 4 || len(rep.Results) != 5 || rep.Batch != 12 {
		t.Fatalf("report %+v; want gpt, 4 segments, 5 columns, batch 12", rep)
	}
	fp32, bf16, ckpt := rep.Results[0], rep.Results[2], rep.Results[4]
	if a, b := float64(bf16.Peak.Activation), float64(fp32.Peak.Activation); !(a < 0.6*b) {
		t.Errorf("bf16 activations %v, fp32 %v; want under 0.6x", a, b)
	}
	if a, b := float64(ckpt.Peak.Activation), float64(fp32.Peak.Activation); !(a < 0.15*b) {
		t.Errorf("bf16+ckpt activations %v, fp32 %v; want under 0.15x", a, b)
	}
	for _, res := range rep.Results {
		if math.Abs(float64(res.FinalLoss-fp32.FinalLoss)) > 0.01 {
			t.Errorf("%s: loss %v, fp32 %v", res.Config, res.FinalLoss, fp32.FinalLoss)
		}
		checkAtPeak(t, res)
	}
}
