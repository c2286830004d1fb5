package peer

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeIDX writes a gzipped IDX file of unsigned bytes with the given dimensions.
func writeIDX(t *testing.T, path string, dims []int, payload []uint8) {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	z.Write([]byte{0, 0, 0x08, byte(len(dims))})
	for _, d := range dims {
		binary.Write(z, binary.BigEndian, uint32(d))
	}
	z.Write(payload)
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMNIST(t *testing.T) {
	dir := t.TempDir()
	img := make([]uint8, 2*784)
	img[0], img[784+5] = 255, 51
	writeIDX(t, filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), []int{2, 28, 28}, img)
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), []int{2}, []uint8{7, 3})
	d, err := LoadMNIST(dir, "t10k")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(v float64) float32 { return float32((v/255 - 0.1307) / 0.3081) }
	for _, c := range []struct {
		i    int
		want float32
	}{{0, norm(255)}, {1, norm(0)}, {784 + 5, norm(51)}} {
		if got := d.Images[c.i]; math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("Images[%d] = %v, want %v", c.i, got, c.want)
		}
	}
	if d.N != 2 || d.Labels[0] != 7 || d.Labels[1] != 3 {
		t.Errorf("N %d, labels %v; want 2, [7 3]", d.N, d.Labels)
	}

	// Labels that do not match the images are an error, not a panic.
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), []int{3}, []uint8{7, 3, 1})
	if _, err := LoadMNIST(dir, "t10k"); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("mismatched labels: err = %v, want one saying they do not match", err)
	}
}

// TestTrain: the loop visits every sample once an epoch in a fresh order,
// in batches of -batch with a short last one, stops at -max-steps, and
// reports the last epoch's mean loss and accuracy.
func TestTrain(t *testing.T) {
	d := RandomSet(rand.New(rand.NewPCG(1, 1)), 10)
	for _, c := range []struct {
		name          string
		f             Flags
		wantSteps     int
		wantEpochs    int   // evaluations
		wantLastSizes []int // the batches of the last epoch
	}{
		{"epochs", Flags{Epochs: 2, Batch: 4}, 6, 2, []int{4, 4, 2}},
		{"max-steps", Flags{Epochs: 3, Batch: 4, MaxSteps: 4}, 4, 2, []int{4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var orders [][]int
			var sizes []int
			evals := 0
			step := func(idx []int) (float64, error) {
				if sum(sizes)%d.N == 0 { // an epoch is d.N samples
					orders = append(orders, nil)
				}
				orders[len(orders)-1] = append(orders[len(orders)-1], idx...)
				sizes = append(sizes, len(idx))
				return float64(len(idx)), nil
			}
			accuracy := func() (float64, error) { evals++; return 0.5, nil }
			s, err := Train(c.f, "test", d, rand.New(rand.NewPCG(2, 2)), step, accuracy, func(string, ...any) {})
			if err != nil {
				t.Fatal(err)
			}
			if s.Steps != c.wantSteps || evals != c.wantEpochs || s.TestAccuracy != 0.5 {
				t.Errorf("%d steps, %d evaluations, accuracy %v; want %d, %d, 0.5", s.Steps, evals, s.TestAccuracy, c.wantSteps, c.wantEpochs)
			}
			if last := sizes[len(sizes)-len(c.wantLastSizes):]; !slices.Equal(last, c.wantLastSizes) {
				t.Errorf("batches %v; want the last epoch's %v", sizes, c.wantLastSizes)
			}
			if want := float64(sum(c.wantLastSizes)) / float64(len(c.wantLastSizes)); s.TrainLoss != want {
				t.Errorf("train loss %v, want the last epoch's mean %v", s.TrainLoss, want)
			}
			if c.f.MaxSteps == 0 {
				for i, o := range orders {
					if got := slices.Sorted(slices.Values(o)); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
						t.Errorf("epoch %d visits %v; want every sample once", i+1, o)
					}
				}
				if slices.Equal(orders[0], orders[1]) {
					t.Errorf("both epochs in the order %v; want a fresh shuffle each", orders[0])
				}
			}
		})
	}
}

func sum(v []int) int {
	s := 0
	for _, x := range v {
		s += x
	}
	return s
}

// A peer's run is its framework's step and evaluation; the rest is here.
func ExampleTrain() {
	rng := rand.New(rand.NewPCG(1, 2))
	ws, bs := Init(rng, 784, 10) // PyTorch's nn.Linear(784, 10)
	data := RandomSet(rng, 300)
	f := Flags{Epochs: 2, Batch: 128}
	s, _ := Train(f, "none", data, rng,
		func(idx []int) (float64, error) { return 2.3, nil }, // a framework's step would train ws and bs here
		func() (float64, error) { return 0.1, nil }, func(string, ...any) {})
	fmt.Println(len(ws[0]), len(bs[0]), s.Steps, s.TrainLoss, s.TestAccuracy)
	// Output: 7840 10 6 2.3 0.1
}
