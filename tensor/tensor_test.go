package tensor_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

func panics(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), want) {
			t.Errorf("recovered %v, want a panic mentioning %q", r, want)
		}
	}()
	f()
}

func TestCreation(t *testing.T) {
	dev := cpu.New()
	for _, dt := range dtype.All {
		z := tensor.Zeros(dev, dt, device.Temp, 2, 3)
		f := tensor.Full(dev, dt, device.Temp, 0.1, 3)
		if got := z.ToHost(); !slices.Equal(got, make([]float32, 6)) {
			t.Errorf("%v Zeros = %v", dt, got)
		}
		if got, want := f.ToHost()[0], dtype.Round(dt, 0.1); got != want {
			t.Errorf("%v Full(0.1) = %v, want %v (rounded)", dt, got, want)
		}
		z.Release()
		f.Release()
	}
	if s := dev.MemStats(); s.Live.Total != 0 || s.Peak.Total != 6*4+3*4 {
		t.Errorf("after releasing everything: live %d, peak %d", s.Live.Total, s.Peak.Total)
	}
}

func TestSeededRandom(t *testing.T) {
	dev := cpu.New()
	a := tensor.Normal(dev, dtype.F32, device.Temp, rand.New(rand.NewPCG(1, 2)), 0, 1, 100)
	b := tensor.Normal(dev, dtype.F32, device.Temp, rand.New(rand.NewPCG(1, 2)), 0, 1, 100)
	c := tensor.Uniform(dev, dtype.F32, device.Temp, rand.New(rand.NewPCG(1, 2)), -2, 3, 1000)
	if !slices.Equal(a.ToHost(), b.ToHost()) {
		t.Error("same seed, different values")
	}
	for _, v := range c.ToHost() {
		if v < -2 || v >= 3 {
			t.Fatalf("Uniform(-2, 3) gave %v", v)
		}
	}
}

func TestReshapeAndMove(t *testing.T) {
	dev := cpu.New()
	x := tensor.FromSlice(dev, dtype.F32, device.Temp, []float32{1, 2, 3, 4, 5, 6}, 2, 3)
	v := x.Reshape(-1)
	if !slices.Equal(v.Shape(), []int{6}) || !v.IsView() {
		t.Errorf("Reshape(-1): shape %v, view %v", v.Shape(), v.IsView())
	}
	v.SetCategory(device.Activation) // accounts the owner's buffer
	if got := dev.MemStats().Live.Category(device.Activation); got != 24 {
		t.Errorf("activation bytes %d after SetCategory on a view, want 24", got)
	}
	v.Release() // a view frees nothing
	if x.Released() || dev.MemStats().Live.Total != 24 {
		t.Error("releasing a view freed its owner's memory")
	}
	m := x.Move(3, 2)
	if !x.Released() || !slices.Equal(m.ToHost(), []float32{1, 2, 3, 4, 5, 6}) {
		t.Error("Move did not take over the buffer")
	}
	panics(t, "cannot reshape [3 2] (6 elements) to [4 -1]", func() { m.Reshape(4, -1) })
	panics(t, "used after Release", func() { x.ToHost() })
	m.Release()
	m.Release() // twice is harmless
}

func TestMismatchPanics(t *testing.T) {
	dev := cpu.New()
	a := tensor.Zeros(dev, dtype.F32, device.Temp, 2, 3)
	b := tensor.Zeros(dev, dtype.F32, device.Temp, 3, 2)
	panics(t, "shape mismatch [2 3] vs [3 2]", func() { tensor.SameShape("op", a, b) })
	panics(t, "different devices", func() { tensor.SameDevice("op", a, tensor.Zeros(cpu.New(), dtype.F32, device.Temp, 1)) })
	panics(t, "5 values for shape [2 3]", func() { tensor.FromSlice(dev, dtype.F32, device.Temp, make([]float32, 5), 2, 3) })
	panics(t, "tensor of shape [2 3] has 6 elements", func() { a.Item() })
}

// TestReleasedKeepsShapeAndDType: a released tensor still says its shape
// and dtype (a backward pass reads them of results freed early), in every
// dtype, for tensors made, moved and viewed; and Viewed tells a tensor of
// which a view was made, through the view too.
func TestReleasedKeepsShapeAndDType(t *testing.T) {
	dev := cpu.New()
	for _, dt := range dtype.All {
		x := tensor.Zeros(dev, dt, device.Temp, 2, 3)
		y := tensor.Zeros(dev, dt, device.Temp, 4)
		if x.Viewed() {
			t.Errorf("%v: a fresh tensor reports a view of it", dt)
		}
		v := x.Reshape(3, 2)
		if !x.Viewed() || !v.Viewed() || y.Viewed() {
			t.Errorf("%v: Viewed after a Reshape: owner %v, view %v, other %v; want true, true, false", dt, x.Viewed(), v.Viewed(), y.Viewed())
		}
		m := y.Move(2, 2)
		for _, c := range []struct {
			name  string
			t     *tensor.Tensor
			shape []int
		}{{"made", x, []int{2, 3}}, {"view", v, []int{3, 2}}, {"moved from", y, []int{4}}, {"moved", m, []int{2, 2}}} {
			c.t.Release()
			if !slices.Equal(c.t.Shape(), c.shape) || c.t.DType() != dt {
				t.Errorf("%v %s, released: shape %v dtype %v, want %v %v", dt, c.name, c.t.Shape(), c.t.DType(), c.shape, dt)
			}
		}
	}
	if live := dev.MemStats().Live.Total; live != 0 {
		t.Errorf("%d bytes live after releasing everything", live)
	}
}
