package datasets_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/dtype"
)

// idxBytes encodes an IDX file: magic, big-endian dimensions, payload.
func idxBytes(magic uint32, dims []int, payload []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, magic)
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(payload)
	return b.Bytes()
}

func gzipped(t *testing.T, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err is non-nil and its message contains every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func TestReadIDX(t *testing.T) {
	pixels := make([]byte, 2*3*4)
	for i := range pixels {
		pixels[i] = byte(i * 10)
	}
	tests := []struct {
		name    string
		dims    []int
		payload []byte
		magic   uint32
		gz      bool
	}{
		{"images raw", []int{2, 3, 4}, pixels, 0x803, false},
		{"images gzip", []int{2, 3, 4}, pixels, 0x803, true},
		{"labels raw", []int{5}, []byte{5, 0, 4, 1, 9}, 0x801, false},
		{"labels gzip", []int{5}, []byte{5, 0, 4, 1, 9}, 0x801, true},
		{"empty", []int{0, 28, 28}, nil, 0x803, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := idxBytes(tt.magic, tt.dims, tt.payload)
			if tt.gz {
				raw = gzipped(t, raw)
			}
			// The name deliberately lacks .gz: the content decides.
			path := filepath.Join(t.TempDir(), "file-idx")
			writeFile(t, path, raw)
			dims, data, err := datasets.ReadIDX(path)
			if err != nil {
				t.Fatalf("ReadIDX: %v", err)
			}
			if !slices.Equal(dims, tt.dims) {
				t.Errorf("dims = %v, want %v", dims, tt.dims)
			}
			if !bytes.Equal(data, tt.payload) {
				t.Errorf("data = %v, want %v", data, tt.payload)
			}
		})
	}
}

func TestReadIDXErrors(t *testing.T) {
	good := idxBytes(0x803, []int{2, 2, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	tests := []struct {
		name string
		file []byte // nil: no file at all
		want []string
	}{
		{"missing file", nil, []string{"no such file"}},
		{"empty file", []byte{}, []string{"too short", "0 bytes"}},
		{"wrong magic", idxBytes(0x12345678, []int{1}, []byte{0}), []string{"wrong magic number 0x12345678"}},
		{"float IDX", idxBytes(0x0d03, []int{1, 1, 1}, make([]byte, 4)), []string{"wrong magic number 0x00000d03"}},
		{"truncated header", good[:9], []string{"truncated header", "need 12 bytes, got 5"}},
		{"truncated payload", good[:len(good)-3], []string{"truncated payload", "need 8 bytes, got 5"}},
		{"trailing data", append(slices.Clone(good), 0), []string{"more data than dimensions [2 2 2] call for"}},
		{"truncated gzip", gzipped(t, good)[:20], []string{"gzip stream is truncated"}},
		{"gzip payload short", gzipped(t, good[:len(good)-1]), []string{"truncated payload", "need 8 bytes, got 7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad-idx3-ubyte")
			if tt.file != nil {
				writeFile(t, path, tt.file)
			}
			_, _, err := datasets.ReadIDX(path)
			wantErr(t, err, append([]string{path}, tt.want...)...)
		})
	}
	t.Run("missing file is fs.ErrNotExist", func(t *testing.T) {
		_, _, err := datasets.ReadIDX(filepath.Join(t.TempDir(), "nothing"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("errors.Is(%v, fs.ErrNotExist) = false, want true", err)
		}
	})
}

// mnistFiles describes a small MNIST-format data set for writeMNIST.
type mnistFiles struct {
	trainImages, testImages []byte // n*h*w pixels
	trainLabels, testLabels []byte
	h, w                    int
	gz                      bool // write the .gz names, compressed
}

// newMNISTFiles makes n training and n/2 test images whose pixel j of image
// i is (i*7+j)%256, so every byte value occurs and images differ.
func newMNISTFiles(n int) mnistFiles {
	f := mnistFiles{h: 28, w: 28}
	img := func(n, salt int) []byte {
		b := make([]byte, n*28*28)
		for i := range b {
			b[i] = byte((i/(28*28))*7 + i%(28*28) + salt)
		}
		return b
	}
	f.trainImages, f.testImages = img(n, 0), img(n/2, 3)
	for i := range n {
		f.trainLabels = append(f.trainLabels, byte(i%10))
	}
	for i := range n / 2 {
		f.testLabels = append(f.testLabels, byte(9-i%10))
	}
	return f
}

func writeMNIST(t *testing.T, dir string, f mnistFiles) {
	t.Helper()
	put := func(name string, magic uint32, dims []int, payload []byte) {
		raw := idxBytes(magic, dims, payload)
		if f.gz {
			raw, name = gzipped(t, raw), name+".gz"
		}
		writeFile(t, filepath.Join(dir, name), raw)
	}
	hw := f.h * f.w
	put("train-images-idx3-ubyte", 0x803, []int{len(f.trainImages) / hw, f.h, f.w}, f.trainImages)
	put("train-labels-idx1-ubyte", 0x801, []int{len(f.trainLabels)}, f.trainLabels)
	put("t10k-images-idx3-ubyte", 0x803, []int{len(f.testImages) / hw, f.h, f.w}, f.testImages)
	put("t10k-labels-idx1-ubyte", 0x801, []int{len(f.testLabels)}, f.testLabels)
	writeSums(t, dir)
}

// writeSums lists the SHA-256 of every file in dir in its SHA256SUMS, as
// the owner of a directory of files that are not MNIST's does.
func writeSums(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if e.Name() == datasets.SumsFile || !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), e.Name())
	}
	writeFile(t, filepath.Join(dir, datasets.SumsFile), []byte(b.String()))
}

