package autograd_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/tensor"
)

// TestInputDTypes: InputAs(h, dt) holds h rounded to dt, InputBits of h's
// rounded patterns the same values, and Input is InputAs(h, F32); none
// requires grad, and each is released with the graph.
func TestInputDTypes(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(1, 2))
		h := tensor.NormalHost(rng, 0, 3, 5, 7)
		before := dev.MemStats()
		for _, dt := range dtype.All {
			g := autograd.NewGraph(dev)
			x := g.InputAs(h, dt)
			if x.DType() != dt || x.RequiresGrad() {
				t.Fatalf("InputAs(%v): dtype %v, requires grad %v", dt, x.DType(), x.RequiresGrad())
			}
			got := x.Value.ToHost()
			for i, v := range h.Data {
				if want := dtype.Round(dt, v); math.Float32bits(got[i]) != math.Float32bits(want) {
					t.Fatalf("InputAs(%v)[%d] = %v, want %v", dt, i, got[i], want)
				}
			}
			if dt != dtype.F32 {
				bits := make([]uint16, len(h.Data))
				dtype.Encode(dt, bits, h.Data)
				y := g.InputBits(tensor.Host16{Shape: h.Shape, DType: dt, Bits: bits})
				if y.DType() != dt || y.RequiresGrad() {
					t.Fatalf("InputBits(%v): dtype %v, requires grad %v", dt, y.DType(), y.RequiresGrad())
				}
				for i, v := range y.Value.ToHost() {
					if math.Float32bits(v) != math.Float32bits(got[i]) {
						t.Fatalf("InputBits(%v)[%d] = %v, InputAs gave %v", dt, i, v, got[i])
					}
				}
			}
			g.Release()
		}
		if after := dev.MemStats(); after.Live != before.Live {
			t.Errorf("live memory %d after the graphs, %d before", after.Live, before.Live)
		}
	})
}

// TestInputBitsRefuses: patterns that do not fill the shape, or that claim
// F32, panic naming the problem, and leave no memory behind.
func TestInputBitsRefuses(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		before := dev.MemStats()
		for _, c := range []struct {
			name string
			h    tensor.Host16
			want string
		}{
			{"short", tensor.Host16{Shape: []int{2, 3}, DType: dtype.F16, Bits: make([]uint16, 5)}, "5 values for shape [2 3]"},
			{"f32", tensor.Host16{Shape: []int{2}, DType: dtype.F32, Bits: make([]uint16, 2)}, "want F16 or BF16"},
		} {
			g := autograd.NewGraph(dev)
			func() {
				defer func() {
					r := recover()
					if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
						t.Errorf("%s: panic %v, want one containing %q", c.name, r, c.want)
					}
				}()
				g.InputBits(c.h)
			}()
			g.Release()
		}
		if after := dev.MemStats(); after.Live != before.Live {
			t.Errorf("live memory %d after the refusals, %d before", after.Live, before.Live)
		}
	})
}

// TestInputView: InputView and InputBitsView hold what Input and InputBits
// hold, and a Linear's forward and backward on them give the same bits. On
// a backend whose memory is the host's (device.HostViewer) the leaf reads
// the host array in place: a change to it shows in the leaf. Released with
// the graph, they leave no memory behind.
func TestInputView(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(3, 4))
		h := tensor.NormalHost(rng, 0, 1, 4, 6)
		w := tensor.FromHost(dev, dtype.F32, device.Param, tensor.NormalHost(rng, 0, 1, 3, 6))
		defer w.Release()
		bits := make([]uint16, len(h.Data))
		dtype.Encode(dtype.BF16, bits, h.Data)
		h16 := tensor.Host16{Shape: h.Shape, DType: dtype.BF16, Bits: bits}
		before := dev.MemStats()
		run := func(in func(g *autograd.Graph) *autograd.Var) (x, y, dw []float32) {
			g := autograd.NewGraph(dev)
			defer g.Release()
			xv := in(g)
			wv := g.Leaf(w, true)
			out := g.Linear(xv, wv, nil)
			g.Backward(g.Sum(g.Cast(out, dtype.F32)))
			return xv.Value.ToHost(), out.Value.ToHost(), wv.Grad.ToHost()
		}
		same := func(what string, a, b []float32) {
			t.Helper()
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s[%d] = %v with a view, %v with a copy", what, i, a[i], b[i])
				}
			}
		}
		for _, c := range []struct {
			name       string
			view, copy func(g *autograd.Graph) *autograd.Var
		}{
			{"f32", func(g *autograd.Graph) *autograd.Var { return g.InputView(h) }, func(g *autograd.Graph) *autograd.Var { return g.Input(h) }},
			{"bf16", func(g *autograd.Graph) *autograd.Var { return g.InputBitsView(h16) }, func(g *autograd.Graph) *autograd.Var { return g.InputBits(h16) }},
		} {
			vx, vy, vdw := run(c.view)
			cx, cy, cdw := run(c.copy)
			same(c.name+" input", vx, cx)
			same(c.name+" output", vy, cy)
			same(c.name+" weight gradient", vdw, cdw)
		}
		if _, ok := dev.(device.HostViewer); ok {
			g := autograd.NewGraph(dev)
			x, x16 := g.InputView(h), g.InputBitsView(h16)
			old, old16 := h.Data[5], bits[5]
			h.Data[5], bits[5] = 42, 0x4228 // 42 in bfloat16
			if got, got16 := x.Value.ToHost()[5], x16.Value.ToHost()[5]; got != 42 || got16 != 42 {
				t.Errorf("after a change to the host arrays, the views hold %v and %v; want 42, read in place", got, got16)
			}
			h.Data[5], bits[5] = old, old16
			g.Release()
		}
		if after := dev.MemStats(); after.Live != before.Live {
			t.Errorf("live memory %d after the graphs, %d before", after.Live, before.Live)
		}
	})
}
