package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
)

// Normalisation constants of torchvision's MNIST and Fashion-MNIST recipes:
// the mean and standard deviation of the training pixels scaled to [0, 1].
const (
	MNISTMean        = 0.1307
	MNISTStd         = 0.3081
	FashionMNISTMean = 0.2860
	FashionMNISTStd  = 0.3530
)

// idxSet describes one of the data sets that come as four IDX files.
type idxSet struct {
	name      string // for Dataset.Name: "mnist", "fashion-mnist"
	title     string // for messages: "MNIST"
	mean, std float32
	fetch     string // how to get the files, for a missing directory
	// sums are the published files' SHA-256 digests, compressed and not,
	// which the files are checked against where the directory has no
	// SumsFile; nil for a data set that is read unchecked then.
	sums func() map[string]string
}

var (
	mnistSet = idxSet{
		name: "mnist", title: "MNIST", mean: MNISTMean, std: MNISTStd,
		fetch: "pass datasets.Download() to LoadMNIST to fetch it (in the mixprec repository, `make data` does the same)",
		sums: func() map[string]string {
			all := maps.Clone(mnistRawSums)
			maps.Copy(all, mnistSums)
			return all
		},
	}
	fashionSet = idxSet{
		name: "fashion-mnist", title: "Fashion-MNIST", mean: FashionMNISTMean, std: FashionMNISTStd,
		fetch: "install the Debian package dataset-fashion-mnist (it fills " + SystemFashionMNISTDir +
			") or copy the four files there",
	}
)

// LoadMNIST reads the MNIST training (60,000) and test (10,000) sets from dir,
// which holds train-images-idx3-ubyte, train-labels-idx1-ubyte,
// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each with or without a
// .gz suffix. Samples have shape [1 28 28], pixels scaled to [0, 1] and then
// standardised with [MNISTMean] and [MNISTStd], as torchvision's
// ToTensor and Normalize((0.1307,), (0.3081,)) do; labels are 0 to 9.
//
// Every file is checked against its SHA-256 as it is loaded, not only when
// it is downloaded: the published file's (compressed or not), or, where
// dir holds a [SumsFile], the digest that file lists, which is how a
// directory of other files in MNIST's format is read. A file that does not
// match is a *[SumError], so that a copy altered or cut short since it was
// fetched cannot train in place of MNIST.
//
// An empty dir means [DefaultDir]("mnist"). With [Download], files that are
// missing are first fetched into dir ([FetchMNIST]), printing progress to
// os.Stderr unless [Progress] says otherwise, and a file that fails its
// check is renamed aside (to NAME.corrupt) and fetched again.
func LoadMNIST(dir string, opts ...LoadOption) (train, test *Dataset, err error) {
	c := loadConfig{progress: os.Stderr, hint: mnistSet.fetch}
	for _, o := range opts {
		o(&c)
	}
	if dir == "" {
		if dir, err = DefaultDir("mnist"); err != nil {
			return nil, nil, err
		}
	}
	if !c.download {
		return loadIDXSet(mnistSet, dir, c.hint)
	}
	if err := FetchMNIST(dir, c.progress); err != nil {
		return nil, nil, err
	}
	train, test, err = loadIDXSet(mnistSet, dir, c.hint)
	var bad *SumError
	if !errors.As(err, &bad) {
		return train, test, err
	}
	// The cached copy is corrupt: keep it aside, not under a name the
	// loader reads, and fetch the file again.
	if err := os.Rename(bad.Path, bad.Path+".corrupt"); err != nil {
		return nil, nil, fmt.Errorf("datasets: moving the corrupt %s aside: %w", bad.Path, err)
	}
	if c.progress != nil {
		fmt.Fprintf(c.progress, "datasets: %s has SHA-256 %s, not %s; moved it to %s.corrupt and fetching it again\n",
			bad.Path, bad.Got, bad.Want, filepath.Base(bad.Path))
	}
	if err := FetchMNIST(dir, c.progress); err != nil {
		return nil, nil, err
	}
	return loadIDXSet(mnistSet, dir, c.hint)
}

