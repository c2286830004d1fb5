package autograd_test

import (
	"slices"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestMark checks where the backward pass reports marks: in reverse order
// of their recording, each after the backward functions of the ops
// recorded after it (the gradient of the value before it has arrived by
// then) and before those of the ops before it; a graph that records
// nothing records no mark.
func TestMark(t *testing.T) {
	dev := cpu.New()
	g := autograd.NewGraph(dev)
	defer g.Release()
	x := g.Leaf(tensor.FromSlice(dev, dtype.F32, device.Temp, []float32{1, -2, 3}, 3), true)
	defer x.Value.Release()
	var seen []string
	g.Mark(func() { seen = append(seen, "start") })
	y := g.ReLU(x)
	g.Mark(func() {
		seen = append(seen, "after relu")
		if y.Grad == nil {
			t.Error("at the mark after ReLU, ReLU's output has no gradient yet")
		}
		if x.Grad != nil {
			t.Error("at the mark after ReLU, ReLU's backward has already run")
		}
	})
	z := g.Sum(g.Mul(y, y))
	g.Mark(func() { seen = append(seen, "end") })
	g.Backward(z)
	if want := []string{"end", "after relu", "start"}; !slices.Equal(seen, want) {
		t.Errorf("marks reported %v, want %v", seen, want)
	}
	n := autograd.NewGraph(dev, autograd.WithoutGrad())
	defer n.Release()
	before := n.Len()
	n.Mark(func() { t.Error("a mark on a graph that records nothing ran") })
	if n.Len() != before {
		t.Error("a graph that records nothing recorded a mark")
	}
}
