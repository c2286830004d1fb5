package datasets_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/datasets"
)

// cifarRecords encodes n CIFAR-10 binary records. Record r has label
// labels[r] and pixel p (channel-major) equal to (r*5 + p + salt) % 256.
func cifarRecords(labels []byte, salt int) []byte {
	var b []byte
	for r, l := range labels {
		b = append(b, l)
		for p := range 3072 {
			b = append(b, byte(r*5+p+salt))
		}
	}
	return b
}

// writeCIFAR writes data_batch_1..5.bin with records[0..4] and test_batch.bin
// with records[5], each a list of labels.
func writeCIFAR(t *testing.T, dir string, labels [6][]byte) {
	t.Helper()
	for i, l := range labels {
		name := fmt.Sprintf("data_batch_%d.bin", i+1)
		if i == 5 {
			name = "test_batch.bin"
		}
		writeFile(t, filepath.Join(dir, name), cifarRecords(l, i*11))
	}
}

var cifarLabels = [6][]byte{{6, 9}, {9}, {4, 1, 1}, {2}, {7, 8}, {3, 5, 0}}

func TestLoadCIFAR10(t *testing.T) {
	mean := []float64{0.4914, 0.4822, 0.4465}
	std := []float64{0.2470, 0.2435, 0.2616}
	for _, sub := range []string{"", "cifar-10-batches-bin"} {
		t.Run("dir="+sub, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, sub)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeCIFAR(t, dir, cifarLabels)
			train, test, err := datasets.LoadCIFAR10(root)
			if err != nil {
				t.Fatalf("LoadCIFAR10: %v", err)
			}
			wantTrain := slices.Concat(cifarLabels[:5]...)
			for _, c := range []struct {
				d      *datasets.Dataset
				name   string
				labels []byte
				files  []int // which file each sample came from, for its pixels
			}{
				{train, "cifar10/train", wantTrain, []int{0, 0, 1, 2, 2, 2, 3, 4, 4}},
				{test, "cifar10/test", cifarLabels[5], []int{5, 5, 5}},
			} {
				if c.d.Name != c.name {
					t.Errorf("Name = %q, want %q", c.d.Name, c.name)
				}
				if got, want := c.d.Len(), len(c.labels); got != want {
					t.Fatalf("%s: Len() = %d, want %d", c.name, got, want)
				}
				if !slices.Equal(c.d.Shape, []int{3, 32, 32}) || c.d.Classes != 10 {
					t.Errorf("%s: Shape, Classes = %v, %d, want [3 32 32], 10", c.name, c.d.Shape, c.d.Classes)
				}
				first := 0 // index of the first sample of the current file
				for i, l := range c.labels {
					if i > 0 && c.files[i] != c.files[i-1] {
						first = i
					}
					if c.d.Y[i] != int32(l) {
						t.Errorf("%s: Y[%d] = %d, want %d", c.name, i, c.d.Y[i], l)
					}
					x, _ := c.d.Sample(i)
					r := i - first
					for p, got := range x {
						b := byte(r*5 + p + c.files[i]*11)
						ch := p / 1024
						if want := norm(b, mean[ch], std[ch]); !closeF32(got, want) {
							t.Fatalf("%s: sample %d pixel %d (channel %d, byte %d) = %v, want %v", c.name, i, p, ch, b, got, want)
						}
					}
				}
			}
		})
	}
}

func TestLoadCIFAR10Errors(t *testing.T) {
	tests := []struct {
		name  string
		after func(t *testing.T, dir string)
		want  []string
	}{
		{
			name:  "missing directory",
			after: func(t *testing.T, dir string) { os.RemoveAll(dir) },
			want:  []string{"does not exist", "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz", "data_batch_1.bin exists"},
		},
		{
			name:  "missing batch",
			after: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "data_batch_3.bin")) },
			want:  []string{"data_batch_3.bin is missing", "cifar-10-binary.tar.gz"},
		},
		{
			name:  "missing test batch",
			after: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "test_batch.bin")) },
			want:  []string{"test_batch.bin is missing"},
		},
		{
			name: "wrong length",
			after: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "data_batch_2.bin"), cifarRecords([]byte{1, 2}, 0)[:3073+100])
			},
			want: []string{"data_batch_2.bin has wrong length 3173 bytes", "not a multiple of the 3073-byte record"},
		},
		{
			name:  "empty",
			after: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "data_batch_5.bin"), nil) },
			want:  []string{"data_batch_5.bin is empty"},
		},
		{
			name: "label over 9",
			after: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "test_batch.bin"), cifarRecords([]byte{3, 10}, 0))
			},
			want: []string{"test_batch.bin", "label 10 of record 1 is over 9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cifar10")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeCIFAR(t, dir, cifarLabels)
			tt.after(t, dir)
			_, _, err := datasets.LoadCIFAR10(dir)
			wantErr(t, err, tt.want...)
		})
	}
	t.Run("missing directory is fs.ErrNotExist", func(t *testing.T) {
		_, _, err := datasets.LoadCIFAR10(filepath.Join(t.TempDir(), "none"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("errors.Is(%v, fs.ErrNotExist) = false, want true", err)
		}
	})
}
