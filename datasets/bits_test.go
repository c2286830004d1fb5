package datasets_test

import (
	"slices"
	"testing"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/dtype"
)

// TestBits: with Bits, each batch carries in X16 the patterns of the float32
// batch that the same loader gives without Bits, rounded to the dtype, in its
// shape, with the same labels, and no X; in every loader mode, with and
// without augmentation, shuffled, sharded and for a short last batch.
// Without Bits (or with Bits(F32)) X16 is empty. A dtype other than F32, F16
// and BF16 panics.
func TestBits(t *testing.T) {
	d := datasets.Synthetic(103, []int{2, 3}, 4, 9)
	for _, mode := range loaderModes {
		for _, extra := range [][]datasets.Option{
			{datasets.Shuffle(3)},
			{datasets.Shuffle(3), datasets.Augment(datasets.RandomShift(1, -0.5))},
			{datasets.Shard(1, 3)},
		} {
			opts := append(slices.Clone(mode.opts), extra...)
			var want []datasets.Batch
			for b := range datasets.Batches(d, 10, opts...) {
				b.X.Data, b.X.Shape, b.Y = slices.Clone(b.X.Data), slices.Clone(b.X.Shape), slices.Clone(b.Y)
				want = append(want, b)
			}
			for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
				i := 0
				for b := range datasets.Batches(d, 10, append(slices.Clone(opts), datasets.Bits(dt))...) {
					w := want[i]
					bits := make([]uint16, len(w.X.Data))
					dtype.Encode(dt, bits, w.X.Data)
					if b.X.Data != nil || b.X.Shape != nil {
						t.Fatalf("%s/%v: batch %d has an X beside X16", mode.name, dt, b.Index)
					}
					if b.Index != w.Index || !slices.Equal(b.Y, w.Y) || !slices.Equal(b.X16.Shape, w.X.Shape) ||
						b.X16.DType != dt || !slices.Equal(b.X16.Bits, bits) {
						t.Fatalf("%s/%v: batch %d: X16 %v %v is not the float32 batch %v rounded, or its labels differ", mode.name, dt, b.Index, b.X16.DType, b.X16.Shape, w.X.Shape)
					}
					i++
				}
				if i != len(want) {
					t.Errorf("%s/%v: %d batches, want %d", mode.name, dt, i, len(want))
				}
			}
		}
		for _, opts := range [][]datasets.Option{mode.opts, append(slices.Clone(mode.opts), datasets.Bits(dtype.F32))} {
			for b := range datasets.Batches(d, 10, opts...) {
				if b.X16.Bits != nil || b.X.Data == nil {
					t.Fatalf("%s: X16 set, or X not, without Bits", mode.name)
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
