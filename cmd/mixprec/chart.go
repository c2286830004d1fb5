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
