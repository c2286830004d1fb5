// Package cli holds what mixprec's programs share: the common flags of
// DESIGN.md §5, device selection, the terminal progress bar and the JSON
// summary line.
package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// Flags are the options every training program takes.
type Flags struct {
	Model      string
	Epochs     int
	Batch      int
	LR         float64
	Seed       uint64
	AMP        string
	Checkpoint string
	Device     string
	Data       string
	MaxSteps   int
	JSON       bool
	Optimizer  string
}

// Register defines the flags on fs with d's values as defaults.
func (f *Flags) Register(fs *flag.FlagSet, d Flags) {
	fs.StringVar(&f.Model, "model", d.Model, "model to train")
	fs.IntVar(&f.Epochs, "epochs", d.Epochs, "passes over the training set")
	fs.IntVar(&f.Batch, "batch", d.Batch, "mini-batch size")
	fs.Float64Var(&f.LR, "lr", d.LR, "learning rate (0: the model's default)")
	fs.Uint64Var(&f.Seed, "seed", d.Seed, "random seed for initialisation, shuffling and dropout")
	fs.StringVar(&f.AMP, "amp", orDefault(d.AMP, "off"), "mixed precision: off, f16 or bf16")
	fs.StringVar(&f.Checkpoint, "checkpoint", orDefault(d.Checkpoint, "off"), "gradient checkpointing: off, N segments, or auto (about sqrt of the layers)")
	fs.StringVar(&f.Device, "device", orDefault(d.Device, "auto"), "auto, cpu or cuda")
	fs.StringVar(&f.Data, "data", d.Data, "data directory (default $MIXPREC_DATA, else ./data)")
	fs.IntVar(&f.MaxSteps, "max-steps", d.MaxSteps, "stop after this many training steps (0: no limit)")
	fs.BoolVar(&f.JSON, "json", d.JSON, "print a JSON summary as the last line")
	fs.StringVar(&f.Optimizer, "optim", d.Optimizer, "optimiser: sgd, adam or adamw (default: the model's)")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// AMPType parses -amp: the autocast dtype, and false for "off".
func (f *Flags) AMPType() (dtype.DType, bool, error) {
	switch strings.ToLower(f.AMP) {
	case "off", "", "f32", "fp32":
		return dtype.F32, false, nil
	case "f16", "fp16":
		return dtype.F16, true, nil
	case "bf16":
		return dtype.BF16, true, nil
	}
	return 0, false, fmt.Errorf("-amp %q: want off, f16 or bf16", f.AMP)
}

// Segments parses -checkpoint: 0 for off, -1 for auto, else N.
func (f *Flags) Segments() (int, error) {
	switch strings.ToLower(f.Checkpoint) {
	case "off", "", "0":
		return 0, nil
	case "auto", "sqrt":
		return -1, nil
	}
	n, err := strconv.Atoi(f.Checkpoint)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("-checkpoint %q: want off, auto or a positive number of segments", f.Checkpoint)
	}
	return n, nil
}

// Validate checks the numeric flags.
func (f *Flags) Validate() error {
	switch {
	case f.Epochs < 1:
		return fmt.Errorf("-epochs %d: want at least 1", f.Epochs)
	case f.Batch < 1:
		return fmt.Errorf("-batch %d: want at least 1", f.Batch)
	case f.LR < 0:
		return fmt.Errorf("-lr %v: want a positive learning rate", f.LR)
	case f.MaxSteps < 0:
		return fmt.Errorf("-max-steps %d: want 0 or more", f.MaxSteps)
	}
	if _, _, err := f.AMPType(); err != nil {
		return err
	}
	_, err := f.Segments()
	return err
}

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

// Peaks extracts the peak figures of s.
func Peaks(s device.MemStats) PeakBytes {
	p := s.Peak
	return PeakBytes{Total: p.Total, Param: p.Category(device.Param), Grad: p.Category(device.Grad),
		Optim: p.Category(device.Optim), Activation: p.Category(device.Activation), Cast: p.Category(device.Cast),
		Recompute: p.Category(device.Recompute), Temp: p.Category(device.Temp), Workspace: p.Category(device.Workspace)}
}

// Summary is the JSON object a training program prints last with -json.
type Summary struct {
	Model          string    `json:"model"`
	Data           string    `json:"data,omitempty"`
	Device         string    `json:"device"`
	AMP            string    `json:"amp"`
	Checkpoint     string    `json:"checkpoint"`
	Epochs         int       `json:"epochs"`
	Steps          int       `json:"steps"`
	TrainLoss      float64   `json:"train_loss"`
	TestAccuracy   float64   `json:"test_accuracy"`
	SamplesPerSec  float64   `json:"samples_per_sec"`
	MsPerStep      float64   `json:"ms_per_step"`
	WallSeconds    float64   `json:"wall_seconds"`
	SkippedSteps   int       `json:"skipped_steps"`
	FinalScale     float64   `json:"final_scale"`
	PeakBytes      PeakBytes `json:"peak_bytes"`
	Seed           uint64    `json:"seed"`
	Batch          int       `json:"batch"`
	LR             float64   `json:"lr"`
	Optimizer      string    `json:"optimizer"`
	DeviceFallback string    `json:"device_note,omitempty"`
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
