package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/mixprec/mixprec/atomicfile"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/profile"
)

// metricsRun is what plot reads of one -metrics file.
type metricsRun struct {
	label string
	steps []profile.StepRecord
	evals []profile.EvalRecord
}

const plotUsage = "usage: mixprec plot METRICS.jsonl [MORE.jsonl ...] -o FILE.png"

func cmdPlot(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mixprec plot", flag.ContinueOnError)
	var out string
	fs.Var(cli.NewOutputFile(&out), "o", "the PNG `FILE` to write")
	title := fs.String("title", "", "a title above the panels (default: the runs' model)")
	smooth := fs.Float64("smooth", 0.9, "weight of the loss curve's exponential moving average (0: the raw loss)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "%s\n\nDraws the metrics files that -metrics wrote (examples/mnist, examples/cifar), one\n"+
			"colour per run, into one PNG: training loss, test accuracy, loss scale and peak\n"+
			"memory against the step. The legend names each run by its file's label (the amp\n"+
			"mode), or by the file's name.\n\nflags:\n", plotUsage)
		cli.PrintFlags(w, fs)
	}
	// The files may come before or after the flags.
	fs.SetOutput(io.Discard)
	var files []string
	for rest := args; ; {
		err := fs.Parse(rest)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return flag.ErrHelp
		}
		if err != nil {
			return &cli.UsageError{Err: err}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(files) == 0:
		return cli.Usagef("no metrics files (%s)", plotUsage)
	case out == "":
		return cli.Usagef("-o FILE.png is required (%s)", plotUsage)
	case !strings.EqualFold(filepath.Ext(out), ".png"):
		return cli.Usagef("-o %s: want a .png file", out)
	case *smooth < 0 || *smooth >= 1 || math.IsNaN(*smooth):
		return cli.Usagef("-smooth %v: want a weight from 0 up to, not including, 1", *smooth)
	}
	var runs []metricsRun
	models := map[string]bool{}
	for _, f := range files {
		r, model, err := readMetrics(f)
		if err != nil {
			return err
		}
		runs = append(runs, r)
		if model != "" {
			models[model] = true
		}
	}
	nameRuns(runs, files)
	if *title == "" {
		var ms []string
		for m := range models {
			ms = append(ms, m)
		}
		if len(ms) == 1 {
			*title = "mixprec: " + ms[0]
		} else {
			*title = "mixprec"
		}
	}
	if err := drawMetrics(out, *title, runs, *smooth); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d runs drawn into %s\n", len(runs), out)
	return nil
}

// readMetrics reads a -metrics file: its run line, steps and evaluations.
func readMetrics(path string) (metricsRun, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return metricsRun{}, "", err
	}
	defer f.Close()
	var r metricsRun
	var model string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var kind struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(line, &kind); err != nil {
			return r, "", fmt.Errorf("%s:%d: not a metrics line: %v", path, n, err)
		}
		switch kind.Kind {
		case "run":
			var run profile.RunInfo
			err = json.Unmarshal(line, &run)
			r.label, model = run.Label, run.Model
		case "step":
			var s profile.StepRecord
			err = json.Unmarshal(line, &s)
			r.steps = append(r.steps, s)
		case "eval":
			var e profile.EvalRecord
			err = json.Unmarshal(line, &e)
			r.evals = append(r.evals, e)
		default:
			err = fmt.Errorf("unknown kind %q", kind.Kind)
		}
		if err != nil {
			return r, "", fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return r, "", fmt.Errorf("%s: %w", path, err)
	}
	if len(r.steps) == 0 {
		return r, "", fmt.Errorf("%s: no step lines (is it a file that -metrics wrote?)", path)
	}
	return r, model, nil
}

// nameRuns gives each run its legend entry: its label, or its file's name
// when it has none or shares it with another run.
func nameRuns(runs []metricsRun, files []string) {
	count := map[string]int{}
	for _, r := range runs {
		count[r.label]++
	}
	for i := range runs {
		base := strings.TrimSuffix(filepath.Base(files[i]), filepath.Ext(files[i]))
		switch {
		case runs[i].label == "":
			runs[i].label = base
		case count[runs[i].label] > 1:
			runs[i].label += " (" + base + ")"
		}
	}
}

