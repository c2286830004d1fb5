package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/tensor"
)

// mcConfig is one column of the comparison.
type mcConfig struct {
	Name       string
	Low        dtype.DType // F32 for no autocast
	Checkpoint bool
}

// mcResult is what one configuration measured.
type mcResult struct {
	Config     string          `json:"config"`
	Peak       cli.PeakBytes   `json:"peak_bytes"`
	AtPeak     cli.PeakBytes   `json:"at_peak_bytes"` // what the total's peak was made of
	StepMillis cli.Float       `json:"step_ms"`
	FinalLoss  cli.Float       `json:"final_loss"` // null when not finite
	Skipped    int             `json:"skipped_steps"`
	Profile    *profile.Report `json:"profile,omitempty"` // with -profile: where the timed steps' time went
	stats      device.MemStats `json:"-"`
	prof       *profile.Profiler
}

type mcReport struct {
	Model    string     `json:"model"`
	Data     string     `json:"data"`
	Device   string     `json:"device"`
	Batch    int        `json:"batch"`
	Steps    int        `json:"steps"`
	Segments int        `json:"checkpoint_segments"`
	Results  []mcResult `json:"results"`
}

func cmdMemcompare(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("mixprec memcompare", "Trains one model on synthetic inputs under FP32, F16, BF16, FP32 + checkpointing\n"+
		"and AMP + checkpointing, and compares peak memory per category, step time and loss.")
	model := "wide"
	fs.Var(cli.NewChoice(&model, append(models.Names(), "gpt")...), "model", "the network to measure (gpt: the character GPT of examples/gpt at its default recipe)")
	var batch, steps int
	cli.IntVar(fs, &batch, "batch", 0, 1, cli.MaxBatch, "batch size")
	fs.Lookup("batch").Value = cli.WithDefaultText(fs.Lookup("batch").Value, batchDefaults())
	cli.IntVar(fs, &steps, "steps", 5, 1, 0, "timed training steps per configuration, after one warm-up step")
	ckpt := cli.CheckpointAuto
	fs.Var(notOff{&ckpt}, "checkpoint", "segments for the checkpointed columns: auto (about the square root of the number of layers; the gpt's blocks one each) or N")
	low := cli.AMPTo(dtype.F16)
	fs.Var(lowAMP{&low}, "amp", "low dtype of the AMP + checkpointing column; with -budget-sweep or -verify, the precision\n(default off there)")
	devName := "auto"
	fs.Var(cli.NewChoice(&devName, "auto", "cpu", "cuda"), "device", "backend: auto takes CUDA when a GPU opens, else the CPU")
	png := fs.String("png", "", "also draw the table as a grouped bar chart into the PNG `file`")
	asJSON := fs.Bool("json", false, "print the results as one JSON object")
	var seed uint64
	cli.SeedVar(fs, &seed, 0, "random seed")
	prof := fs.Bool("profile", false, "time every op by phase, the optimiser and the host's overhead in each configuration's\ntimed steps; print a table per configuration on standard error (and a \"profile\" object\nper configuration with -json)")
	var bf budgetFlags
	bf.register(fs)
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	budgetMode := bf.sweep || bf.verify > 0
	if err := bf.check(fs, model, low, *prof, *png); err != nil {
		return err
	}
	if budgetMode && !isSet(fs, "amp") {
		low = cli.AMPOff
	}
	if *png != "" {
		// Find out now, not after minutes of measuring, that the chart
		// cannot be written.
		if fi, err := os.Stat(filepath.Dir(*png)); err != nil || !fi.IsDir() {
			return cli.Usagef("-png %s: no directory %s to write it in", *png, filepath.Dir(*png))
		}
	}
	var w workload
	if model == "gpt" {
		gw := newGPTWorkload(batch, isSet(fs, "batch"), ckpt, seed)
		gw.cfg.Dropout = float32(bf.dropout)
		w = gw
	} else {
		spec, err := models.Lookup(model)
		if err != nil {
			return err
		}
		if !isSet(fs, "batch") {
			batch = spec.Batch
		}
		layers := len(spec.Build(rand.New(rand.NewPCG(0, 0))).Layers)
		w = &classifierWorkload{spec: spec, batch: batch, seed: seed, layers: layers, segments: ckpt.Segments(nn.DefaultSegments(layers))}
	}
	lowType := low.DType()
	dev, note, err := cli.OpenDevice(devName)
	if err != nil {
		return err
	}
	if budgetMode {
		return budgetModes(w.(budgeted), model, low, bf, steps, *png, *asJSON, dev, note, stdout, stderr)
	}
	if w := cli.DeviceWarning(dev); w != "" {
		fmt.Fprintf(stderr, "mixprec memcompare: %s: %s\n", dev.Name(), w)
	}
	return compare(dev, note, w, model, lowType, steps, *prof, *png, *asJSON, stdout, stderr)
}

