package datasets

import (
	"slices"
	"testing"
)

func TestShift(t *testing.T) {
	img := func() []float32 { return []float32{1, 2, 3, 4, 5, 6, 7, 8, 9} } // 3x3
	cases := []struct {
		dy, dx int
		want   []float32
	}{
		{0, 0, []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{1, 0, []float32{0, 0, 0, 1, 2, 3, 4, 5, 6}},
		{-1, 0, []float32{4, 5, 6, 7, 8, 9, 0, 0, 0}},
		{0, 1, []float32{0, 1, 2, 0, 4, 5, 0, 7, 8}},
		{0, -2, []float32{3, 0, 0, 6, 0, 0, 9, 0, 0}},
		{1, -1, []float32{0, 0, 0, 2, 3, 0, 5, 6, 0}},
		{3, 0, []float32{0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{0, 5, []float32{0, 0, 0, 0, 0, 0, 0, 0, 0}},
	}
	for _, c := range cases {
		got := img()
		shift(got, []int{1, 3, 3}, c.dy, c.dx, 0)
		if !slices.Equal(got, c.want) {
			t.Errorf("shift(%d, %d) = %v, want %v", c.dy, c.dx, got, c.want)
		}
	}
	got := img()
	shift(got, []int{3, 3}, 1, 1, -1)
	if want := []float32{-1, -1, -1, -1, 1, 2, -1, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("fill -1: %v, want %v", got, want)
	}
}
