// Package cli holds what mixprec's programs share: the common flags of
// docs/design.md §5 as typed flag values checked when parsed, help and exit
// statuses, device selection, the terminal progress bar and the JSON
// summary line.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mixprec/mixprec/cudaops"
	"github.com/mixprec/mixprec/device"
)

// OpenDevice opens the backend -device names (device.Select's choice for
// "auto"). When "auto" falls back to the CPU, note says why CUDA was not
// chosen; it is empty otherwise.
func OpenDevice(name string) (dev device.Device, note string, err error) {
	switch name {
	case "auto", "", "cpu", "cuda":
	default:
		return nil, "", fmt.Errorf("-device %q: want auto, cpu or cuda", name)
	}
	if dev, err = device.Select(name); err != nil {
		return nil, "", err
	}
	if (name == "auto" || name == "") && dev.Name() == "cpu" {
		if _, cerr := device.Open("cuda"); cerr != nil { // backends open once: this is the cached reason
			note = cerr.Error()
		}
	}
	return dev, note, nil
}

// DeviceWarning is what a program should say about dev on standard error
// before it trains: for a CUDA device that opened without cuBLAS, that its
// GEMMs run on mixprec's own, far slower, kernel, and why; "" otherwise.
func DeviceWarning(dev device.Device) string {
	if d, ok := dev.(*cudaops.Device); ok {
		return d.Info().Warning
	}
	return ""
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Progress draws a one-line progress bar on a terminal and nothing
// elsewhere.
type Progress struct {
	w     io.Writer
	on    bool
	total int
	label string
	start time.Time
	last  time.Time
	width int
	drawn bool
}

// NewProgress starts a bar of total steps on w (drawn only when w is a
// terminal).
func NewProgress(w io.Writer, label string, total int) *Progress {
	return &Progress{w: w, on: IsTerminal(w), total: total, label: label, start: time.Now(), width: 30}
}

// Update redraws the bar at step done (at most ten times a second), with
// extra text such as the running loss.
func (p *Progress) Update(done int, extra string) {
	if !p.on {
		return
	}
	now := time.Now()
	if done < p.total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	frac := float64(done) / float64(max(p.total, 1))
	n := int(frac * float64(p.width))
	bar := strings.Repeat("=", n) + strings.Repeat(" ", p.width-n)
	if n < p.width && n > 0 {
		bar = strings.Repeat("=", n-1) + ">" + strings.Repeat(" ", p.width-n)
	}
	fmt.Fprintf(p.w, "\r%s [%s] %d/%d %s\x1b[K", p.label, bar, done, p.total, extra)
	p.drawn = true
}

// Done clears the bar's line.
func (p *Progress) Done() {
	if p.on && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// PeakBytes is the peak_bytes object of the JSON summary.
type PeakBytes struct {
	Total      int64 `json:"total"`
	Param      int64 `json:"param"`
	Grad       int64 `json:"grad"`
	Optim      int64 `json:"optim"`
	Activation int64 `json:"activation"`
	Cast       int64 `json:"cast"`
	Recompute  int64 `json:"recompute"`
	Temp       int64 `json:"temp"`
	Workspace  int64 `json:"workspace"`
}

// Peaks extracts the peak figures of s: each category's own high-water
// mark, and the total's.
func Peaks(s device.MemStats) PeakBytes { return bytesOf(s.Peak) }

// AtPeak extracts what s's peak was made of (MemStats.AtPeak): the
// categories live when the total peaked, which add up to it.
func AtPeak(s device.MemStats) PeakBytes { return bytesOf(s.AtPeak) }

func bytesOf(p device.Usage) PeakBytes {
	return PeakBytes{Total: p.Total, Param: p.Category(device.Param), Grad: p.Category(device.Grad),
		Optim: p.Category(device.Optim), Activation: p.Category(device.Activation), Cast: p.Category(device.Cast),
		Recompute: p.Category(device.Recompute), Temp: p.Category(device.Temp), Workspace: p.Category(device.Workspace)}
}

// Float is a float64 that encodes as JSON null when it is NaN or infinite,
// which strict JSON cannot spell and encoding/json refuses: a diverged
// run's summary must still print. It decodes null as NaN.
type Float float64

// MarshalJSON writes x as encoding/json writes a float64, or null.
func (x Float) MarshalJSON() ([]byte, error) {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads a number, or null as NaN.
func (x *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*x = Float(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*x = Float(f)
	return nil
}

// SchemaVersion is the version of the JSON summary's layout: it always
// encodes as the current one, Schema, so that no program has to set it.
type SchemaVersion int

// Schema is the layout of Summary that this code writes.
const Schema = 1

// MarshalJSON writes Schema.
func (SchemaVersion) MarshalJSON() ([]byte, error) { return []byte(strconv.Itoa(Schema)), nil }

// Summary is the JSON object a training program prints last with -json.
// Every float is a Float: a value that is not finite (the loss of a
// diverged run), or one that was not measured (the training loss of an
// -eval run), is null.
type Summary struct {
	Schema         SchemaVersion `json:"schema"`
	Model          string        `json:"model"`
	Data           string        `json:"data,omitempty"`
	Device         string        `json:"device"`
	AMP            string        `json:"amp"`
	Checkpoint     string        `json:"checkpoint"`
	Epochs         int           `json:"epochs"`
	Steps          int           `json:"steps"`
	TrainLoss      Float         `json:"train_loss"`
	TestAccuracy   Float         `json:"test_accuracy"`
	SamplesPerSec  Float         `json:"samples_per_sec"`
	MsPerStep      Float         `json:"ms_per_step"`
	WallSeconds    Float         `json:"wall_seconds"`
	SkippedSteps   int           `json:"skipped_steps"`
	FinalScale     Float         `json:"final_scale"`
	PeakBytes      PeakBytes     `json:"peak_bytes"`
	AtPeakBytes    PeakBytes     `json:"at_peak_bytes"` // what peak_bytes.total was made of: the categories live at that moment
	Seed           uint64        `json:"seed"`
	Batch          int           `json:"batch"`
	LR             Float         `json:"lr"`
	Optimizer      string        `json:"optimizer"`
	Diverged       bool          `json:"diverged"`                // the loss became NaN or infinite and the run stopped
	Interrupted    bool          `json:"interrupted,omitempty"`   // a signal stopped the run between steps (test_accuracy is then null)
	DivergedStep   int           `json:"diverged_step,omitempty"` // the 1-based step whose loss it was
	DeviceFallback string        `json:"device_note,omitempty"`
	WorldSize      int           `json:"world_size,omitempty"` // ranks of a data-parallel run; absent for one process
	Planned                      // -mem-budget's plan: null without one
}

// PrintJSON writes s as one line.
func PrintJSON(w io.Writer, s any) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
