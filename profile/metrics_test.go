package profile_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/profile"
)

// TestMetricsLines writes a run's metrics and reads them back: the run
// line first, one line per step and per evaluation in order, the fields
// the README lists, null for a loss that is not finite, and memory by
// category.
func TestMetricsLines(t *testing.T) {
	dev := cpu.New()
	buf := dev.Alloc(dtype.F32, 1000, device.Activation)
	var out bytes.Buffer
	m := profile.NewMetrics(&out, profile.RunInfo{Label: "f16", Model: "mlp", AMP: "f16", Batch: 32, Seed: 1})
	const steps = 7
	for i := 1; i <= steps; i++ {
		loss := profile.Float(1 / float64(i))
		if i == steps {
			loss = profile.Float(math.NaN())
		}
		norm := profile.Float(float64(i))
		live, peak := profile.Memory(dev.MemStats())
		m.Step(profile.StepRecord{Step: i, Epoch: 1 + i/4, Loss: loss, LR: 0.1, LossScale: 65536, Skipped: i == 3,
			GradNorm: &norm, Samples: 32, LiveBytes: live, PeakBytes: peak})
		if i%4 == 0 {
			m.Eval(profile.EvalRecord{Step: i, Epoch: i / 4, TestAccuracy: 0.5})
		}
	}
	dev.Free(buf)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	var kinds []string
	var stepLines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		kinds = append(kinds, line["kind"].(string))
		if line["kind"] == "step" {
			stepLines = append(stepLines, line)
		}
	}
	if got, want := strings.Join(kinds, " "), "run step step step step eval step step step"; got != want {
		t.Errorf("kinds %q, want %q", got, want)
	}
	if len(stepLines) != steps {
		t.Fatalf("%d step lines, want %d", len(stepLines), steps)
	}
	for i, l := range stepLines {
		for _, k := range []string{"step", "epoch", "loss", "lr", "loss_scale", "skipped", "grad_norm", "samples_per_sec", "live_bytes", "peak_bytes"} {
			if _, ok := l[k]; !ok {
				t.Errorf("step line %d lacks %s: %v", i+1, k, l)
			}
		}
		if l["step"] != float64(i+1) {
			t.Errorf("line %d: step %v", i+1, l["step"])
		}
		if sps, _ := l["samples_per_sec"].(float64); sps <= 0 {
			t.Errorf("line %d: samples_per_sec %v, want > 0", i+1, l["samples_per_sec"])
		}
		live := l["live_bytes"].(map[string]any)
		if live["activation"] != float64(4000) || live["total"] != float64(4000) {
			t.Errorf("line %d: live bytes %v, want 4000 activation bytes, 4000 in total", i+1, live)
		}
	}
	if stepLines[steps-1]["loss"] != nil {
		t.Errorf("a NaN loss was written as %v, want null", stepLines[steps-1]["loss"])
	}
	if stepLines[2]["skipped"] != true {
		t.Errorf("step 3: skipped %v, want true", stepLines[2]["skipped"])
	}
	var back profile.StepRecord
	last := strings.Split(strings.TrimSpace(text), "\n")
	if err := json.Unmarshal([]byte(last[len(last)-1]), &back); err != nil || !math.IsNaN(float64(back.Loss)) {
		t.Errorf("null read back as %v (%v), want NaN", back.Loss, err)
	}
}

type failing struct{ n int }

func (f *failing) Write(b []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

// TestMetricsError checks that the first write error is kept and nothing
// more is attempted.
func TestMetricsError(t *testing.T) {
	w := &failing{}
	m := profile.NewMetrics(w, profile.RunInfo{})
	m.Step(profile.StepRecord{Step: 1})
	m.Eval(profile.EvalRecord{})
	if err := m.Err(); err == nil || !strings.Contains(err.Error(), "disk full") || w.n != 1 {
		t.Errorf("Err() = %v after %d writes; want the first error, one write", err, w.n)
	}
}
