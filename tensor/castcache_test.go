package tensor_test

import (
	"math"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// TestCachedCast checks the life of a cached copy: made once and handed
// out again while the tensor is unchanged; converted again, in the same
// memory, after a recorded change; left alone when the writer says it
// updated it; accounted as Cast until the tensor is released, or until
// ReleaseCasts.
func TestCachedCast(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			dev := cpu.New()
			vals := []float32{0.1, -2.5, 3.14159, 1e-3, 65504, -0.0}
			w := tensor.FromSlice(dev, dtype.F32, device.Param, vals, 2, 3)
			want := func() []float32 {
				c := w.Cast(dt, device.Temp)
				defer c.Release()
				return c.ToHost()
			}
			c := w.CachedCast(dt)
			if got := c.ToHost(); !bitsEqual(got, want()) {
				t.Errorf("first copy %v, want %v", got, want())
			}
			if c.Category() != device.Cast || !slices.Equal(c.Shape(), w.Shape()) {
				t.Errorf("copy accounted as %v with shape %v; want cast and %v", c.Category(), c.Shape(), w.Shape())
			}
			allocs := dev.MemStats().Allocs
			if again := w.CachedCast(dt); again != c || dev.MemStats().Allocs != allocs {
				t.Error("second CachedCast of an unchanged tensor made a new copy")
			}

			// A write through CopyFrom is recorded by the tensor itself.
			src := tensor.FromSlice(dev, dtype.F32, device.Temp, []float32{1, 2, 3, 4, 5, 6}, 6)
			w.CopyFrom(src)
			if got := w.CachedCast(dt).ToHost(); !bitsEqual(got, want()) {
				t.Errorf("after CopyFrom: copy %v, want %v", got, want())
			}
			// A kernel's write is recorded by Modified.
			dev.Fill(w.Buffer(), 0.75)
			w.Modified()
			if got := w.CachedCast(dt); got != c || !bitsEqual(got.ToHost(), want()) {
				t.Errorf("after Fill and Modified: copy %v (same memory %v), want %v", got.ToHost(), got == c, want())
			}
			// A writer that updated the copy too says so, and it is kept.
			dev.Fill(w.Buffer(), 2)
			dev.Fill(c.Buffer(), -1) // not what a conversion of w makes, to tell them apart
			w.Modified(c)
			if got := w.CachedCast(dt).ToHost()[0]; got != -1 {
				t.Errorf("copy declared fresh was converted again: %v, want the writer's -1", got)
			}
			if w.CachedCopy(dt) != c || w.CachedCopy(dtype.F32) != nil {
				t.Error("CachedCopy does not return the copy in its dtype alone")
			}
			// ReleaseCasts frees the copy now; the next CachedCast makes
			// another.
			w.ReleaseCasts()
			if !c.Released() || w.CachedCopy(dt) != nil || dev.MemStats().Live.Category(device.Cast) != 0 {
				t.Error("ReleaseCasts left the copy")
			}
			if got := w.CachedCast(dt); got == c || !bitsEqual(got.ToHost(), want()) {
				t.Errorf("after ReleaseCasts: copy %v, want a new one of %v", got.ToHost(), want())
			}
			src.Release()
			w.Release()
			if s := dev.MemStats(); s.Live.Total != 0 || s.Peak.Category(device.Cast) != 6*2 {
				t.Errorf("after Release: live %d (want 0), cast peak %d (want 12)", s.Live.Total, s.Peak.Category(device.Cast))
			}
			if cur := w.CachedCopy(dt); cur != nil {
				t.Error("the copy outlived its tensor")
			}
		})
	}
}

// TestCachedCastFollowsMove checks that copies go with a tensor's buffer
// when Move hands it on, and are freed with the new owner.
func TestCachedCastFollowsMove(t *testing.T) {
	dev := cpu.New()
	w := tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1, 2}, 2)
	c := w.CachedCast(dtype.BF16)
	m := w.Move(1, 2)
	if m.CachedCast(dtype.BF16) != c {
		t.Error("the moved tensor made a new copy")
	}
	w.Release() // released by Move without freeing: must not free the copy
	if c.Released() {
		t.Fatal("copy freed with the tensor Move emptied")
	}
	m.Release()
	if !c.Released() || dev.MemStats().Live.Total != 0 {
		t.Errorf("after releasing the new owner: copy released %v, live %d", c.Released(), dev.MemStats().Live.Total)
	}
}

func TestCachedCastPanics(t *testing.T) {
	dev := cpu.New()
	w := tensor.FromSlice(dev, dtype.F32, device.Param, []float32{1, 2}, 2)
	panics(t, "already f32", func() { w.CachedCast(dtype.F32) })
	panics(t, "view", func() { w.Reshape(2, 1).CachedCast(dtype.F16) })
	w.Release()
	panics(t, "used after Release", func() { w.CachedCast(dtype.F16) })
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}
