package profile

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/mixprec/mixprec/device"
)

// Metrics writes a training run's metrics as JSON lines: one "run" line
// first (what the run is, and the label a plot's legend gives it), then one
// "step" line per training step and one "eval" line per evaluation. Each
// line is a complete JSON object with a "kind"; the README gives the
// schema. Numbers that are not finite (a diverged run's loss) are null.
type Metrics struct {
	w    io.Writer
	now  func() time.Time
	last time.Time // the previous line: a step's rate is measured from it
	err  error
}

// NewMetrics returns a writer of metrics lines to w, starting with run's
// line.
func NewMetrics(w io.Writer, run RunInfo) *Metrics {
	m := &Metrics{w: w, now: time.Now}
	run.Kind = "run"
	m.write(run)
	m.last = m.now()
	return m
}

// RunInfo is the first line of a metrics file.
type RunInfo struct {
	Kind string `json:"kind"` // "run"
	// Label names the run in a plot's legend, e.g. "f16" (the file's
	// name when empty).
	Label      string `json:"label,omitempty"`
	Program    string `json:"program,omitempty"`
	Model      string `json:"model,omitempty"`
	AMP        string `json:"amp,omitempty"`
	Checkpoint string `json:"checkpoint,omitempty"`
	Device     string `json:"device,omitempty"`
	Batch      int    `json:"batch,omitempty"`
	Seed       uint64 `json:"seed"`
}

// StepRecord is one training step's line.
type StepRecord struct {
	Kind      string  `json:"kind"`  // "step"
	Step      int     `json:"step"`  // 1-based, over the whole run
	Epoch     int     `json:"epoch"` // 1-based
	Loss      Float   `json:"loss"`
	LR        float64 `json:"lr"`
	LossScale Float   `json:"loss_scale"` // 1 when no scaler scales the loss
	Skipped   bool    `json:"skipped"`    // the scaler skipped the optimiser's step (Inf/NaN gradients)
	// GradNorm is the total gradient norm before clipping, when the run
	// clips gradients.
	GradNorm *Float `json:"grad_norm,omitempty"`
	// SamplesPerSec is Samples over the time since the previous line
	// (the data wait included); Step fills it when it is zero.
	SamplesPerSec Float `json:"samples_per_sec"`
	Samples       int   `json:"samples"`
	// LiveBytes and PeakBytes are the device's bytes in use at the end of
	// the step and their high-water mark (since the run began, or since
	// the program last reset it, after each evaluation), by category and
	// in total; see Memory.
	LiveBytes map[string]int64 `json:"live_bytes"`
	PeakBytes map[string]int64 `json:"peak_bytes"`
}

// EvalRecord is one evaluation's line.
type EvalRecord struct {
	Kind         string `json:"kind"` // "eval"
	Step         int    `json:"step"` // steps taken when it ran
	Epoch        int    `json:"epoch"`
	TestAccuracy Float  `json:"test_accuracy"`
}

// Memory returns s's live and peak bytes by category name, and "total".
func Memory(s device.MemStats) (live, peak map[string]int64) {
	by := func(u device.Usage) map[string]int64 {
		m := make(map[string]int64, device.NumCategories+1)
		m["total"] = u.Total
		for c := device.Category(0); c < device.NumCategories; c++ {
			m[c.String()] = u.Category(c)
		}
		return m
	}
	return by(s.Live), by(s.Peak)
}

// Step writes r, with its kind and (unless given) its rate filled in.
func (m *Metrics) Step(r StepRecord) {
	now := m.now()
	r.Kind = "step"
	if dt := now.Sub(m.last).Seconds(); dt > 0 && r.SamplesPerSec == 0 {
		r.SamplesPerSec = Float(float64(r.Samples) / dt)
	}
	m.write(r)
	m.last = now
}

// Eval writes r. The next step's rate is measured from here, leaving the
// evaluation out.
func (m *Metrics) Eval(r EvalRecord) {
	r.Kind = "eval"
	m.write(r)
	m.last = m.now()
}

func (m *Metrics) write(v any) {
	if m.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		_, err = m.w.Write(append(b, '\n'))
	}
	if err != nil {
		m.err = fmt.Errorf("writing metrics: %w", err)
	}
}

// Err is the first error writing a line met; later lines are not written.
func (m *Metrics) Err() error { return m.err }

// Float is a float64 that encodes as JSON null when it is NaN or infinite,
// which JSON cannot spell, and decodes null as NaN.
type Float float64

// MarshalJSON writes x as a JSON number, or null.
func (x Float) MarshalJSON() ([]byte, error) {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

// UnmarshalJSON reads a number, or null as NaN.
func (x *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*x = Float(math.NaN())
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("profile.Float: %q is not a number", b)
	}
	*x = Float(f)
	return nil
}
