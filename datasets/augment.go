package datasets

import (
	"fmt"
	"math/rand/v2"
)

// AugmentFunc transforms one sample in place. dst holds the sample, of shape
// sampleShape (which it must not modify); rng is seeded for this sample, this
// epoch and this seed alone, and is the only randomness it may use so that
// results are reproducible. See [Augment].
type AugmentFunc func(dst []float32, sampleShape []int, rng *rand.Rand)

// RandomCropFlip is the standard CIFAR augmentation, torchvision's
// RandomCrop(size, padding=pad) followed by RandomHorizontalFlip(): it pads
// the image with pad zeros on every side, crops a window of the original size
// at a uniformly random offset, then mirrors it left to right with
// probability 0.5. Samples must have shape [C H W] or [H W].
//
// The padding is zero in the normalised values the data set holds, which is
// the per-channel mean colour, where torchvision pads the raw image with black
// before normalising. The difference only touches the border strip and does
// not matter to training; it spares the augmentation from knowing the
// normalisation.
//
// The draws from rng are, in order: the row offset, the column offset (each
// rng.IntN(2*pad+1)) and the flip (rng.IntN(2) == 1).
func RandomCropFlip(pad int) AugmentFunc {
	if pad < 0 {
		panic(fmt.Sprintf("datasets: RandomCropFlip(%d): pad must be >= 0", pad))
	}
	return func(dst []float32, shape []int, rng *rand.Rand) {
		top := rng.IntN(2*pad + 1)
		left := rng.IntN(2*pad + 1)
		flip := rng.IntN(2) == 1
		cropFlip(dst, shape, pad, top, left, flip)
	}
}

// cropFlip pads the image in dst with pad zeros each side, keeps the window
// whose top-left corner is (top, left) in the padded image, and mirrors it
// horizontally if flip. It works in place, so that the workers allocate
// nothing per sample: output row y comes from input row y+dy (dy = top-pad),
// so rows are visited in the order that reads each input row before it is
// overwritten, and copy moves overlapping runs within a row correctly.
func cropFlip(dst []float32, shape []int, pad, top, left int, flip bool) {
	c, h, w := imageShape("RandomCropFlip", dst, shape)
	dy, dx := top-pad, left-pad
	// Columns of the output that have a source column: [x0, x1).
	x0, x1 := max(0, -dx), min(w, w-dx)
	for ch := range c {
		img := dst[ch*h*w : (ch+1)*h*w]
		for n := range h {
			y := n
			if dy < 0 {
				y = h - 1 - n // moving rows down: start at the bottom
			}
			row := img[y*w : (y+1)*w]
			sy := y + dy
			if sy < 0 || sy >= h || x0 >= x1 {
				clear(row)
				continue
			}
			copy(row[x0:x1], img[sy*w+x0+dx:sy*w+x1+dx])
			clear(row[:x0])
			clear(row[x1:])
		}
		if flip {
			for y := range h {
				row := img[y*w : (y+1)*w]
				for i, j := 0, w-1; i < j; i, j = i+1, j-1 {
					row[i], row[j] = row[j], row[i]
				}
			}
		}
	}
}

// imageShape returns the channels, rows and columns of a sample of shape
// [C H W] or [H W] (one channel), and panics, naming op, on another shape
// or on a dst that does not hold one sample of it.
func imageShape(op string, dst []float32, shape []int) (c, h, w int) {
	switch len(shape) {
	case 2:
		c, h, w = 1, shape[0], shape[1]
	case 3:
		c, h, w = shape[0], shape[1], shape[2]
	default:
		panic(fmt.Sprintf("datasets: %s needs samples of shape [C H W] or [H W], got %v", op, shape))
	}
	if len(dst) != c*h*w {
		panic(fmt.Sprintf("datasets: %s: %d values for a sample of shape %v", op, len(dst), shape))
	}
	return c, h, w
}

// RandomShift translates each image by up to max pixels in each direction
// (uniformly, independently for rows and columns), filling the uncovered
// strip with fill: torchvision's RandomAffine(translate=...) with integer
// shifts. For MNIST, fill is the normalised black, (0 - mean) / std.
// Samples must have shape [C H W] or [H W].
//
// The draws from rng are the row shift, then the column shift (each
// rng.IntN(2*max+1) - max).
func RandomShift(max int, fill float32) AugmentFunc {
	if max < 0 {
		panic(fmt.Sprintf("datasets: RandomShift(%d): max must be >= 0", max))
	}
	return func(dst []float32, shape []int, rng *rand.Rand) {
		dy := rng.IntN(2*max+1) - max
		dx := rng.IntN(2*max+1) - max
		shift(dst, shape, dy, dx, fill)
	}
}

// shift moves the image in dst down by dy rows and right by dx columns in
// place, filling what is uncovered with fill.
func shift(dst []float32, shape []int, dy, dx int, fill float32) {
	c, h, w := imageShape("RandomShift", dst, shape)
	for ch := range c {
		plane := dst[ch*h*w : (ch+1)*h*w]
		// Visit rows so that each source row is read before it is
		// overwritten: bottom-up when moving down, top-down when moving up.
		for k := range h {
			y := k
			if dy > 0 {
				y = h - 1 - k
			}
			row := plane[y*w : (y+1)*w]
			sy := y - dy
			if sy < 0 || sy >= h || dx >= w || -dx >= w {
				for i := range row {
					row[i] = fill
				}
				continue
			}
			src := plane[sy*w : (sy+1)*w]
			if dx >= 0 {
				copy(row[dx:], src[:w-dx])
				for i := range dx {
					row[i] = fill
				}
			} else {
				copy(row, src[-dx:])
				for i := w + dx; i < w; i++ {
					row[i] = fill
				}
			}
		}
	}
}
