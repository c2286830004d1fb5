package autograd_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestUnscaleAsStored checks the graph's side of unscaling as stored: an
// F16 Linear's weight gradient comes out of Backward multiplied by inv
// (the scaled gradient's bits times inv), and Unscaled says so, once, with
// whether an unscaled value is Inf or NaN; a weight gradient that
// overflows F16 while the loss and the input stay finite is reported; a
// mark for another factor is undone (the gradient scaled back, bit for
// bit) and reported as not unscaled; a graph with an OnGradReady hook, a
// parameter whose gradient already exists, and FreeGrad leave no mark.
func TestUnscaleAsStored(t *testing.T) {
	dev := cpu.New()
	const scale, inv = 1024, 1.0 / 1024
	rng := rand.New(rand.NewPCG(5, 6))
	w := autograd.NewParam("w", tensor.NormalHost(rng, 0, 0.3, 7, 33))
	w.To(dev)
	defer w.Value.Release()
	step := func(xScale float32, asStored, hook bool) {
		g := autograd.NewGraph(dev)
		defer g.Release()
		if hook {
			g.OnGradReady(func(*autograd.Var) {})
		}
		g.SetPolicy(lowPolicy{dtype.F16})
		xh := tensor.NormalHost(rand.New(rand.NewPCG(7, 8)), 0, 1, 40, 33)
		for i := range xh.Data {
			xh.Data[i] *= xScale
		}
		x := g.Input(xh)
		if asStored {
			g.UnscaleAsStored(inv)
		}
		loss := g.Mean(g.Linear(x, w, nil))
		g.Backward(g.Scale(loss, scale))
	}
	step(1, false, false)
	scaled := w.Grad.ToHost()
	w.FreeGrad()
	step(1, true, false)
	got := w.Grad.ToHost()
	for i, v := range scaled {
		if math.Float32bits(got[i]) != math.Float32bits(v*inv) {
			t.Fatalf("gradient [%d] = %v, want the scaled %v times %v", i, got[i], v, inv)
		}
	}
	if done, nf := autograd.Unscaled(w, inv); !done || nf {
		t.Fatalf("Unscaled = %v, %v; want true, false", done, nf)
	}
	if done, _ := autograd.Unscaled(w, inv); done {
		t.Fatal("a second Unscaled still reports the gradient unscaled")
	}
	w.FreeGrad()

	// Inputs of 10000: each weight gradient sums 40 of them times the
	// scaled 1024/280 (the loss is the mean of 40x7 outputs), past F16's
	// 65504.
	step(1e4, true, false)
	if done, nf := autograd.Unscaled(w, inv); !done || !nf {
		t.Fatalf("an F16 overflow in the weight gradient: Unscaled = %v, %v; want true, true", done, nf)
	}
	w.FreeGrad()

	step(1, true, false)
	if done, _ := autograd.Unscaled(w, 2*inv); done {
		t.Fatal("Unscaled with another factor reports the gradient unscaled")
	}
	back := w.Grad.ToHost()
	for i, v := range scaled {
		if math.Float32bits(back[i]) != math.Float32bits(v) {
			t.Fatalf("scaled back: gradient [%d] = %v, want %v", i, back[i], v)
		}
	}
	w.FreeGrad()

	step(1, true, true)
	if done, _ := autograd.Unscaled(w, inv); done {
		t.Fatal("with an OnGradReady hook the gradient was unscaled as stored")
	}
	w.FreeGrad()

	step(1, true, false)
	step(1, true, false) // adds to a gradient the first unscaled
	if done, _ := autograd.Unscaled(w, inv); done {
		t.Fatal("a gradient that a second Backward added to is still reported unscaled")
	}
	w.FreeGrad()

	step(1, true, false)
	w.FreeGrad()
	w.Grad = tensor.Zeros(dev, dtype.F32, 0, 7, 33)
	if done, _ := autograd.Unscaled(w, inv); done {
		t.Fatal("a gradient set after FreeGrad is reported unscaled")
	}
	w.FreeGrad()
}
