package autograd_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// events records what an Observer is told, as "start op phase" and "end
// op phase".
type events []string

func (e *events) OpStart(op autograd.Op, ph autograd.Phase) {
	*e = append(*e, fmt.Sprint("start ", op, " ", ph))
}
func (e *events) OpEnd(op autograd.Op, ph autograd.Phase) {
	*e = append(*e, fmt.Sprint("end ", op, " ", ph))
}

// castAll is a cast policy that runs every op but the loss in F16, so that
// casts are recorded.
type castAll struct{}

func (castAll) ComputeType(op autograd.Op, in ...dtype.DType) dtype.DType {
	if op == autograd.OpSum || op == autograd.OpMean {
		return dtype.F32
	}
	return dtype.F16
}

// TestObserver checks what an observer is told for a small step: each
// recorded forward op's end, in order, and each backward function
// bracketed, in reverse order; nothing for ops that record nothing, and
// nothing at all without an observer.
func TestObserver(t *testing.T) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(5, 5))
	w := autograd.NewParam("w", tensor.NormalHost(rng, 0, 0.5, 3, 4))
	w.To(dev)
	defer w.Value.Release()
	x := tensor.NormalHost(rng, 0, 1, 2, 4)
	seg := func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var {
		return []*autograd.Var{g.ReLU(in[0])}
	}
	for _, c := range []struct {
		name    string
		policy  autograd.CastPolicy
		forward func(g *autograd.Graph, x *autograd.Var) *autograd.Var
		want    []string
	}{
		{"plain", nil, func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
			return g.Sum(g.ReLU(g.Linear(x, w, nil)))
		}, []string{
			"end linear forward", "end relu forward", "end sum forward",
			"start sum backward", "end sum backward",
			"start relu backward", "end relu backward",
			"start linear backward", "end linear backward",
		}},
		{"autocast", castAll{}, func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
			// The input's cast needs no gradient and records nothing; the
			// weight's does, and so does the F16 result's on its way into
			// the F32 sum. The weight's cast has no backward to run: the
			// CPU's linear backward writes the weight's F32 gradient itself
			// (device.NarrowGemmer).
			return g.Sum(g.Linear(x, w, nil))
		}, []string{
			"end cast forward", "end linear forward", "end cast forward", "end sum forward",
			"start sum backward", "end sum backward",
			"start cast backward", "end cast backward",
			"start linear backward", "end linear backward",
		}},
		{"no grad inside", nil, func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
			var h *autograd.Var
			g.NoGrad(func() { h = g.Tanh(x) })
			return g.Sum(g.Linear(h, w, nil))
		}, []string{
			"end linear forward", "end sum forward",
			"start sum backward", "end sum backward",
			"start linear backward", "end linear backward",
		}},
		{"checkpoint", nil, func(g *autograd.Graph, x *autograd.Var) *autograd.Var {
			// The segment's first run records nothing: the checkpoint is
			// one op forward. Its backward holds the segment's ops,
			// recomputed and then run backwards, seen one by one.
			return g.Sum(g.Checkpoint(seg, g.Linear(x, w, nil))[0])
		}, []string{
			"end linear forward", "end checkpoint forward", "end sum forward",
			"start sum backward", "end sum backward",
			"start checkpoint backward", "end relu recompute", "start relu backward", "end relu backward", "end checkpoint backward",
			"start linear backward", "end linear backward",
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got events
			g := autograd.NewGraph(dev, autograd.WithObserver(&got), autograd.WithPolicy(c.policy))
			defer g.Release()
			g.Backward(c.forward(g, g.Input(x)))
			w.FreeGrad()
			if !slices.Equal(got, c.want) {
				t.Errorf("observer saw\n%q\nwant\n%q", got, c.want)
			}
			if g.Observer() != &got {
				t.Errorf("Observer() = %v, want the installed observer", g.Observer())
			}

			// The same step without an observer tells nobody.
			before := len(got)
			g2 := autograd.NewGraph(dev, autograd.WithPolicy(c.policy))
			defer g2.Release()
			g2.Backward(c.forward(g2, g2.Input(x)))
			w.FreeGrad()
			if len(got) != before || g2.Observer() != nil {
				t.Errorf("a graph without an observer reported %d events", len(got)-before)
			}
		})
	}
}

func TestPhaseString(t *testing.T) {
	for _, c := range []struct {
		ph   autograd.Phase
		want string
	}{{autograd.Forward, "forward"}, {autograd.Backward, "backward"}, {autograd.Recompute, "recompute"}, {autograd.Phase(7), "Phase(7)"}} {
		if got := c.ph.String(); got != c.want {
			t.Errorf("Phase(%d).String() = %q, want %q", c.ph, got, c.want)
		}
	}
}

// nop is an observer that does nothing: what observation costs the graph
// itself.
type nop struct{}

func (nop) OpStart(autograd.Op, autograd.Phase) {}
func (nop) OpEnd(autograd.Op, autograd.Phase)   {}

// BenchmarkTinyOpsObserved is BenchmarkTinyOps with an observer that does
// nothing installed: the difference is the hook's own cost per op.
func BenchmarkTinyOpsObserved(b *testing.B) {
	dev := cpu.New()
	w := autograd.ParamOf("w", tensor.FromSlice(dev, dtype.F32, 0, []float32{0.5}, 1))
	x := tensor.Host{Shape: []int{1}, Data: []float32{1}}
	for b.Loop() {
		g := autograd.NewGraph(dev, autograd.WithObserver(nop{}))
		y := g.Input(x)
		for range 100 {
			y = g.Mul(y, w)
		}
		g.Backward(g.Sum(y))
		w.FreeGrad()
		g.Release()
	}
}
