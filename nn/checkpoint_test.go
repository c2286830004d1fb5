package nn_test

import (
	"fmt"
	"github.com/mixprec/mixprec/internal/testdev"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/tensor"
)

// run trains nothing: it makes a fresh deep MLP with dropout from seed,
// runs forward (through forward), backward, and returns the loss and every
// gradient (parameters and input) as bits.
func runOnce(t *testing.T, dev device.Device, low dtype.DType, forward func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var) []uint32 {
	t.Helper()
	rng := rand.New(rand.NewPCG(99, 1))
	m := models.DeepMLP(rng, 20, 24, 6, 5, 0.3)
	nn.To(m, dev)
	defer nn.Release(m)
	g := autograd.NewGraph(dev)
	defer g.Release()
	if low != dtype.F32 {
		amp.Autocast(g, low)
	}
	x := g.Leaf(tensor.Normal(dev, dtype.F32, device.Temp, rng, 0, 1, 16, 20), true)
	defer x.Value.Release()
	labels := make([]int32, 16)
	for i := range labels {
		labels[i] = int32(rng.IntN(5))
	}
	// Two steps through the same dropout streams: the second forward draws
	// new masks, which checkpointing must replay identically too.
	var bits []uint32
	for range 2 {
		loss := g.CrossEntropy(forward(g, m, x), labels)
		bits = append(bits, math.Float32bits(loss.Value.Item()))
		g.Backward(loss)
		for _, p := range m.Params() {
			for _, v := range p.Grad.ToHost() {
				bits = append(bits, math.Float32bits(v))
			}
			p.ZeroGrad()
		}
		for _, v := range x.Grad.ToHost() {
			bits = append(bits, math.Float32bits(v))
		}
		g.Release()
		g = autograd.NewGraph(dev)
		if low != dtype.F32 {
			amp.Autocast(g, low)
		}
		x.Grad = nil
	}
	return bits
}

// TestCheckpointBitwise is issue acceptance: losses and gradients with
// checkpointing are bitwise equal to those without, in F32 and under F16
// and BF16 autocast, with dropout active, for 1 segment, about √n segments,
// n segments, nested segments, and spans of units chosen as a memory plan
// would.
func TestCheckpointBitwise(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		plain := func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var { return m.Forward(g, x) }
		segs := func(n int) func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var {
			return func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var {
				return nn.CheckpointSequential(g, m.Layers, n, x)
			}
		}
		nested := func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var {
			half := len(m.Layers) / 2
			inner := nn.NewSequential(nn.Checkpoint(nn.NewSequential(m.Layers[:3]...)), nn.NewSequential(m.Layers[3:half]...))
			outer := nn.NewSequential(nn.Checkpoint(inner), nn.Checkpoint(nn.NewSequential(m.Layers[half:]...)))
			return outer.Forward(g, x)
		}
		// spans recomputes the given spans of the model's units through
		// Sequential.SetRecompute, as a memory plan does.
		spans := func(s ...nn.Span) func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var {
			return func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var {
				m.SetRecompute(&nn.Recompute{Spans: s})
				return m.Forward(g, x)
			}
		}
		for _, low := range dtype.All {
			want := runOnce(t, dev, low, plain)
			for _, c := range []struct {
				name string
				f    func(g *autograd.Graph, m *nn.Sequential, x *autograd.Var) *autograd.Var
			}{{"1 segment", segs(1)}, {"sqrt n segments", segs(0)}, {"n segments", segs(19)}, {"nested", nested},
				{"chosen spans", spans(nn.Span{Lo: 1, Hi: 4}, nn.Span{Lo: 6, Hi: 7}, nn.Span{Lo: 8, Hi: 13}, nn.Span{Lo: 18, Hi: 19})},
				{"no spans", spans()}} {
				t.Run(fmt.Sprintf("%v/%s", low, c.name), func(t *testing.T) {
					got := runOnce(t, dev, low, c.f)
					if len(got) != len(want) {
						t.Fatalf("%d values, want %d", len(got), len(want))
					}
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("value %d differs: %v vs %v without checkpointing", i, math.Float32frombits(got[i]), math.Float32frombits(want[i]))
						}
					}
				})
			}
		}
		if live := dev.MemStats().Live.Total; live != 0 {
			t.Errorf("%d bytes still live after all runs", live)
		}
	})
}

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		n, seg int
		want   string
	}{{16, 0, "[0 4 8 12 16]"}, {49, 0, "[0 7 14 21 28 35 42 49]"}, {5, 2, "[0 2 5]"}, {3, 10, "[0 1 2 3]"}, {1, 0, "[0 1]"}} {
		if got := fmt.Sprint(nn.Split(c.n, c.seg)); got != c.want {
			t.Errorf("Split(%d, %d) = %s, want %s", c.n, c.seg, got, c.want)
		}
	}
}

