package datasets_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/datasets"
)

func TestFromContinuesEpoch(t *testing.T) {
	d := datasets.Synthetic(103, []int{1, 6, 6}, 10, 4)
	base := []datasets.Option{datasets.Shuffle(7), datasets.Epoch(3), datasets.Augment(datasets.RandomShift(1, 0))}
	type seen struct {
		index int
		x     []float32
		y     []int32
	}
	collect := func(opts ...datasets.Option) []seen {
		var out []seen
		for b := range datasets.Batches(d, 10, append(slices.Clone(base), opts...)...) {
			out = append(out, seen{b.Index, slices.Clone(b.X.Data), slices.Clone(b.Y)})
		}
		return out
	}
	full := collect()
	if len(full) != 11 || datasets.NumBatches(d, 10, append(base, datasets.From(4))...) != 11 {
		t.Fatalf("%d batches, want 11 (and NumBatches 11 whatever From)", len(full))
	}
	for _, k := range []int{0, 1, 4, 10, 11} {
		for _, mode := range []struct {
			name string
			opts []datasets.Option
		}{
			{"sync", []datasets.Option{datasets.Prefetch(0)}},
			{"async", []datasets.Option{datasets.Prefetch(2), datasets.Workers(3)}},
		} {
			t.Run(fmt.Sprintf("from%d/%s", k, mode.name), func(t *testing.T) {
				got := collect(append(mode.opts, datasets.From(k))...)
				want := full[k:]
				if len(got) != len(want) {
					t.Fatalf("%d batches from %d, want %d", len(got), k, len(want))
				}
				for i := range got {
					if got[i].index != want[i].index || !slices.Equal(got[i].x, want[i].x) || !slices.Equal(got[i].y, want[i].y) {
						t.Fatalf("batch %d differs from the uninterrupted pass's (index %d, want %d)", i, got[i].index, want[i].index)
					}
				}
			})
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("From past the end of the epoch did not panic")
		}
	}()
	datasets.Batches(d, 10, datasets.From(12))
}
