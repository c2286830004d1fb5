package datasets_test

import (
	"slices"
	"testing"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/dtype"
)

// TestBits: with Bits, each batch's X16 holds X rounded to the dtype, in
// X's shape, in every loader mode, after augmentation and for a short last
// batch; without it (or with Bits(F32)) X16 is empty. A dtype other than
// F32, F16 and BF16 panics.
func TestBits(t *testing.T) {
	d := datasets.Synthetic(103, []int{2, 3}, 4, 9)
	for _, mode := range loaderModes {
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			n := 0
			opts := append(slices.Clone(mode.opts), datasets.Bits(dt), datasets.Shuffle(3),
				datasets.Augment(datasets.RandomShift(1, -0.5)))
			for b := range datasets.Batches(d, 10, opts...) {
				if !slices.Equal(b.X16.Shape, b.X.Shape) || b.X16.DType != dt || len(b.X16.Bits) != len(b.X.Data) {
					t.Fatalf("%s/%v: batch %d: X16 %v %v with %d patterns, X %v with %d values", mode.name, dt, b.Index, b.X16.DType, b.X16.Shape, len(b.X16.Bits), b.X.Shape, len(b.X.Data))
				}
				want := make([]uint16, len(b.X.Data))
				dtype.Encode(dt, want, b.X.Data)
				if !slices.Equal(b.X16.Bits, want) {
					t.Fatalf("%s/%v: batch %d: X16 is not X rounded to %v", mode.name, dt, b.Index, dt)
				}
				n += len(b.Y)
			}
			if n != d.Len() {
				t.Errorf("%s/%v: %d samples, want %d", mode.name, dt, n, d.Len())
			}
		}
		for _, opts := range [][]datasets.Option{mode.opts, append(slices.Clone(mode.opts), datasets.Bits(dtype.F32))} {
			for b := range datasets.Batches(d, 10, opts...) {
				if b.X16.Bits != nil {
					t.Fatalf("%s: X16 set without Bits", mode.name)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Bits(8) did not panic")
		}
	}()
	datasets.Bits(dtype.DType(8))
}

// TestRounded: batches over a rounded data set, with Bits in its dtype and
// no augmentation, carry the same labels and the same X16 patterns as
// rounding the float32 batches of the original gives, in every loader mode,
// shuffled, sharded, and through Slice and Reshape views made before or
// after rounding; they have no X. With augmentation, or Bits in the other
// dtype, the loader rounds the float32 batch as before. Rounded(F32) panics.
func TestRounded(t *testing.T) {
	d := datasets.Synthetic(103, []int{2, 3}, 4, 9)
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		r := d.Rounded(dt)
		views := []struct {
			name       string
			plain, rnd *datasets.Dataset
		}{
			{"whole", d, r},
			{"slice after", d.Slice(7, 90), r.Slice(7, 90)},
			{"slice before", d.Slice(7, 90), d.Slice(7, 90).Rounded(dt)},
			{"reshape", d.Reshape(6), r.Reshape(6)},
		}
		for _, v := range views {
			for _, mode := range loaderModes {
				for _, extra := range [][]datasets.Option{nil, {datasets.Shard(1, 3)}} {
					opts := append(slices.Clone(mode.opts), append(slices.Clone(extra), datasets.Bits(dt), datasets.Shuffle(5))...)
					var want []datasets.Batch
					for b := range datasets.Batches(v.plain, 10, opts...) {
						b.X16.Bits, b.X16.Shape, b.Y = slices.Clone(b.X16.Bits), slices.Clone(b.X16.Shape), slices.Clone(b.Y)
						want = append(want, b)
					}
					i := 0
					for b := range datasets.Batches(v.rnd, 10, opts...) {
						w := want[i]
						if b.X.Data != nil || b.X.Shape != nil {
							t.Fatalf("%v %s %s: batch %d has an X %v", dt, v.name, mode.name, b.Index, b.X.Shape)
						}
						if b.Index != w.Index || !slices.Equal(b.Y, w.Y) || !slices.Equal(b.X16.Shape, w.X16.Shape) ||
							b.X16.DType != dt || !slices.Equal(b.X16.Bits, w.X16.Bits) {
							t.Fatalf("%v %s %s: batch %d differs from rounding the float32 batch", dt, v.name, mode.name, b.Index)
						}
						i++
					}
					if i != len(want) {
						t.Fatalf("%v %s %s: %d batches, want %d", dt, v.name, mode.name, i, len(want))
					}
				}
			}
		}
		other := dtype.BF16
		if dt == dtype.BF16 {
			other = dtype.F16
		}
		for _, opts := range [][]datasets.Option{
			{datasets.Bits(dt), datasets.Augment(datasets.RandomShift(1, -0.5))},
			{datasets.Bits(other)},
		} {
			for b := range datasets.Batches(r, 10, opts...) {
				if len(b.X.Data) != len(b.X16.Bits) || len(b.X.Data) == 0 {
					t.Fatalf("%v: a batch that must be gathered in float32 has X of %d values and X16 of %d", dt, len(b.X.Data), len(b.X16.Bits))
				}
				want := make([]uint16, len(b.X.Data))
				dtype.Encode(b.X16.DType, want, b.X.Data)
				if !slices.Equal(b.X16.Bits, want) {
					t.Fatalf("%v: X16 is not X rounded", dt)
				}
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Rounded(F32) did not panic")
		}
	}()
	d.Rounded(dtype.F32)
}