// norm is torchvision's ToTensor + Normalize for one pixel, in float64.
func norm(b byte, mean, std float64) float64 { return (float64(b)/255 - mean) / std }

// closeF32 applies docs/design.md's F32 tolerance (dtype.Close).
func closeF32(got float32, want float64) bool { return dtype.Close(dtype.F32, float64(got), want, 0) }

func TestLoadMNIST(t *testing.T) {
	loaders := []struct {
		name      string
		load      func(string) (*datasets.Dataset, *datasets.Dataset, error)
		mean, std float64
	}{
		{"mnist", func(dir string) (*datasets.Dataset, *datasets.Dataset, error) { return datasets.LoadMNIST(dir) }, 0.1307, 0.3081},
		{"fashion-mnist", datasets.LoadFashionMNIST, 0.2860, 0.3530},
	}
	for _, l := range loaders {
		for _, gz := range []bool{false, true} {
			t.Run(l.name+map[bool]string{false: "/raw", true: "/gzip"}[gz], func(t *testing.T) {
				dir := t.TempDir()
				f := newMNISTFiles(12)
				f.gz = gz
				writeMNIST(t, dir, f)
				train, test, err := l.load(dir)
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				for _, c := range []struct {
					d      *datasets.Dataset
					name   string
					pixels []byte
					labels []byte
				}{
					{train, l.name + "/train", f.trainImages, f.trainLabels},
					{test, l.name + "/test", f.testImages, f.testLabels},
				} {
					if c.d.Name != c.name {
						t.Errorf("Name = %q, want %q", c.d.Name, c.name)
					}
					if got, want := c.d.Len(), len(c.labels); got != want {
						t.Errorf("%s: Len() = %d, want %d", c.name, got, want)
					}
					if !slices.Equal(c.d.Shape, []int{1, 28, 28}) {
						t.Errorf("%s: Shape = %v, want [1 28 28]", c.name, c.d.Shape)
					}
					if c.d.Classes != 10 {
						t.Errorf("%s: Classes = %d, want 10", c.name, c.d.Classes)
					}
					for i, b := range c.labels {
						if c.d.Y[i] != int32(b) {
							t.Fatalf("%s: Y[%d] = %d, want %d", c.name, i, c.d.Y[i], b)
						}
					}
					if len(c.d.X) != len(c.pixels) {
						t.Fatalf("%s: len(X) = %d, want %d", c.name, len(c.d.X), len(c.pixels))
					}
					for i, b := range c.pixels {
						if want := norm(b, l.mean, l.std); !closeF32(c.d.X[i], want) {
							t.Fatalf("%s: X[%d] (byte %d) = %v, want %v", c.name, i, b, c.d.X[i], want)
						}
					}
				}
			})
		}
	}
}

// TestMNISTNormalisationValues pins the extremes exactly: torchvision's
// (x/255 - 0.1307)/0.3081 with every operation rounded to float32, as its
// float32 tensors do (worked out with IEEE single-precision rounding).
func TestMNISTNormalisationValues(t *testing.T) {
	dir := t.TempDir()
	f := newMNISTFiles(2)
	f.trainImages[0], f.trainImages[1] = 0, 255
	writeMNIST(t, dir, f)
	train, _, err := datasets.LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float32{-0.42421296, 2.8214867} {
		if got := train.X[i]; got != want {
			t.Errorf("X[%d] = %.9g, want %.9g", i, got, want)
		}
	}
}

func TestLoadMNISTErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(f *mnistFiles)
		after  func(t *testing.T, dir string) // runs after the files are written
		want   []string
	}{
		{
			name: "missing directory",
			after: func(t *testing.T, dir string) {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"does not exist", "make data"},
		},
		{
			name: "missing labels",
			after: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "t10k-labels-idx1-ubyte"))
			},
			want: []string{"t10k-labels-idx1-ubyte.gz exists", "make data"},
		},
		{
			name:   "count mismatch",
			modify: func(f *mnistFiles) { f.trainLabels = f.trainLabels[:5] },
			want:   []string{"train-images-idx3-ubyte holds 6 images but", "train-labels-idx1-ubyte holds 5 labels"},
		},
		{
			name:   "label over 9",
			modify: func(f *mnistFiles) { f.testLabels[2] = 10 },
			want:   []string{"t10k-labels-idx1-ubyte", "label 10 of sample 2 is over 9"},
		},
		{
			name: "not 28x28",
			modify: func(f *mnistFiles) {
				f.h, f.w = 14, 56 // the same bytes, declared with other dimensions
			},
			want: []string{"train-images-idx3-ubyte", "images are 14x56, want 28x28"},
		},
		{
			name: "wrong magic",
			after: func(t *testing.T, dir string) {
				// Little-endian, a common mistake when writing IDX by hand.
				writeFile(t, filepath.Join(dir, "train-labels-idx1-ubyte"), idxBytes(0x01080000, []int{6}, make([]byte, 6)))
			},
			want: []string{"train-labels-idx1-ubyte", "wrong magic number 0x01080000"},
		},
		{
			name: "labels not a vector",
			after: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "train-labels-idx1-ubyte"), idxBytes(0x803, []int{6, 1, 1}, make([]byte, 6)))
			},
			want: []string{"train-labels-idx1-ubyte", "labels have dimensions [6 1 1], want [N]"},
		},
		{
			name: "truncated images",
			after: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), idxBytes(0x803, []int{3, 28, 28}, make([]byte, 100)))
			},
			want: []string{"t10k-images-idx3-ubyte", "truncated payload", "need 2352 bytes, got 100"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "mnist")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f := newMNISTFiles(6)
			if tt.modify != nil {
				tt.modify(&f)
			}
			writeMNIST(t, dir, f)
			if tt.after != nil {
				tt.after(t, dir)
				if _, err := os.Stat(dir); err == nil {
					writeSums(t, dir) // the files are what the test means them to be
				}
			}
			_, _, err := datasets.LoadMNIST(dir)
			wantErr(t, err, tt.want...)
		})
	}
	t.Run("fashion missing directory", func(t *testing.T) {
		_, _, err := datasets.LoadFashionMNIST(filepath.Join(t.TempDir(), "none"))
		wantErr(t, err, "does not exist", "dataset-fashion-mnist")
	})
}

// realDir finds a data set fetched onto this machine, looking where the
// programs look and in the repository's ./data (tests run in datasets/).
func realDir(name string) string {
	for _, dir := range []string{datasets.Dir(name), filepath.Join("..", "data", name)} {
		if _, err := os.Stat(filepath.Join(dir, "train-labels-idx1-ubyte.gz")); err == nil {
			return dir
		}
		if _, err := os.Stat(filepath.Join(dir, "train-labels-idx1-ubyte")); err == nil {
			return dir
		}
	}
	return ""
}

func TestLoadMNISTReal(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the real MNIST files under -short")
	}
	if raceEnabled {
		t.Skip("skipping the real MNIST files under -race (slow, and the loader is single-goroutine); go test without -race reads them")
	}
	dir := realDir("mnist")
	if dir == "" {
		t.Skip("no MNIST files in ./data/mnist or $MIXPREC_DATA/mnist; run `make data` to fetch them")
	}
	train, test, err := datasets.LoadMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkReal(t, train, test, 5, 7)
}

func TestLoadFashionMNISTReal(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the real Fashion-MNIST files under -short")
	}
	if raceEnabled {
		t.Skip("skipping the real Fashion-MNIST files under -race (slow, and the loader is single-goroutine); go test without -race reads them")
	}
	dir := datasets.FashionMNISTDir()
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no Fashion-MNIST in %s; apt-get install dataset-fashion-mnist to test on it", dir)
	}
	train, test, err := datasets.LoadFashionMNIST(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The first training image is an ankle boot (9), the first test one too.
	checkReal(t, train, test, 9, 9)
}

func checkReal(t *testing.T, train, test *datasets.Dataset, firstTrain, firstTest int32) {
	t.Helper()
	if got, want := train.Len(), 60000; got != want {
		t.Errorf("train.Len() = %d, want %d", got, want)
	}
	if got, want := test.Len(), 10000; got != want {
		t.Errorf("test.Len() = %d, want %d", got, want)
	}
	if got := train.Y[0]; got != firstTrain {
		t.Errorf("first training label = %d, want %d", got, firstTrain)
	}
	if got := test.Y[0]; got != firstTest {
		t.Errorf("first test label = %d, want %d", got, firstTest)
	}
	counts := make([]int, 10)
	for _, y := range train.Y {
		counts[y]++
	}
	for c, n := range counts {
		if n < 5000 {
			t.Errorf("class %d has %d training samples, want >= 5000", c, n)
		}
	}
}
