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
