package tensor_test

import (
	"slices"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestArena checks that tensors from an Arena behave as the package's own:
// values, shapes that do not alias each other, Move and Reshape with -1,
// release and its accounting; and that they cost a Go allocation per
// chunk, not two each.
func TestArena(t *testing.T) {
	dev := cpu.New()
	var a tensor.Arena
	x := a.FromHost(dev, dtype.BF16, device.Temp, tensor.Host{Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}})
	y := a.New(dev, dtype.F32, device.Temp, 4)
	s := x.Shape()
	_ = append(s, 99) // must not write into the next tensor's shape
	if !slices.Equal(y.Shape(), []int{4}) || !slices.Equal(x.Shape(), []int{2, 3}) {
		t.Fatalf("shapes %v and %v, want [2 3] and [4]", x.Shape(), y.Shape())
	}
	v := a.Reshape(x, -1, 2)
	if !slices.Equal(v.Shape(), []int{3, 2}) || !v.IsView() || !slices.Equal(v.ToHost(), x.ToHost()) {
		t.Errorf("Reshape(-1, 2) of [2 3]: shape %v, view %v, values %v", v.Shape(), v.IsView(), v.ToHost())
	}
	m := a.Move(x, 6)
	if !x.Released() || !slices.Equal(m.ToHost(), []float32{1, 2, 3, 4, 5, 6}) || m.DType() != dtype.BF16 {
		t.Errorf("Move: source released %v, moved values %v %v", x.Released(), m.ToHost(), m.DType())
	}
	panics(t, "cannot reshape", func() { a.Move(m, 4) })
	panics(t, "used after Release", func() { x.Buffer() })
	m.Release()
	y.Release()
	if live := dev.MemStats().Live.Total; live != 0 {
		t.Errorf("%d bytes live after releasing everything", live)
	}

	b := new(tensor.Arena)
	b.New(dev, dtype.F32, device.Temp, 1).Release() // the first chunks
	got := testing.AllocsPerRun(20, func() {
		b.New(dev, dtype.F32, device.Temp, 2, 2).Release()
	})
	if got > 0.1 {
		t.Errorf("%v allocations per tensor from an Arena, want a fraction (one per chunk)", got)
	}
}
