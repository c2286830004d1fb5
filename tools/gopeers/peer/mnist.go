package peer

import (
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// MNIST's normalisation, the one mixprec's loader and the PyTorch peers use.
const mnistMean, mnistStd = 0.1307, 0.3081

// MNIST holds one split: N images of 784 normalised values and their labels.
type MNIST struct {
	N      int
	Images []float32 // (N, 784)
	Labels []uint8
}

// LoadMNIST reads prefix-images-idx3-ubyte.gz and prefix-labels-idx1-ubyte.gz
// from dir (prefix "train" or "t10k").
func LoadMNIST(dir, prefix string) (*MNIST, error) {
	img, dims, err := readIDX(filepath.Join(dir, prefix+"-images-idx3-ubyte.gz"))
	if err != nil {
		return nil, err
	}
	lab, ldims, err := readIDX(filepath.Join(dir, prefix+"-labels-idx1-ubyte.gz"))
	if err != nil {
		return nil, err
	}
	if len(dims) != 3 || dims[1] != 28 || dims[2] != 28 || len(ldims) != 1 || ldims[0] != dims[0] {
		return nil, fmt.Errorf("mnist %s: images %v and labels %v do not match", prefix, dims, ldims)
	}
	d := &MNIST{N: dims[0], Images: make([]float32, len(img)), Labels: lab}
	for i, v := range img {
		d.Images[i] = (float32(v)/255 - mnistMean) / mnistStd
	}
	return d, nil
}

// readIDX reads a gzipped IDX file of unsigned bytes: its payload and dimensions.
func readIDX(path string) ([]uint8, []int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("mnist: %w (fetch the files with `make data` in mixprec)", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("mnist: %s: %w", path, err)
	}
	var head [4]byte
	if _, err := io.ReadFull(z, head[:]); err != nil {
		return nil, nil, fmt.Errorf("mnist: %s: %w", path, err)
	}
	if head[0] != 0 || head[1] != 0 || head[2] != 0x08 {
		return nil, nil, fmt.Errorf("mnist: %s: not an IDX file of unsigned bytes (header % x)", path, head)
	}
	dims := make([]int, head[3])
	total := 1
	for i := range dims {
		var d uint32
		if err := binary.Read(z, binary.BigEndian, &d); err != nil {
			return nil, nil, fmt.Errorf("mnist: %s: %w", path, err)
		}
		dims[i] = int(d)
		total *= int(d)
	}
	payload := make([]uint8, total)
	if _, err := io.ReadFull(z, payload); err != nil {
		return nil, nil, fmt.Errorf("mnist: %s: %w", path, err)
	}
	return payload, dims, nil
}

// Fill copies the images idx into x (len(idx), 784) and their one-hot labels
// into y (len(idx), classes).
func (d *MNIST) Fill(x, y []float32, idx []int) {
	classes := len(y) / len(idx)
	clear(y)
	for i, j := range idx {
		copy(x[i*784:(i+1)*784], d.Images[j*784:(j+1)*784])
		y[i*classes+int(d.Labels[j])] = 1
	}
}
