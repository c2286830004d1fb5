package main

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"github.com/mixprec/mixprec/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// palette colours the configurations' bars.
var palette = []color.Color{
	color.RGBA{0x4c, 0x72, 0xb0, 0xff}, color.RGBA{0xdd, 0x84, 0x52, 0xff}, color.RGBA{0x55, 0xa8, 0x68, 0xff},
	color.RGBA{0xc4, 0x4e, 0x52, 0xff}, color.RGBA{0x81, 0x72, 0xb3, 0xff}, color.RGBA{0x93, 0x78, 0x60, 0xff},
}

// drawChart draws peak MiB per category as bars grouped by category, one
// bar per configuration.
func drawChart(path string, rep mcReport) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("mixprec memcompare: %s, batch %d, %s", rep.Model, rep.Batch, rep.Device)
	p.Y.Label.Text = "peak MiB"
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
	}
	n := float64(len(rep.Results))
	w := vg.Points(60 / n)
	for i, res := range rep.Results {
		vals := make(plotter.Values, len(rows))
		for j, r := range rows {
			vals[j] = float64(r.get(res.Peak)) / (1 << 20)
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = palette[i%len(palette)]
		bars.Offset = w * vg.Length(float64(i)-(n-1)/2)
		p.Add(bars)
		p.Legend.Add(res.Config, bars)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.NominalX(names...)
	p.Y.Min = 0
	p.Y.Max *= 1.3 // room for the legend above the tallest bars
	// The format is the file's extension's, as plot.Save takes it; the file
	// is written whole or not at all, as every file here is.
	wt, err := p.WriterTo(11*vg.Inch, 5*vg.Inch, strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")))
	if err == nil {
		err = atomicfile.Write(path, 0o644, func(w io.Writer) error { _, err := wt.WriteTo(w); return err })
	}
	if err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}

// drawSweep draws a budget sweep as the trade-off a user picks from: step
// time against measured peak memory, the planner's plans joined by a line
// from the smallest budget to the unconstrained step, and the other
// choices (checkpointing every √n units, every block) as points of their
// own.
func drawSweep(path string, rep sweepReport) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("mixprec memcompare -budget-sweep: %s, batch %d, amp %s, %s", rep.Model, rep.Batch, rep.AMP, rep.Device)
	p.X.Label.Text = "measured peak MiB"
	p.Y.Label.Text = "step time, ms"
	var planned plotter.XYs
	others := map[string]plotter.XYs{}
	var names []string
	for _, r := range rep.Rows {
		xy := plotter.XY{X: float64(r.Peak) / (1 << 20), Y: float64(r.StepMillis)}
		switch r.Config {
		case "plan":
			planned = append(planned, xy)
		default:
			if _, ok := others[r.Config]; !ok {
				names = append(names, r.Config)
			}
			others[r.Config] = append(others[r.Config], xy)
		}
	}
	line, points, err := plotter.NewLinePoints(planned)
	if err != nil {
		return err
	}
	line.Color, points.Color = palette[0], palette[0]
	p.Add(line, points)
	p.Legend.Add("the planner's plans", line, points)
	for i, name := range names {
		sc, err := plotter.NewScatter(others[name])
		if err != nil {
			return err
		}
		sc.Color = palette[(i+1)%len(palette)]
		sc.Radius = vg.Points(4)
		sc.Shape = draw.BoxGlyph{}
		p.Add(sc)
		p.Legend.Add(name, sc)
	}
	p.Legend.Top = true
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max *= 1.05 // the unconstrained point off the edge
	p.Y.Max *= 1.2  // room for the legend
	if err := p.Save(9*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("writing chart: %w", err)
	}
	return nil
}