// compare measures the five configurations and reports them.
func compare(dev device.Device, note string, w workload, model string, lowType dtype.DType, steps int, prof bool, png string, asJSON bool,
	stdout, stderr io.Writer) error {
	configs := []mcConfig{
		{"fp32", dtype.F32, false},
		{"f16", dtype.F16, false},
		{"bf16", dtype.BF16, false},
		{"fp32+ckpt", dtype.F32, true},
		{lowType.String() + "+ckpt", lowType, true},
	}
	rep := mcReport{Model: model, Data: "synthetic", Device: dev.Name(), Batch: w.batchSize(), Steps: steps, Segments: w.segmentCount()}
	if !asJSON {
		fmt.Fprintf(stdout, "memcompare: model %s, batch %d, %d timed steps, device %s, synthetic inputs (memory and time do not depend on the values)\n",
			model, w.batchSize(), steps, dev.Name())
		if note != "" {
			fmt.Fprintf(stdout, "(CUDA not used: %s)\n", note)
		}
	}
	for _, c := range configs {
		bar := cli.NewProgress(stderr, "memcompare "+c.Name, steps+1)
		r, err := measure(dev, w, c, steps, prof, bar)
		bar.Done()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		rep.Results = append(rep.Results, r)
	}
	if png != "" {
		if err := drawChart(png, rep); err != nil {
			return err
		}
	}
	for _, r := range rep.Results {
		if r.prof != nil {
			fmt.Fprintf(stderr, "\n%s:\n", r.Config)
			if err := r.prof.Table(stderr); err != nil {
				return err
			}
		}
	}
	if asJSON {
		return cli.PrintJSON(stdout, rep)
	}
	printTable(stdout, rep)
	if png != "" {
		fmt.Fprintf(stdout, "chart written to %s\n", png)
	}
	return nil
}

// isSet reports whether the command line gave the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func batchDefaults() string {
	var each []string
	for _, s := range models.Specs() {
		each = append(each, fmt.Sprintf("%s %d", s.Name, s.Batch))
	}
	return "per model: " + strings.Join(each, ", ")
}

// notOff is memcompare's -checkpoint: its checkpointed columns need
// segments, so off (which used to mean auto here) is refused.
type notOff struct{ *cli.Checkpoint }

func (v notOff) Set(s string) error {
	var c cli.Checkpoint
	if err := c.Set(s); err != nil {
		return err
	}
	if !c.On() {
		return errors.New("the checkpointed columns need auto or a number of segments >= 1")
	}
	*v.Checkpoint = c
	return nil
}

func (notOff) Arg() string { return "auto|N" }

// lowAMP is memcompare's -amp: the dtype of its AMP + checkpointing
// column, which off cannot be (refused after parsing), or the precision
// of -budget-sweep and -verify.
type lowAMP struct{ *cli.AMP }

func (v lowAMP) Set(s string) error {
	var a cli.AMP
	if err := a.Set(s); err != nil {
		return errors.New("want f16 or bf16 (or, for -budget-sweep and -verify, off)")
	}
	*v.AMP = a
	return nil
}

func (lowAMP) Arg() string { return "f16|bf16|off" }

// workload is what memcompare measures: a model it builds afresh for each
// configuration, with its optimiser and a training step on synthetic data.
type workload interface {
	batchSize() int
	segmentCount() int // the checkpointed columns' segments
	// start builds the model on dev for configuration c; step takes one
	// training step and returns its loss; release frees the model.
	start(dev device.Device, c mcConfig, prof *profile.Profiler) (step func() (float64, error), scaler *amp.GradScaler, release func())
}

// classifierWorkload is a models.Spec trained by train.Step with SGD.
type classifierWorkload struct {
	spec                    models.Spec
	batch, layers, segments int
	seed                    uint64
}

func (w *classifierWorkload) batchSize() int    { return w.batch }
func (w *classifierWorkload) segmentCount() int { return len(nn.Split(w.layers, w.segments)) - 1 }

func (w *classifierWorkload) start(dev device.Device, c mcConfig, prof *profile.Profiler) (func() (float64, error), *amp.GradScaler, func()) {
	rng := rand.New(rand.NewPCG(w.seed, 1))
	net := w.spec.Build(rng)
	nn.To(net, dev)
	opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
	scaler := amp.NewGradScaler(amp.For(c.Low))
	x := tensor.NormalHost(rng, 0, 1, append([]int{w.batch}, w.spec.Input...)...)
	y := make([]int32, w.batch)
	for i := range y {
		y[i] = int32(rng.IntN(w.spec.Classes))
	}
	st := train.Step{Dev: dev, Net: net, Opt: opt, Scaler: scaler, Low: c.Low, Prof: prof}
	if c.Checkpoint {
		st.Segments = w.segments
	}
	return func() (float64, error) { return st.Run(x, y) }, scaler, func() { optim.Release(opt); nn.Release(net) }
}

