package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
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
	d, err := loadMNIST(dir, "t10k")
	if err != nil {
		t.Fatal(err)
	}
	norm := func(v float64) float32 { return float32((v/255 - 0.1307) / 0.3081) }
	for _, c := range []struct {
		i    int
		want float32
	}{{0, norm(255)}, {1, norm(0)}, {784 + 5, norm(51)}} {
		if got := d.images[c.i]; math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("images[%d] = %v, want %v", c.i, got, c.want)
		}
	}
	if d.n != 2 || d.labels[0] != 7 || d.labels[1] != 3 {
		t.Errorf("n %d, labels %v; want 2, [7 3]", d.n, d.labels)
	}

	// Labels that do not match the images are an error, not a panic.
	writeIDX(t, filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), []int{3}, []uint8{7, 3, 1})
	if _, err := loadMNIST(dir, "t10k"); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("mismatched labels: err = %v, want one saying they do not match", err)
	}
}

// randomSet is n random images with random labels.
func randomSet(rng *rand.Rand, n int) *mnist {
	d := &mnist{n: n, images: make([]float32, n*784), labels: make([]uint8, n)}
	for i := range d.images {
		d.images[i] = float32(rng.NormFloat64())
	}
	for i := range d.labels {
		d.labels[i] = uint8(rng.IntN(10))
	}
	return d
}

// reference is one step of PyTorch's recipe for a single Linear layer
// (784 -> 10), in float64: the mean cross-entropy of the batch idx, and
// the update of torch.optim.SGD with momentum (buf = g at the first step,
// then buf = momentum*buf + g; w -= lr*buf). w is (784, 10), b (10).
func reference(w, b, wBuf, bBuf []float64, d *mnist, idx []int, lr, momentum float64, first bool) float64 {
	gw, gb := make([]float64, len(w)), make([]float64, len(b))
	loss := 0.0
	for _, j := range idx {
		x := d.images[j*784 : (j+1)*784]
		z := make([]float64, 10)
		for o := range z {
			z[o] = b[o]
			for i := range 784 {
				z[o] += float64(x[i]) * w[i*10+o]
			}
		}
		m := math.Inf(-1)
		for _, v := range z {
			m = math.Max(m, v)
		}
		sum := 0.0
		for _, v := range z {
			sum += math.Exp(v - m)
		}
		y := int(d.labels[j])
		loss += -(z[y] - m - math.Log(sum))
		for o := range z {
			g := math.Exp(z[o]-m) / sum
			if o == y {
				g--
			}
			g /= float64(len(idx))
			gb[o] += g
			for i := range 784 {
				gw[i*10+o] += float64(x[i]) * g
			}
		}
	}
	update := func(p, buf, g []float64) {
		for i := range p {
			if first {
				buf[i] = g[i]
			} else {
				buf[i] = momentum*buf[i] + g[i]
			}
			p[i] -= lr * buf[i]
		}
	}
	update(w, wBuf, gw)
	update(b, bBuf, gb)
	return loss / float64(len(idx))
}

func near(got float32, want float64) bool {
	return math.Abs(float64(got)-want) <= 1e-5+1e-4*math.Abs(want)
}

// TestStepMatchesPyTorch checks that the graph's loss is the batch's mean
// cross-entropy and that Gorgonia's Momentum solver, at a constant rate,
// makes torch.optim.SGD's updates, so that the peer trains the recipe.
func TestStepMatchesPyTorch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := randomSet(rng, 5)
	w := newWeights(rng, 784, 10)
	n, err := newNet(w, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.vm.Close()
	rw, rb := make([]float64, 7840), make([]float64, 10)
	for i, v := range w.ws[0].Data().([]float32) {
		rw[i] = float64(v)
	}
	for i, v := range w.bs[0].Data().([]float32) {
		rb[i] = float64(v)
	}
	bw, bb := make([]float64, 7840), make([]float64, 10)
	const lr, momentum = 0.05, 0.9
	s := G.NewMomentum(G.WithLearnRate(lr), G.WithMomentum(momentum))
	idx := []int{0, 1, 2, 3, 4}
	for step := range 3 {
		got, err := n.step(d, idx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(rw, rb, bw, bb, d, idx, lr, momentum, step == 0)
		if !near(float32(got), want) {
			t.Errorf("step %d: loss %v, want %v", step, got, want)
		}
		for i, v := range w.ws[0].Data().([]float32) {
			if !near(v, rw[i]) {
				t.Fatalf("step %d: weight %d = %v, want %v", step, i, v, rw[i])
			}
		}
		for i, v := range w.bs[0].Data().([]float32) {
			if !near(v, rb[i]) {
				t.Fatalf("step %d: bias %d = %v, want %v", step, i, v, rb[i])
			}
		}
	}
}

// TestGraphsShareWeights checks that a step of the partial-batch graph
// moves the weights the full-batch and evaluation graphs compute with, and
// that the solver's momentum carries across them.
func TestGraphsShareWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := randomSet(rng, 7)
	w := newWeights(rng, 784, 10)
	full, err := newNet(w, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	defer full.vm.Close()
	part, err := newNet(w, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	defer part.vm.Close()
	rw, rb := make([]float64, 7840), make([]float64, 10)
	for i, v := range w.ws[0].Data().([]float32) {
		rw[i] = float64(v)
	}
	for i, v := range w.bs[0].Data().([]float32) {
		rb[i] = float64(v)
	}
	bw, bb := make([]float64, 7840), make([]float64, 10)
	s := G.NewMomentum(G.WithLearnRate(0.1), G.WithMomentum(0.9))
	for step, c := range []struct {
		n   *net
		idx []int
	}{{full, []int{0, 1, 2, 3}}, {part, []int{4, 5, 6}}, {full, []int{3, 2, 1, 0}}} {
		got, err := c.n.step(d, c.idx, s)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(rw, rb, bw, bb, d, c.idx, 0.1, 0.9, step == 0)
		if !near(float32(got), want) {
			t.Errorf("step %d (batch %d): loss %v, want %v", step, len(c.idx), got, want)
		}
	}
	for i, v := range w.ws[0].Data().([]float32) {
		if !near(v, rw[i]) {
			t.Fatalf("weight %d = %v after steps on both graphs, want %v", i, v, rw[i])
		}
	}
}

// TestLearns trains the full MLP on a small separable problem (each class
// a distinct pattern plus noise) and expects it to classify held-out
// samples well: the peer's figures come from a network that learns.
func TestLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	protos := randomSet(rng, 10)
	sample := func(n int) *mnist {
		d := &mnist{n: n, images: make([]float32, n*784), labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(10)
			d.labels[i] = uint8(c)
			for k := range 784 {
				d.images[i*784+k] = protos.images[c*784+k] + float32(rng.NormFloat64())
			}
		}
		return d
	}
	train, test := sample(512), sample(1000)
	w := newWeights(rng, 784, 256, 128, 10)
	n, err := newNet(w, 64, true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.vm.Close()
	eval, err := newNet(w, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	defer eval.vm.Close()
	s := G.NewMomentum(G.WithLearnRate(0.05), G.WithMomentum(0.9))
	idx := make([]int, 64)
	for step := range 40 {
		for i := range idx {
			idx[i] = (step*64 + i) % train.n
		}
		if _, err := n.step(train, idx, s); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := eval.accuracy(test)
	if err != nil {
		t.Fatal(err)
	}
	if acc < 0.9 {
		t.Errorf("accuracy after 40 steps = %.3f, want >= 0.9 (chance is 0.1)", acc)
	}
}
