package datasets

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// cropFlipReference is the definition, step by step: pad with zeros, take the
// window at (top, left), mirror.
func cropFlipReference(src []float32, c, h, w, pad, top, left int, flip bool) []float32 {
	ph, pw := h+2*pad, w+2*pad
	padded := make([]float32, c*ph*pw)
	for ch := range c {
		for y := range h {
			for x := range w {
				padded[(ch*ph+y+pad)*pw+x+pad] = src[(ch*h+y)*w+x]
			}
		}
	}
	out := make([]float32, c*h*w)
	for ch := range c {
		for y := range h {
			for x := range w {
				sx := x
				if flip {
					sx = w - 1 - x
				}
				out[(ch*h+y)*w+x] = padded[(ch*ph+y+top)*pw+sx+left]
			}
		}
	}
	return out
}

func TestCropFlipKnownOffset(t *testing.T) {
	img := []float32{
		1, 2, 3,
		4, 5, 6,
		7, 8, 9,
	}
	tests := []struct {
		top, left int
		flip      bool
		want      []float32
	}{
		{1, 1, false, img}, // the centre window is the image itself
		{0, 2, false, []float32{
			0, 0, 0,
			2, 3, 0,
			5, 6, 0,
		}},
		{0, 2, true, []float32{
			0, 0, 0,
			0, 3, 2,
			0, 6, 5,
		}},
		{2, 0, false, []float32{
			0, 4, 5,
			0, 7, 8,
			0, 0, 0,
		}},
		{1, 1, true, []float32{
			3, 2, 1,
			6, 5, 4,
			9, 8, 7,
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("top=%d,left=%d,flip=%v", tt.top, tt.left, tt.flip), func(t *testing.T) {
			got := slices.Clone(img)
			cropFlip(got, []int{1, 3, 3}, 1, tt.top, tt.left, tt.flip)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCropFlipAllOffsets compares the in-place crop with the reference for
// every offset, both flips, and paddings up to larger than the image.
func TestCropFlipAllOffsets(t *testing.T) {
	shapes := [][]int{{2, 3, 4}, {4, 3}, {3, 5, 5}}
	for _, shape := range shapes {
		c, h, w := 1, shape[0], shape[1]
		if len(shape) == 3 {
			c, h, w = shape[0], shape[1], shape[2]
		}
		src := make([]float32, c*h*w)
		for i := range src {
			src[i] = float32(i + 1)
		}
		for _, pad := range []int{0, 1, 2, 6} {
			for top := range 2*pad + 1 {
				for left := range 2*pad + 1 {
					for _, flip := range []bool{false, true} {
						got := slices.Clone(src)
						cropFlip(got, shape, pad, top, left, flip)
						want := cropFlipReference(src, c, h, w, pad, top, left, flip)
						if !slices.Equal(got, want) {
							t.Fatalf("shape %v pad %d top %d left %d flip %v:\ngot  %v\nwant %v", shape, pad, top, left, flip, got, want)
						}
					}
				}
			}
		}
	}
}

func TestRandomCropFlipDraws(t *testing.T) {
	shape := []int{1, 4, 4}
	src := make([]float32, 16)
	for i := range src {
		src[i] = float32(i + 1)
	}
	aug := RandomCropFlip(1)
	seen := map[[3]int]int{}
	for seed := range uint64(360) {
		// The documented draws: row offset, column offset, flip.
		want := slices.Clone(src)
		r := rand.New(rand.NewPCG(seed, 1))
		top, left, flip := r.IntN(3), r.IntN(3), r.IntN(2) == 1
		cropFlip(want, shape, 1, top, left, flip)

		got := slices.Clone(src)
		aug(got, shape, rand.New(rand.NewPCG(seed, 1)))
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: got %v, want the crop at (%d, %d) flip %v: %v", seed, got, top, left, flip, want)
		}
		f := 0
		if flip {
			f = 1
		}
		seen[[3]int{top, left, f}]++
	}
	// 18 outcomes, 20 expected of each; all must occur and none dominate.
	if len(seen) != 18 {
		t.Errorf("saw %d of the 18 (offset, flip) outcomes: %v", len(seen), seen)
	}
	for k, n := range seen {
		if n < 5 || n > 40 {
			t.Errorf("outcome %v drawn %d times in 360, want about 20", k, n)
		}
	}
}

// TestAugmentInPipeline checks each augmented sample that Batches yields is
// one of the 18 crops and flips of its original.
func TestAugmentInPipeline(t *testing.T) {
	d := Synthetic(30, []int{2, 3, 3}, 30, 5)
	for i := range d.Y { // the label identifies the sample
		d.Y[i] = int32(i)
	}
	for b := range Batches(d, 4, Shuffle(3), Workers(2), Augment(RandomCropFlip(1))) {
		for j, y := range b.Y {
			got := b.X.Data[j*18 : (j+1)*18]
			orig, _ := d.Sample(int(y))
			found := false
			for top := range 3 {
				for left := range 3 {
					for _, flip := range []bool{false, true} {
						found = found || slices.Equal(got, cropFlipReference(orig, 2, 3, 3, 1, top, left, flip))
					}
				}
			}
			if !found {
				t.Fatalf("batch %d row %d: %v is no crop or flip of sample %d %v", b.Index, j, got, y, orig)
			}
		}
	}
	if fresh := Synthetic(30, []int{2, 3, 3}, 30, 5); !slices.Equal(d.X, fresh.X) {
		t.Error("augmentation changed the data set itself; it must work on the batch's copy")
	}
}

// TestPermutationUniform checks the shuffle is a fair one: every ordering of
// three items about equally often over many seeds.
func TestPermutationUniform(t *testing.T) {
	counts := map[[3]int]int{}
	const trials = 6000
	for seed := range uint64(trials) {
		p := permutation(3, seed, 0)
		counts[[3]int(p)]++
	}
	if len(counts) != 6 {
		t.Fatalf("saw %d of the 6 orderings: %v", len(counts), counts)
	}
	for p, n := range counts {
		// Expected 1000, standard deviation about 29: 150 is over 5 sigma.
		if n < 850 || n > 1150 {
			t.Errorf("ordering %v came %d times in %d, want about %d", p, n, trials, trials/6)
		}
	}
}

func TestBoundedRange(t *testing.T) {
	src := rand.NewPCG(1, 2)
	for _, n := range []uint64{1, 2, 3, 7, 1 << 33, 1<<64 - 1} {
		for range 1000 {
			if v := bounded(src, n); v >= n {
				t.Fatalf("bounded(%d) = %d, want < %d", n, v, n)
			}
		}
	}
}