// TestCheckpointParamsWithoutInputGrad: a segment whose input does not
// require grad still sends gradients to its parameters.
func TestCheckpointParamsWithoutInputGrad(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(1, 5))
		l := nn.NewLinear(4, 3, rng)
		nn.To(l, dev)
		g := autograd.NewGraph(dev)
		x := g.Input(tensor.UniformHost(rng, -1, 1, 2, 4))
		g.Backward(g.Sum(nn.Checkpoint(l).Forward(g, x)))
		if l.W.Grad == nil || l.B.Grad == nil {
			t.Fatal("parameters of a checkpointed segment got no gradient when its input needs none")
		}
		// d sum(xWᵀ+b)/db = number of rows.
		for _, v := range l.B.Grad.ToHost() {
			if v != 2 {
				t.Errorf("bias gradient %v, want 2", v)
			}
		}
		g.Release()
	})
}

func TestCheckpointMisuse(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 6))
	l := nn.NewLinear(4, 3, rng)
	nn.To(l, dev)
	// Under no-grad, checkpointing is the plain forward pass.
	g := autograd.NewGraph(dev, autograd.WithoutGrad())
	x := g.Input(tensor.UniformHost(rng, -1, 1, 2, 4))
	y := nn.Checkpoint(l).Forward(g, x)
	want := g.Linear(x, l.W, l.B)
	if fmt.Sprint(y.Value.ToHost()) != fmt.Sprint(want.Value.ToHost()) {
		t.Errorf("no-grad checkpoint %v, want %v", y.Value.ToHost(), want.Value.ToHost())
	}
	g.Release()
	// A segment returning its own input is rejected with a message.
	g = autograd.NewGraph(dev)
	defer g.Release()
	x = g.Leaf(tensor.Zeros(dev, dtype.F32, device.Temp, 2, 4), true)
	defer x.Value.Release()
	for name, seg := range map[string]autograd.Segment{
		"input":     func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var { return in },
		"parameter": func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var { return []*autograd.Var{l.W} },
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), "not produced inside it") {
					t.Errorf("segment returning its %s: recovered %v, want a 'not produced inside it' panic", name, r)
				}
			}()
			g.Checkpoint(seg, x)
		}()
	}
}

// TestCheckpointMemory checks that the activation peak falls with √n
// checkpointing, that the recomputation is accounted as Recompute, and
// that the segments' inputs are released as backward passes them.
func TestCheckpointMemory(t *testing.T) {
	peak := func(segments int) device.MemStats {
		dev := cpu.New()
		rng := rand.New(rand.NewPCG(3, 3))
		m := models.DeepMLP(rng, 64, 128, 16, 10, 0.1)
		nn.To(m, dev)
		defer nn.Release(m)
		dev.ResetPeak()
		g := autograd.NewGraph(dev)
		defer g.Release()
		x := g.Input(tensor.UniformHost(rng, -1, 1, 64, 64))
		var out *autograd.Var
		if segments == 0 {
			out = m.Forward(g, x)
		} else {
			out = nn.CheckpointSequential(g, m.Layers, segments, x)
		}
		g.Backward(g.CrossEntropy(out, make([]int32, 64)))
		return dev.MemStats()
	}
	base, ck := peak(0), peak(-1+nn.DefaultSegments(49)+1)
	a0, a1 := base.Peak.Category(device.Activation), ck.Peak.Category(device.Activation)
	t.Logf("activation peak %d without, %d with √n checkpointing (%.2fx); recompute peak %d", a0, a1, float64(a1)/float64(a0), ck.Peak.Category(device.Recompute))
	if float64(a1) > 0.4*float64(a0) {
		t.Errorf("activation peak with checkpointing %d > 0.4 x %d", a1, a0)
	}
	if ck.Peak.Category(device.Recompute) == 0 || base.Peak.Category(device.Recompute) != 0 {
		t.Errorf("recompute peak %d with checkpointing, %d without; want > 0 and 0", ck.Peak.Category(device.Recompute), base.Peak.Category(device.Recompute))
	}
	// Each segment's input but the first (the caller's) went once the
	// backward pass had recomputed its segment; what the loss kept stays.
	if got, want := ck.Live.Category(device.Activation), device.Bytes(dtype.F32, 64*64+64*10); got != want {
		t.Errorf("%d bytes kept after backward with checkpointing, want %d (the input and the logits)", got, want)
	}
}