// drawMetrics draws the runs' curves in four panels into the PNG path,
// written under a temporary name and renamed.
func drawMetrics(path, title string, runs []metricsRun, smooth float64) error {
	ps := newPanels(smooth)
	for i, r := range runs {
		if err := ps.add(r, palette[i%len(palette)], smooth); err != nil {
			return fmt.Errorf("plotting %s: %w", r.label, err)
		}
	}
	ps.fitAxes()
	img := ps.render(title)
	// A picture to share: readable by all, as a PNG a user saves would be.
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// panels are plot's four panels.
type panels struct {
	loss, acc, scale, mem *plot.Plot
}

// newPanels makes the empty panels, the loss's labelled with the moving
// average's weight.
func newPanels(smooth float64) panels {
	panel := func(name, y string) *plot.Plot {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "step"
		p.Y.Label.Text = y
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		return p
	}
	ps := panels{loss: panel("training loss", "loss"), acc: panel("test accuracy", "accuracy"),
		scale: panel("loss scale", "log2 scale"), mem: panel("peak memory", "MiB: total (solid), activations (dashed)")}
	if smooth > 0 {
		ps.loss.Y.Label.Text = fmt.Sprintf("loss (moving average, weight %g)", smooth)
	}
	ps.acc.Legend.Top = false
	return ps
}

// curves are one run's lines, against the step.
type curves struct {
	loss, acc, scale, total, act plotter.XYs
}

// curvesOf is run r's curves: the training loss as a moving average of
// weight smooth over its finite values, the test accuracy, the loss
// scale's log2 where it is finite, and the peak memory (total and
// activations) in MiB.
func curvesOf(r metricsRun, smooth float64) curves {
	var c curves
	ema := math.NaN()
	for _, s := range r.steps {
		x := float64(s.Step)
		if l := float64(s.Loss); !math.IsNaN(l) && !math.IsInf(l, 0) {
			if math.IsNaN(ema) {
				ema = l
			}
			ema = smooth*ema + (1-smooth)*l
			c.loss = append(c.loss, plotter.XY{X: x, Y: ema})
		}
		if sc := float64(s.LossScale); sc > 0 && !math.IsInf(sc, 0) {
			c.scale = append(c.scale, plotter.XY{X: x, Y: math.Log2(sc)})
		}
		c.total = append(c.total, plotter.XY{X: x, Y: float64(s.PeakBytes["total"]) / (1 << 20)})
		c.act = append(c.act, plotter.XY{X: x, Y: float64(s.PeakBytes["activation"]) / (1 << 20)})
	}
	for _, e := range r.evals {
		if a := float64(e.TestAccuracy); !math.IsNaN(a) {
			c.acc = append(c.acc, plotter.XY{X: float64(e.Step), Y: a})
		}
	}
	return c
}

// lineStyle is how a curve is drawn.
type lineStyle struct {
	dashed bool // the activations', beside the solid total
	points bool // a mark at each point: evaluations are few
	legend bool // the run's name in the panel's legend
}

// add draws run r's curves in colour c.
func (ps panels) add(r metricsRun, c color.Color, smooth float64) error {
	cs := curvesOf(r, smooth)
	line := func(p *plot.Plot, xy plotter.XYs, st lineStyle) error {
		if len(xy) == 0 {
			return nil
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color, l.Width = c, vg.Points(1.5)
		if st.dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		if st.points {
			s, err := plotter.NewScatter(xy)
			if err != nil {
				return err
			}
			s.Color, s.Shape = c, draw.CircleGlyph{}
			p.Add(s)
		}
		if st.legend {
			p.Legend.Add(r.label, l)
		}
		return nil
	}
	return errors.Join(
		line(ps.loss, cs.loss, lineStyle{legend: true}),
		line(ps.acc, cs.acc, lineStyle{points: true, legend: true}),
		line(ps.scale, cs.scale, lineStyle{legend: true}),
		line(ps.mem, cs.total, lineStyle{legend: true}),
		line(ps.mem, cs.act, lineStyle{dashed: true}),
	)
}

// fitAxes leaves room above the curves for the legends, and some height
// for a constant scale (1 without scaling).
func (ps panels) fitAxes() {
	ps.mem.Y.Min = 0
	ps.mem.Y.Max *= 1.3
	if ps.scale.Y.Max-ps.scale.Y.Min < 1 {
		ps.scale.Y.Min, ps.scale.Y.Max = ps.scale.Y.Min-1, ps.scale.Y.Max+1
	}
	ps.scale.Y.Max += 0.3 * (ps.scale.Y.Max - ps.scale.Y.Min)
}

// render draws the panels two by two under title.
func (ps panels) render(title string) *vgimg.Canvas {
	const w, h = 10 * vg.Inch, 7 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
	dc := draw.New(img)
	top := vg.Points(28)
	dc.FillText(draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 14), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YCenter}, vg.Point{X: w / 2, Y: h - top/2}, title)
	plots := [][]*plot.Plot{{ps.loss, ps.acc}, {ps.scale, ps.mem}}
	body := draw.Crop(dc, 0, 0, 0, -top)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(16), PadY: vg.Points(12), PadLeft: vg.Points(6), PadRight: vg.Points(10), PadBottom: vg.Points(6)}
	for j, row := range plot.Align(plots, tiles, body) {
		for i, c := range row {
			plots[j][i].Draw(c)
		}
	}
	return img
}
