package nn_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/tensor"
)

// TestUnits checks a Sequential's units: nested Sequentials' layers in
// their place, named by their State paths.
func TestUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		name  string
		m     *nn.Sequential
		names string
	}{
		{"mlp", models.MLP(rng, 4, 3, 2), "0 1 2"},
		{"resnet20", models.ResNet20(rng, 10), "0.0 0.1 0.2 1.0 1.1 1.2 2.0 2.1 2.2 3.0 3.1 3.2 4.0 4.1"},
		{"nested", nn.NewSequential(nn.ReLU(), nn.NewSequential(nn.NewSequential(nn.Tanh()), nn.ReLU())), "0 1.0.0 1.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var names []string
			for _, u := range c.m.Units() {
				names = append(names, u.Name)
			}
			if got := strings.Join(names, " "); got != c.names {
				t.Errorf("units %q, want %q", got, c.names)
			}
		})
	}
}

// TestCheckSpans refuses spans out of order, overlapping, empty or
// outside the chain, naming the caller.
func TestCheckSpans(t *testing.T) {
	for _, c := range []struct {
		spans []nn.Span
		ok    bool
	}{
		{nil, true},
		{[]nn.Span{{Lo: 0, Hi: 5}}, true},
		{[]nn.Span{{Lo: 0, Hi: 1}, {Lo: 1, Hi: 2}, {Lo: 4, Hi: 5}}, true},
		{[]nn.Span{{Lo: 0, Hi: 6}}, false},
		{[]nn.Span{{Lo: 2, Hi: 2}}, false},
		{[]nn.Span{{Lo: -1, Hi: 2}}, false},
		{[]nn.Span{{Lo: 0, Hi: 3}, {Lo: 2, Hi: 4}}, false},
		{[]nn.Span{{Lo: 3, Hi: 4}, {Lo: 0, Hi: 1}}, false},
	} {
		t.Run(fmt.Sprint(c.spans), func(t *testing.T) {
			defer func() {
				r := recover()
				if (r == nil) != c.ok {
					t.Errorf("CheckSpans(%v) over 5 units: panic %v, want ok %v", c.spans, r, c.ok)
				}
				if r != nil && !strings.HasPrefix(fmt.Sprint(r), "test:") {
					t.Errorf("panic %q does not name the caller", r)
				}
			}()
			nn.CheckSpans("test", c.spans, 5)
		})
	}
}

// TestRunChainProbe checks where the probe is called: around the chain,
// around each unit as it runs, and again around each recomputed unit
// during backward.
func TestRunChainProbe(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(2, 2))
	m := models.MLP(rng, 4, 3, 3, 2) // units 0-4
	nn.To(m, dev)
	defer nn.Release(m)
	var events []string
	probe := func(g *autograd.Graph, unit int, end bool) {
		e := fmt.Sprint(unit)
		if g.Recomputing() {
			e = "r" + e
		}
		if end {
			e += "'"
		}
		events = append(events, e)
	}
	m.SetRecompute(&nn.Recompute{Spans: []nn.Span{{Lo: 1, Hi: 3}}, Probe: probe})
	g := autograd.NewGraph(dev)
	defer g.Release()
	x := g.Input(tensor.NormalHost(rng, 0, 1, 2, 4))
	g.Backward(g.Sum(m.Forward(g, x)))
	want := []string{"-1", "0", "0'", "1", "1'", "2", "2'", "3", "3'", "4", "4'", "-1'", "r1", "r1'", "r2", "r2'"}
	if !slices.Equal(events, want) {
		t.Errorf("probe saw %v, want %v", events, want)
	}
}
