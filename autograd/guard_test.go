package autograd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestGuardDetectsEntry holds a graph's busy flag, as a goroutine in the
// middle of recording would, and calls each way into the graph from
// another goroutine: every one must panic naming the misuse, and must leave
// nothing allocated behind. The goroutines never touch the graph at the
// same time except through the atomic flag, so this holds under -race,
// where the end-to-end TestGraphFromTwoGoroutines cannot run.
func TestGuardDetectsEntry(t *testing.T) {
	dev := cpu.New()
	w := ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{2}, 1))
	host := tensor.Host{Shape: []int{1}, Data: []float32{3}}
	cases := []struct {
		name string
		call func(g *Graph, x *Var)
	}{
		{"Input", func(g *Graph, x *Var) { g.Input(host) }},
		{"Const", func(g *Graph, x *Var) { g.Const(dtype.F32, 1, 4) }},
		{"op", func(g *Graph, x *Var) { g.Mul(x, w) }},
		{"record", func(g *Graph, x *Var) {
			g.push(OpMul, g.result(x.Value), []*Var{x, w}, func(*tensor.Tensor) {})
		}},
		{"NoGrad", func(g *Graph, x *Var) { g.NoGrad(func() {}) }},
		{"Backward", func(g *Graph, x *Var) { g.Backward(x) }},
		{"Release", func(g *Graph, x *Var) { g.Release() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := dev.MemStats().Live.Total
			g := NewGraph(dev)
			x := g.Mul(g.Input(host), w) // a recorded loss for Backward
			g.enter()                    // another goroutine is inside the graph
			got := make(chan any)
			go func() {
				defer func() { got <- recover() }()
				c.call(g, x)
			}()
			r := <-got
			g.leave()
			if msg := fmt.Sprint(r); r == nil || !strings.Contains(msg, "two goroutines") {
				t.Errorf("%s while another goroutine holds the graph: panic %v; want one naming two goroutines", c.name, r)
			}
			// The owner carries on: the graph is intact and usable.
			if n := g.Len(); n != 1 {
				t.Errorf("tape holds %d ops after the refused call, want 1", n)
			}
			c.call(g, x) // the same call, from the owner, must not panic
			g.Release()
			w.FreeGrad() // Backward's gradient for w is the parameter's, not the graph's
			if after := dev.MemStats().Live.Total; after != before {
				t.Errorf("live bytes %d after Release, want %d: the refused call leaked", after, before)
			}
		})
	}
}

// TestGuardNotTakenByNesting checks that the graph's own re-entry (ops
// inside NoGrad, backward closures allocating and accumulating, a
// checkpointed segment recomputed during Backward) never trips the guard,
// and that the flag is free again afterwards.
func TestGuardNotTakenByNesting(t *testing.T) {
	dev := cpu.New()
	w := ParamOf("w", tensor.FromSlice(dev, dtype.F32, device.Param, []float32{2, 3}, 2))
	defer w.FreeGrad()
	g := NewGraph(dev)
	x := g.Input(tensor.Host{Shape: []int{2}, Data: []float32{1, -1}})
	g.NoGrad(func() { g.Mul(x, w) })
	seg := func(g *Graph, in []*Var) []*Var { return []*Var{g.Mul(g.Mul(in[0], w), w)} }
	y := g.Checkpoint(seg, g.Mul(x, w))[0]
	g.Backward(g.Sum(y))
	if g.busy.Load() {
		t.Error("busy flag still held after Backward")
	}
	g.Release()
	if g.busy.Load() {
		t.Error("busy flag still held after Release")
	}
	// y = x·w³, so dy/dw = 3·x·w² = [12, -27].
	if got := w.Grad.ToHost(); got[0] != 12 || got[1] != -27 {
		t.Errorf("gradient through the checkpoint %v, want [12 -27]", got)
	}
}

// TestGuardFreeAfterProgrammerError checks that a programmer error caught
// inside the graph's bookkeeping (a bad shape, a Host whose data does not
// fit it) leaves the busy flag free: the graph goes on working, and the
// next call does not report two goroutines.
func TestGuardFreeAfterProgrammerError(t *testing.T) {
	dev := cpu.New()
	g := NewGraph(dev)
	defer g.Release()
	x := g.Input(tensor.Host{Shape: []int{2, 3}, Data: make([]float32, 6)})
	for _, c := range []struct {
		name, want string
		call       func()
	}{
		{"Reshape", "cannot reshape", func() { g.Reshape(x, 4, -1) }},
		{"Input", "values for shape", func() { g.Input(tensor.Host{Shape: []int{2}, Data: make([]float32, 3)}) }},
		{"Const", "negative dimension", func() { g.Const(dtype.F32, 1, -1) }},
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("%s: recovered %v, want a panic mentioning %q", c.name, r, c.want)
				}
			}()
			c.call()
		}()
		if g.busy.Load() {
			t.Fatalf("%s: busy flag still held after its panic", c.name)
		}
		if got := g.Reshape(x, 3, 2).Shape(); got[0] != 3 || got[1] != 2 {
			t.Errorf("after %s's panic, Reshape gives %v", c.name, got)
		}
	}
}