// TestCheckpointCasts checks that under autocast a checkpointed segment's
// weight copies last its passes, so that a step holds one segment's at a
// time and none after it, while a parameter that already keeps a copy (made
// outside any segment) lends it to the segment instead of a second one;
// and that an evaluation's copies (a graph without gradients) last the
// graph, or are those the parameters keep, or stay on the parameters with
// KeepCasts.
func TestCheckpointCasts(t *testing.T) {
	const layers = 4
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(4, 4))
	m := models.DeepMLP(rng, 16, 32, layers, 5, 0)
	nn.To(m, dev)
	defer nn.Release(m)
	x := tensor.UniformHost(rng, -1, 1, 8, 16)
	step := func(segments int) device.MemStats {
		dev.ResetPeak()
		g := autograd.NewGraph(dev)
		amp.Autocast(g, dtype.BF16)
		in := g.Input(x)
		var out *autograd.Var
		if segments == 0 {
			out = m.Forward(g, in)
		} else {
			out = nn.CheckpointSequential(g, m.Layers, segments, in)
		}
		g.Backward(g.CrossEntropy(out, make([]int32, 8)))
		g.Release()
		for _, p := range m.Params() {
			p.FreeGrad()
		}
		return dev.MemStats()
	}
	// BF16 bytes of the copies of each segment's parameters (Linear's
	// weight and bias), and of all of them.
	segBytes := func(segments int) (most, all int64) {
		b := nn.Split(len(m.Layers), segments)
		for i := 0; i+1 < len(b); i++ {
			var n int64
			for _, l := range m.Layers[b[i]:b[i+1]] {
				for _, p := range l.Params() {
					n += device.Bytes(dtype.BF16, tensor.Numel(p.Shape()))
				}
			}
			most, all = max(most, n), all+n
		}
		return most, all
	}
	// An evaluation: a graph without gradients keeps its copies no longer
	// than itself, and uses those the parameters keep.
	eval := func(opts ...autograd.Option) device.MemStats {
		dev.ResetPeak()
		g := autograd.NewGraph(dev, append(opts, autograd.WithoutGrad())...)
		amp.Autocast(g, dtype.BF16)
		m.Forward(g, g.Input(x))
		g.Release()
		return dev.MemStats()
	}
	most, all := segBytes(layers + 1)
	if s := eval(); s.Peak.Category(device.Cast) != all || s.Live.Category(device.Cast) != 0 {
		t.Errorf("evaluating: weight copies peaked at %d bytes and end at %d, want %d and 0", s.Peak.Category(device.Cast), s.Live.Category(device.Cast), all)
	}
	if s := eval(autograd.KeepCasts()); s.Peak.Category(device.Cast) != all || s.Live.Category(device.Cast) != all {
		t.Errorf("evaluating with KeepCasts: weight copies peaked at %d bytes and end at %d, want %d and %d", s.Peak.Category(device.Cast), s.Live.Category(device.Cast), all, all)
	}
	for _, p := range m.Params() {
		p.Value.ReleaseCasts()
	}
	s := step(layers + 1)
	if got := s.Peak.Category(device.Cast); got != most {
		t.Errorf("segment by segment: weight copies peaked at %d bytes, want %d (the largest segment's)", got, most)
	}
	if got := s.Live.Category(device.Cast); got != 0 {
		t.Errorf("segment by segment: %d bytes of weight copies outlive the step", got)
	}
	s = step(0)
	if got := s.Live.Category(device.Cast); got != all {
		t.Errorf("without checkpointing: %d bytes of weight copies kept, want %d (every parameter's)", got, all)
	}
	s = step(layers + 1) // the parameters keep copies now: the segments use them
	if got, live := s.Peak.Category(device.Cast), s.Live.Category(device.Cast); got != all || live != all {
		t.Errorf("with copies kept: weight copies peaked at %d bytes and end at %d, want %d (no second copy)", got, live, all)
	}
	if s := eval(); s.Peak.Category(device.Cast) != all || s.Live.Category(device.Cast) != all {
		t.Errorf("evaluating with copies kept: weight copies peaked at %d bytes and end at %d, want %d (no second copy)", s.Peak.Category(device.Cast), s.Live.Category(device.Cast), all)
	}
}
