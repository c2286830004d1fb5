package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
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
	StepMillis float64         `json:"step_ms"`
	FinalLoss  float64         `json:"final_loss"`
	Skipped    int             `json:"skipped_steps"`
	stats      device.MemStats `json:"-"`
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
	fs := flag.NewFlagSet("memcompare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "wide", "model: "+strings.Join(models.Names(), ", "))
	batch := fs.Int("batch", 0, "batch size (0: the model's workload batch)")
	steps := fs.Int("steps", 5, "timed training steps per configuration, after one warm-up step")
	segFlag := fs.String("checkpoint", "auto", "segments for the checkpointed columns: auto (about sqrt of the layers) or N")
	low := fs.String("amp", "f16", "low dtype of the AMP + checkpointing column: f16 or bf16")
	devName := fs.String("device", "auto", "auto, cpu or cuda")
	png := fs.String("png", "", "also draw the table as a grouped bar chart into this PNG file")
	asJSON := fs.Bool("json", false, "print the results as one JSON object")
	seed := fs.Uint64("seed", 0, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	spec, err := models.Lookup(*model)
	if err != nil {
		return err
	}
	if *batch == 0 {
		*batch = spec.Batch
	}
	if *batch < 1 || *steps < 1 {
		return fmt.Errorf("-batch and -steps must be positive")
	}
	f := cli.Flags{Checkpoint: *segFlag, AMP: *low}
	segments, err := f.Segments()
	if err != nil {
		return err
	}
	if segments == -1 {
		segments = 0 // CheckpointSequential's default
	}
	lowType, on, err := f.AMPType()
	if err != nil || !on {
		return fmt.Errorf("-amp %q: want f16 or bf16", *low)
	}
	dev, note, err := cli.OpenDevice(*devName)
	if err != nil {
		return err
	}
	configs := []mcConfig{
		{"fp32", dtype.F32, false},
		{"f16", dtype.F16, false},
		{"bf16", dtype.BF16, false},
		{"fp32+ckpt", dtype.F32, true},
		{lowType.String() + "+ckpt", lowType, true},
	}
	rep := mcReport{Model: spec.Name, Data: "synthetic", Device: dev.Name(), Batch: *batch, Steps: *steps}
	layers := len(spec.Build(rand.New(rand.NewPCG(0, 0))).Layers)
	rep.Segments = len(nn.Split(layers, segments)) - 1
	if !*asJSON {
		fmt.Fprintf(stdout, "memcompare: model %s, batch %d, %d timed steps, device %s, synthetic inputs (memory and time do not depend on the values)\n",
			spec.Name, *batch, *steps, dev.Name())
		if note != "" {
			fmt.Fprintf(stdout, "(CUDA not used: %s)\n", note)
		}
	}
	for _, c := range configs {
		bar := cli.NewProgress(stderr, "memcompare "+c.Name, *steps+1)
		r, err := measure(dev, spec, c, *batch, *steps, *seed, segments, bar)
		bar.Done()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		rep.Results = append(rep.Results, r)
	}
	if *png != "" {
		if err := drawChart(*png, rep); err != nil {
			return err
		}
	}
	if *asJSON {
		return cli.PrintJSON(stdout, rep)
	}
	printTable(stdout, rep)
	if *png != "" {
		fmt.Fprintf(stdout, "chart written to %s\n", *png)
	}
	return nil
}

// measure trains a fresh copy of the model for one warm-up step (which
// allocates gradients and optimiser state) and then steps timed steps,
// recording peak memory over the timed steps only.
func measure(dev device.Device, spec models.Spec, c mcConfig, batch, steps int, seed uint64, segments int, bar *cli.Progress) (mcResult, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	net := spec.Build(rng)
	nn.To(net, dev)
	defer nn.Release(net)
	opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
	defer optim.Release(opt)
	scaler := amp.NewGradScaler(amp.For(c.Low))
	x := tensor.NormalHost(rng, 0, 1, append([]int{batch}, spec.Input...)...)
	y := make([]int32, batch)
	for i := range y {
		y[i] = int32(rng.IntN(spec.Classes))
	}
	step := func() (float64, error) {
		g := autograd.NewGraph(dev)
		defer g.Release()
		if c.Low != dtype.F32 {
			amp.Autocast(g, c.Low)
		}
		in := g.Input(x)
		var logits *autograd.Var
		if c.Checkpoint {
			logits = nn.CheckpointSequential(g, net.Layers, segments, in)
		} else {
			logits = net.Forward(g, in)
		}
		loss := nn.CrossEntropy(g, logits, y)
		g.Backward(scaler.Scale(g, loss))
		if _, err := scaler.Step(opt); err != nil {
			return 0, err
		}
		if err := scaler.Update(); err != nil {
			return 0, err
		}
		opt.ZeroGrad()
		return float64(loss.Value.Item()), nil
	}
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
		l, err := step()
		if err != nil {
			return mcResult{}, err
		}
		if err := dev.Sync(); err != nil {
			return mcResult{}, err
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1000)
		loss = l
		bar.Update(i+2, fmt.Sprintf("%.1f ms/step", times[len(times)-1]))
	}
	st := dev.MemStats()
	slices.Sort(times)
	return mcResult{Config: c.Name, Peak: cli.Peaks(st), StepMillis: times[len(times)/2], FinalLoss: loss,
		Skipped: scaler.Skipped(), stats: st}, nil
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
	for _, row := range rows {
		fmt.Fprintf(w, "%-12s", row.name)
		for _, r := range rep.Results {
			v := row.get(r.Peak)
			fmt.Fprintf(w, "%*s", col, mib(v)+ratio(float64(v), float64(row.get(base.Peak))))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%-12s", "step time")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, fmt.Sprintf("%.1f ms", r.StepMillis)+ratio(r.StepMillis, base.StepMillis))
	}
	fmt.Fprintf(w, "\n%-12s", "final loss")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, fmt.Sprintf("%.4f", r.FinalLoss))
	}
	fmt.Fprintf(w, "\n%-12s", "skipped")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%*s", col, fmt.Sprintf("%d of %d", r.Skipped, rep.Steps+1))
	}
	fmt.Fprintf(w, "\n\nratios are to the fp32 column; checkpointed columns use %d segments; the loss is on synthetic data after %d steps\n", rep.Segments, rep.Steps+1)
}