// LoadFashionMNIST is [LoadMNIST] for Fashion-MNIST, whose files have the same
// names and format, standardised with [FashionMNISTMean] and [FashionMNISTStd].
// [FashionMNISTDir] finds the directory. Its files are checked against the
// directory's [SumsFile] when it has one; the system package's are not
// checked (the package manager does that).
func LoadFashionMNIST(dir string) (train, test *Dataset, err error) {
	return loadIDXSet(fashionSet, dir, fashionSet.fetch)
}

// loadIDXSet loads s from dir; hint says how to get the files.
func loadIDXSet(s idxSet, dir, hint string) (train, test *Dataset, err error) {
	if err := checkDir(dir, s.title, hint); err != nil {
		return nil, nil, err
	}
	var pinned map[string]string
	if s.sums != nil {
		pinned = s.sums()
	}
	sums, err := dirSums(dir, pinned, "the published "+s.title+" file")
	if err != nil {
		return nil, nil, err
	}
	train, err = loadIDXSplit(s, dir, "train", "train", sums, hint)
	if err != nil {
		return nil, nil, err
	}
	test, err = loadIDXSplit(s, dir, "t10k", "test", sums, hint)
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// checkDir turns a missing data directory into an error that says how to get
// the data, the one thing a user in that position needs to know.
func checkDir(dir, title, fetch string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("datasets: %s directory %s does not exist; %s: %w", title, dir, fetch, err)
	case err != nil:
		return fmt.Errorf("datasets: %s directory: %w", title, err)
	case !fi.IsDir():
		return fmt.Errorf("datasets: %s directory %s is not a directory", title, dir)
	}
	return nil
}

// loadIDXSplit reads the files named by prefix ("train" or "t10k") into the
// Dataset called s.name/split, each checked against sums first.
func loadIDXSplit(s idxSet, dir, prefix, split string, sums sums, hint string) (*Dataset, error) {
	imgPath, err := findIDX(s, dir, prefix+"-images-idx3-ubyte", hint)
	if err != nil {
		return nil, err
	}
	lblPath, err := findIDX(s, dir, prefix+"-labels-idx1-ubyte", hint)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{imgPath, lblPath} {
		if err := sums.check(p, hint); err != nil {
			return nil, err
		}
	}
	idims, pixels, err := ReadIDX(imgPath)
	if err != nil {
		return nil, err
	}
	ldims, labels, err := ReadIDX(lblPath)
	if err != nil {
		return nil, err
	}
	if len(idims) != 3 {
		return nil, fmt.Errorf("datasets: %s: images have dimensions %v, want [N 28 28]", imgPath, idims)
	}
	if idims[1] != 28 || idims[2] != 28 {
		return nil, fmt.Errorf("datasets: %s: images are %dx%d, want 28x28", imgPath, idims[1], idims[2])
	}
	if len(ldims) != 1 {
		return nil, fmt.Errorf("datasets: %s: labels have dimensions %v, want [N]", lblPath, ldims)
	}
	if idims[0] != ldims[0] {
		return nil, fmt.Errorf("datasets: %s holds %d images but %s holds %d labels", imgPath, idims[0], lblPath, ldims[0])
	}
	y := make([]int32, len(labels))
	for i, l := range labels {
		if l > 9 {
			return nil, fmt.Errorf("datasets: %s: label %d of sample %d is over 9", lblPath, l, i)
		}
		y[i] = int32(l)
	}
	lut := normTable(s.mean, s.std)
	x := makeSamples(len(pixels))
	for i, p := range pixels {
		x[i] = lut[p]
	}
	return &Dataset{Name: s.name + "/" + split, Shape: []int{1, 28, 28}, X: x, Y: y, Classes: 10}, nil
}

// findIDX prefers the uncompressed file when both exist: it reads faster and
// is what a user who decompressed the download meant. It is checked as the
// compressed one would be.
func findIDX(s idxSet, dir, base, hint string) (string, error) {
	for _, name := range []string{base, base + ".gz"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("datasets: %s: neither %s nor %s.gz exists; %s",
		s.title, filepath.Join(dir, base), filepath.Join(dir, base), hint)
}

// normTable maps each byte value to its normalised float32, computed with the
// same float32 operations as torchvision (x/255, then (x-mean)/std), so the
// values match PyTorch's bit for bit.
func normTable(mean, std float32) *[256]float32 {
	var t [256]float32
	for b := range t {
		v := float32(b) / 255
		v = float32(v - mean)
		t[b] = float32(v / std)
	}
	return &t
}