// measure trains a fresh copy of the model for one warm-up step (which
// allocates gradients and optimiser state) and then steps timed steps,
// recording peak memory over the timed steps only.
func measure(dev device.Device, w workload, c mcConfig, steps int, prof bool, bar *cli.Progress) (mcResult, error) {
	var p *profile.Profiler
	if prof {
		p = profile.New(dev) // it times only the steps between StepStart and StepEnd
		defer p.Close()
	}
	step, scaler, release := w.start(dev, c, p)
	defer release()
	if _, err := step(); err != nil {
		return mcResult{}, err
	}
	bar.Update(1, "warm-up")
	if err := dev.Sync(); err != nil {
		return mcResult{}, err
	}
	dev.ResetPeak()
	var times []float64
	var loss float64
	for i := range steps {
		t0 := time.Now()
		p.StepStart()
		l, err := step()
		if err != nil {
			return mcResult{}, err
		}
		if err := dev.Sync(); err != nil {
			return mcResult{}, err
		}
		p.StepEnd()
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
		loss = l
		bar.Update(i+2, fmt.Sprintf("%.1f ms/step", times[len(times)-1]))
	}
	ms := dev.MemStats()
	slices.Sort(times)
	r := mcResult{Config: c.Name, Peak: cli.Peaks(ms), AtPeak: cli.AtPeak(ms), StepMillis: cli.Float(times[len(times)/2]), FinalLoss: cli.Float(loss),
		Skipped: scaler.Skipped(), stats: ms}
	if prof {
		rep := p.Report()
		r.Profile, r.prof = &rep, p
	}
	return r, nil
}

// rows are the table's memory rows, in order.
var rows = []struct {
	name string
	get  func(cli.PeakBytes) int64
}{
	{"param", func(p cli.PeakBytes) int64 { return p.Param }},
	{"grad", func(p cli.PeakBytes) int64 { return p.Grad }},
	{"optim", func(p cli.PeakBytes) int64 { return p.Optim }},
	{"activation", func(p cli.PeakBytes) int64 { return p.Activation }},
	{"cast", func(p cli.PeakBytes) int64 { return p.Cast }},
	{"recompute", func(p cli.PeakBytes) int64 { return p.Recompute }},
	{"temp", func(p cli.PeakBytes) int64 { return p.Temp }},
	{"total", func(p cli.PeakBytes) int64 { return p.Total }},
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func ratio(v, base float64) string {
	if base == 0 {
		if v == 0 {
			return ""
		}
		return " (new)"
	}
	return fmt.Sprintf(" (%.2fx)", v/base)
}

// printTable writes the peak bytes per category, the step time and the
// loss, one column per configuration with its ratio to FP32.
func printTable(w io.Writer, rep mcReport) {
	const col = 24
	fmt.Fprintf(w, "\n%-12s", "peak")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, r.Config)
	}
	fmt.Fprintln(w)
	base := rep.Results[0]
	block := func(of func(mcResult) cli.PeakBytes) {
		for _, row := range rows {
			fmt.Fprintf(w, "%-12s", row.name)
			for _, r := range rep.Results {
				v := row.get(of(r))
				fmt.Fprintf(w, "%*s", col, mib(v)+ratio(float64(v), float64(row.get(of(base)))))
			}
			fmt.Fprintln(w)
		}
	}
	block(func(r mcResult) cli.PeakBytes { return r.Peak })
	fmt.Fprintln(w, "at the total's peak (what it is made of)")
	block(func(r mcResult) cli.PeakBytes { return r.AtPeak })
	fmt.Fprintf(w, "%-12s", "step time")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, fmt.Sprintf("%.1f ms", r.StepMillis)+ratio(float64(r.StepMillis), float64(base.StepMillis)))
	}
	fmt.Fprintf(w, "\n%-12s", "final loss")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, fmt.Sprintf("%.4f", r.FinalLoss))
	}
	fmt.Fprintf(w, "\n%-12s", "skipped")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, fmt.Sprintf("%d of %d", r.Skipped, rep.Steps+1))
	}
	fmt.Fprintf(w, "\n\nratios are to the fp32 column; checkpointed columns use %d segments; the loss is on synthetic data after %d steps;\n"+
		"the first rows are each category's own peak, the second its bytes when the total peaked\n", rep.Segments, rep.Steps+1)
}
