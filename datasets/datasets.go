// Package datasets loads image-classification data sets into memory and serves
// them as mini-batches.
//
// The loaders read the published file formats themselves: MNIST and
// Fashion-MNIST in IDX (gzipped or not), CIFAR-10 in its binary version. Each
// returns a [Dataset]: every sample already normalised to float32, as
// torchvision's ToTensor and Normalize would leave it. [Batches] then turns a
// Dataset into a range-over-func sequence of [Batch] values, shuffled by a seed,
// optionally augmented, and prepared ahead of the training loop by background
// workers whose output does not depend on how they were scheduled.
//
// Where the files live follows one rule everywhere: a -data flag, else
// $MIXPREC_DATA, else ./data (see [Root] and [Dir]).
package datasets

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/mixprec/mixprec/tensor"
)

// Dataset is a labelled data set held entirely in memory.
//
// Sample i is X[i*m:(i+1)*m] with m = tensor.Numel(Shape), stored row-major in
// Shape; its label is Y[i]. A Dataset is read-only once built: views made by
// [Dataset.Reshape] and [Dataset.Slice] share X and Y with it, and [Batches]
// reads it from several goroutines.
type Dataset struct {
	// Name says what the data are, e.g. "mnist/train"; it contains
	// "synthetic" for generated data so that no result can pass for a real one.
	Name string
	// Shape is the shape of one sample, e.g. [1 28 28] (channels, height, width).
	Shape []int
	// X holds the samples back to back, normalised.
	X []float32
	// Y holds one label per sample, in [0, Classes).
	Y []int32
	// Classes is the number of distinct labels.
	Classes int
}

// Len is the number of samples.
func (d *Dataset) Len() int { return len(d.Y) }

// Sample returns sample i and its label. x aliases d.X.
func (d *Dataset) Sample(i int) (x []float32, y int32) {
	if i < 0 || i >= d.Len() {
		panic(fmt.Sprintf("datasets: Sample(%d) out of range for %s with %d samples", i, d.Name, d.Len()))
	}
	m := tensor.Numel(d.Shape)
	return d.X[i*m : (i+1)*m], d.Y[i]
}

// Reshape returns a view of d whose samples have the given shape, e.g.
// Reshape(784) to feed MNIST to a multilayer perceptron. Nothing is copied; d
// itself is unchanged. The new shape must have as many elements as the old.
func (d *Dataset) Reshape(shape ...int) *Dataset {
	if tensor.Numel(shape) != tensor.Numel(d.Shape) {
		panic(fmt.Sprintf("datasets: Reshape %s samples from %v to %v: %d elements != %d",
			d.Name, d.Shape, shape, tensor.Numel(d.Shape), tensor.Numel(shape)))
	}
	v := *d
	v.Shape = slices.Clone(shape)
	return &v
}

// Slice returns a view of samples [lo, hi) of d, for quick runs on part of a
// data set. Nothing is copied.
func (d *Dataset) Slice(lo, hi int) *Dataset {
	if lo < 0 || hi < lo || hi > d.Len() {
		panic(fmt.Sprintf("datasets: Slice(%d, %d) out of range for %s with %d samples", lo, hi, d.Name, d.Len()))
	}
	m := tensor.Numel(d.Shape)
	v := *d
	v.Shape = slices.Clone(d.Shape)
	v.X = d.X[lo*m : hi*m : hi*m]
	v.Y = d.Y[lo:hi:hi]
	return &v
}

// check panics unless d is internally consistent; a Dataset assembled by hand
// with the wrong number of values would otherwise fail far from the mistake.
func (d *Dataset) check(op string) {
	if d == nil {
		panic(fmt.Sprintf("datasets: %s of a nil Dataset", op))
	}
	m := tensor.Numel(d.Shape)
	if len(d.X) != len(d.Y)*m {
		panic(fmt.Sprintf("datasets: %s of %s: %d values for %d samples of shape %v (want %d)",
			op, d.Name, len(d.X), len(d.Y), d.Shape, len(d.Y)*m))
	}
}

// Synthetic returns n samples of the given shape filled with standard normal
// noise, with labels uniform in [0, classes), all drawn from seed. It exists
// to measure speed and memory without a download; there is nothing in it to
// learn, and its Name says "synthetic" so that no report mistakes it for real
// data.
func Synthetic(n int, sampleShape []int, classes int, seed uint64) *Dataset {
	if n < 0 || classes < 1 {
		panic(fmt.Sprintf("datasets: Synthetic(n=%d, classes=%d): need n >= 0 and classes >= 1", n, classes))
	}
	m := tensor.Numel(sampleShape)
	rng := rand.New(rand.NewPCG(seed, syntheticStream))
	d := &Dataset{
		Name:    "synthetic",
		Shape:   slices.Clone(sampleShape),
		X:       makeSamples(n * m),
		Y:       make([]int32, n),
		Classes: classes,
	}
	for i := range d.X {
		d.X[i] = float32(rng.NormFloat64())
	}
	for i := range d.Y {
		d.Y[i] = int32(rng.IntN(classes))
	}
	return d
}

// syntheticStream keeps Synthetic's random numbers apart from those of a
// shuffle or an augmentation that a caller seeds with the same value.
const syntheticStream = 0x73796e7468657469 // "syntheti"

// Root is the directory that holds all data sets: flag when it is not empty
// (a program's -data flag), else $MIXPREC_DATA when set, else ./data.
func Root(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv("MIXPREC_DATA"); env != "" {
		return env
	}
	return "./data"
}

// Dir is the directory of the named data set under [Root](""), e.g.
// Dir("mnist"). Programs with a -data flag join Root(flag) and the name
// themselves.
func Dir(name string) string { return filepath.Join(Root(""), name) }

// SystemFashionMNISTDir is where Debian's dataset-fashion-mnist package
// installs the four Fashion-MNIST files.
const SystemFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTDir is Dir("fashion-mnist") when that directory exists, else
// [SystemFashionMNISTDir]: a copy the user placed in the data directory wins,
// and a machine with the Debian package needs no copy at all.
func FashionMNISTDir() string {
	dir := Dir("fashion-mnist")
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir
	}
	return SystemFashionMNISTDir
}
