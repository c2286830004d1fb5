package datasets_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/datasets"
)

// ids makes a data set whose sample i holds the value i, so batches show
// which samples they hold.
func ids(n int) *datasets.Dataset {
	d := datasets.Synthetic(n, []int{1, 2, 2}, 10, 1)
	for i := range n {
		for j := range 4 {
			d.X[i*4+j] = float32(i)
		}
	}
	return d
}

func TestShardSplitsEpoch(t *testing.T) {
	for _, n := range []int{100, 103} {
		for _, size := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("n%d/ranks%d", n, size), func(t *testing.T) {
				d := ids(n)
				count := map[int]int{}
				per := -1
				for rank := range size {
					var got []int
					for b := range datasets.Batches(d, 8, datasets.Shuffle(3), datasets.Epoch(2), datasets.Shard(rank, size)) {
						for i := range b.Y {
							got = append(got, int(b.X.Data[i*4]))
						}
					}
					if per >= 0 && len(got) != per {
						t.Fatalf("rank %d has %d samples, rank 0 %d", rank, len(got), per)
					}
					per = len(got)
					if want := (n + size - 1) / size; per != want {
						t.Fatalf("rank %d has %d samples, want ceil(%d/%d) = %d", rank, per, n, size, want)
					}
					for _, i := range got {
						count[i]++
					}
				}
				if len(count) != n {
					t.Fatalf("the ranks together saw %d distinct samples, want all %d", len(count), n)
				}
				padding := per*size - n
				twice := 0
				for _, c := range count {
					if c > 2 {
						t.Fatalf("a sample was seen %d times", c)
					}
					if c == 2 {
						twice++
					}
				}
				if twice != padding {
					t.Errorf("%d samples seen twice, want the %d of padding", twice, padding)
				}
			})
		}
	}
}

// TestShardMatchesBigBatch checks that two ranks with batch 8 see, step by
// step, exactly the samples (augmented alike) one process sees with batch 16.
func TestShardMatchesBigBatch(t *testing.T) {
	d := datasets.Synthetic(96, []int{1, 6, 6}, 10, 2)
	opts := []datasets.Option{datasets.Shuffle(5), datasets.Epoch(1), datasets.Augment(datasets.RandomShift(1, 0))}
	var single [][]float32
	for b := range datasets.Batches(d, 16, opts...) {
		single = append(single, slices.Clone(b.X.Data))
	}
	m := 36
	for rank := range 2 {
		k := 0
		for b := range datasets.Batches(d, 8, append(slices.Clone(opts), datasets.Shard(rank, 2))...) {
			for j := range 8 {
				want := single[k][(rank+2*j)*m : (rank+2*j+1)*m]
				if !slices.Equal(b.X.Data[j*m:(j+1)*m], want) {
					t.Fatalf("rank %d batch %d sample %d differs from the single process's sample %d", rank, k, j, rank+2*j)
				}
			}
			k++
		}
		if k != len(single) {
			t.Errorf("rank %d took %d steps, the single process %d", rank, k, len(single))
		}
	}
}
