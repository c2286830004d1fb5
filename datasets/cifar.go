package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CIFAR-10's binary version: each record is one label byte then a 32x32 image
// stored channel by channel (1024 red, 1024 green, 1024 blue bytes).
const (
	cifarPixels = 3 * 32 * 32
	cifarRecord = 1 + cifarPixels
)

// The per-channel mean and standard deviation of the CIFAR-10 training pixels
// scaled to [0, 1], as used with torchvision's Normalize.
var (
	cifarMean = [3]float32{0.4914, 0.4822, 0.4465}
	cifarStd  = [3]float32{0.2470, 0.2435, 0.2616}
)

// cifarHint says where to get CIFAR-10 and where to put it.
func cifarHint(dir string) string { return strings.ReplaceAll(cifarFetch, "DIR", dir) }

const cifarFetch = "download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz " +
	"and extract it so that DIR/data_batch_1.bin exists " +
	"(mkdir -p DIR && tar -xzf cifar-10-binary.tar.gz --strip-components=1 -C DIR)"

// LoadCIFAR10 reads the binary version of CIFAR-10 from dir: the training set
// from data_batch_1.bin to data_batch_5.bin (50,000 images) and the test set
// from test_batch.bin (10,000). dir may also be the directory that holds the
// archive's cifar-10-batches-bin folder. Samples have shape [3 32 32], pixels
// scaled to [0, 1] and then standardised per channel with mean (0.4914,
// 0.4822, 0.4465) and standard deviation (0.2470, 0.2435, 0.2616); labels are
// 0 to 9.
//
// A file may hold any whole number of records, so tests can write small ones.
func LoadCIFAR10(dir string) (train, test *Dataset, err error) {
	if err := checkDir(dir, "CIFAR-10", cifarHint(dir)); err != nil {
		return nil, nil, err
	}
	// Extracting the archive as it comes adds this folder; accept it rather
	// than make the user move files.
	if _, err := os.Stat(filepath.Join(dir, "data_batch_1.bin")); errors.Is(err, fs.ErrNotExist) {
		sub := filepath.Join(dir, "cifar-10-batches-bin")
		if _, err := os.Stat(filepath.Join(sub, "data_batch_1.bin")); err == nil {
			dir = sub
		}
	}
	var trainFiles []string
	for i := 1; i <= 5; i++ {
		trainFiles = append(trainFiles, filepath.Join(dir, fmt.Sprintf("data_batch_%d.bin", i)))
	}
	train, err = loadCIFARSplit(dir, "cifar10/train", trainFiles)
	if err != nil {
		return nil, nil, err
	}
	test, err = loadCIFARSplit(dir, "cifar10/test", []string{filepath.Join(dir, "test_batch.bin")})
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// loadCIFARSplit sizes the whole split from the file lengths first, so that a
// missing or malformed file is reported before anything large is allocated and
// the samples are converted straight into one array.
func loadCIFARSplit(dir, name string, files []string) (*Dataset, error) {
	sizes := make([]int64, len(files))
	n := 0
	for i, f := range files {
		fi, err := os.Stat(f)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("datasets: CIFAR-10 batch file %s is missing; %s: %w", f, cifarHint(dir), err)
		}
		if err != nil {
			return nil, fmt.Errorf("datasets: CIFAR-10: %w", err)
		}
		if err := checkCIFARLength(f, fi.Size()); err != nil {
			return nil, err
		}
		sizes[i] = fi.Size()
		n += int(fi.Size() / cifarRecord)
	}

	lut := [3]*[256]float32{}
	for c := range lut {
		lut[c] = normTable(cifarMean[c], cifarStd[c])
	}
	d := &Dataset{
		Name:    name,
		Shape:   []int{3, 32, 32},
		X:       makeSamples(n * cifarPixels),
		Y:       make([]int32, n),
		Classes: 10,
	}
	at := 0 // samples converted so far
	for i, f := range files {
		buf, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("datasets: CIFAR-10: %w", err)
		}
		if int64(len(buf)) != sizes[i] {
			return nil, fmt.Errorf("datasets: %s changed size while being read (%d bytes, then %d)", f, sizes[i], len(buf))
		}
		for r := 0; r < len(buf)/cifarRecord; r++ {
			rec := buf[r*cifarRecord : (r+1)*cifarRecord]
			if rec[0] > 9 {
				return nil, fmt.Errorf("datasets: %s: label %d of record %d is over 9", f, rec[0], r)
			}
			d.Y[at] = int32(rec[0])
			x := d.X[at*cifarPixels : (at+1)*cifarPixels]
			for p, b := range rec[1:] {
				x[p] = lut[p/(32*32)][b]
			}
			at++
		}
	}
	return d, nil
}

func checkCIFARLength(f string, size int64) error {
	if size == 0 {
		return fmt.Errorf("datasets: %s is empty; want records of %d bytes (1 label + 3072 pixels)", f, cifarRecord)
	}
	if size%cifarRecord != 0 {
		return fmt.Errorf("datasets: %s has wrong length %d bytes: not a multiple of the %d-byte record (1 label + 3072 pixels); %d records and %d bytes over",
			f, size, cifarRecord, size/cifarRecord, size%cifarRecord)
	}
	return nil
}
