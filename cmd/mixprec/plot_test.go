package main

import (
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/cli/clitest"
	"github.com/mixprec/mixprec/profile"
)

// writeMetrics writes a metrics file as -metrics would: label's run with
// steps steps, an evaluation every 10, a loss that falls and a scale that
// halves once.
func writeMetrics(t *testing.T, path, label string, steps int, scale float64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := profile.NewMetrics(f, profile.RunInfo{Label: label, Model: "mlp"})
	for i := 1; i <= steps; i++ {
		s := scale
		if i > steps/2 {
			s /= 2
		}
		loss := profile.Float(2 * math.Exp(-float64(i)/20))
		if i == 3 {
			loss = profile.Float(math.NaN()) // a diverged step's null is skipped
		}
		m.Step(profile.StepRecord{Step: i, Epoch: 1 + i/10, Loss: loss, LR: 0.1, LossScale: profile.Float(s), Samples: 64,
			LiveBytes: map[string]int64{"total": 3 << 20}, PeakBytes: map[string]int64{"total": 4 << 20, "activation": 1 << 20}})
		if i%10 == 0 {
			m.Eval(profile.EvalRecord{Step: i, Epoch: i / 10, TestAccuracy: profile.Float(0.9 + float64(i)/1000)})
		}
	}
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
}

// near reports whether c is within a few levels of want in each channel
// (antialiasing blends the lines' edges).
func near(c color.Color, want color.Color) bool {
	r, g, b, _ := c.RGBA()
	wr, wg, wb, _ := want.RGBA()
	d := func(x, y uint32) bool { return x>>8 <= y>>8+8 && y>>8 <= x>>8+8 }
	return d(r, wr) && d(g, wg) && d(b, wb)
}

// TestPlot draws two runs from fixture files, the flags before or after
// the files, and decodes the PNG: its size, and both runs' colours in it.
// Nothing temporary is left beside it.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "fp32.jsonl"), filepath.Join(dir, "f16.jsonl")
	writeMetrics(t, a, "fp32", 40, 1)
	writeMetrics(t, b, "f16", 30, 65536)
	for _, args := range [][]string{
		{"plot", a, b, "-o", filepath.Join(dir, "after.png")},
		{"plot", "-o", filepath.Join(dir, "before.png"), "-smooth", "0", a, b},
	} {
		r := clitest.Run(t, nil, args...)
		if r.Code != 0 || r.Stderr != "" || !strings.Contains(r.Stdout, "2 runs drawn") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, r.Code, r.Stdout, r.Stderr)
		}
		out := args[len(args)-1]
		if out == b {
			out = args[2]
		}
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", out, err)
		}
		if bw, bh := img.Bounds().Dx(), img.Bounds().Dy(); bw != 960 || bh != 672 {
			t.Errorf("%s: %dx%d pixels, want 960x672 (10x7 inches at 96 dpi)", out, bw, bh)
		}
		counts := make([]int, 2)
		for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
			for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
				for i := range counts {
					if near(img.At(x, y), palette[i]) {
						counts[i]++
					}
				}
			}
		}
		for i, n := range counts {
			if n < 500 {
				t.Errorf("%s: %d pixels of run %d's colour; want its curves drawn", out, n, i)
			}
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestPlotErrors checks plot's refusals: usage errors (exit 2) for a
// missing -o or files, an -o that is not a PNG or has no directory; and
// one line naming the file (exit 1) for one that is missing, is not a
// metrics file, or has no steps.
func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	writeMetrics(t, good, "", 5, 1)
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte(`{"kind":"run"}`+"\nnot json\n"), 0o644)
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, []byte(`{"kind":"run","label":"x"}`+"\n"), 0o644)
	png := filepath.Join(dir, "out.png")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plot", "-o", png}, cli.ExitUsage, "no metrics files"},
		{[]string{"plot", good}, cli.ExitUsage, "-o FILE.png is required"},
		{[]string{"plot", good, "-o", filepath.Join(dir, "out.jpg")}, cli.ExitUsage, "want a .png"},
		{[]string{"plot", good, "-o", filepath.Join(dir, "no", "out.png")}, cli.ExitUsage, "no directory"},
		{[]string{"plot", good, "-smooth", "1", "-o", png}, cli.ExitUsage, "-smooth"},
		{[]string{"plot", good, "-nosuch", "-o", png}, cli.ExitUsage, "nosuch"},
		{[]string{"plot", filepath.Join(dir, "missing.jsonl"), "-o", png}, cli.ExitError, "missing.jsonl"},
		{[]string{"plot", garbage, "-o", png}, cli.ExitError, "garbage.jsonl:2"},
		{[]string{"plot", good, empty, "-o", png}, cli.ExitError, "empty.jsonl: no step lines"},
	} {
		r := clitest.Run(t, nil, c.args...)
		if r.Code != c.code || clitest.OneLine(r.Stderr) != "" || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line saying %q", c.args, r.Code, r.Stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(png); err == nil {
		t.Errorf("a failed plot wrote %s", png)
	}
	r := clitest.Run(t, nil, "plot", "-h")
	if r.Code != 0 || !strings.Contains(r.Stdout, "usage: mixprec plot METRICS.jsonl") {
		t.Errorf("plot -h: exit %d, stdout %q", r.Code, r.Stdout)
	}
}
