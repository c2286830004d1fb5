package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
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

func newBackend(t *testing.T) backends.Backend {
	t.Helper()
	b, err := backends.NewWithConfig(simplego.BackendName)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// values reads a variable of ctx as float32s.
func values(t *testing.T, ctx *context.Context, scope, name string) []float32 {
	t.Helper()
	v := ctx.GetVariableByScopeAndName(scope, name)
	if v == nil {
		t.Fatalf("no variable %s/%s", scope, name)
	}
	x, err := v.Value()
	if err != nil {
		t.Fatal(err)
	}
	f, err := tensors.CopyFlatData[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkAgainst compares the single layer's weights and biases in ctx with
// the reference's.
func checkAgainst(t *testing.T, ctx *context.Context, what string, rw, rb []float64) {
	t.Helper()
	for i, v := range values(t, ctx, "/linear0", "weights") {
		if !near(v, rw[i]) {
			t.Fatalf("%s: weight %d = %v, want %v", what, i, v, rw[i])
		}
	}
	for i, v := range values(t, ctx, "/linear0", "biases") {
		if !near(v, rb[i]) {
			t.Fatalf("%s: bias %d = %v, want %v", what, i, v, rb[i])
		}
	}
}

// TestStepMatchesPyTorch checks that a training step computes the batch's
// mean cross-entropy and that sgdMomentum makes torch.optim.SGD's updates,
// including across the graphs of two batch sizes, so that the peer trains
// the recipe.
func TestStepMatchesPyTorch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := randomSet(rng, 9)
	m := newMLP(rng, 784, 10)
	rw, rb := make([]float64, 7840), make([]float64, 10)
	for i, v := range m.ws[0] {
		rw[i] = float64(v)
	}
	for i, v := range m.bs[0] {
		rb[i] = float64(v)
	}
	bw, bb := make([]float64, 7840), make([]float64, 10)
	const lr, momentum = 0.05, 0.9
	ctx := context.New()
	tr := train.NewTrainer(newBackend(t), ctx, m.logits, losses.SparseCategoricalCrossEntropyLogits,
		&sgdMomentum{lr: lr, momentum: momentum}, nil, nil)
	x, y := make([]float32, 5*784), make([]int32, 5)
	for k, idx := range [][]int{{0, 1, 2, 3, 4}, {5, 6, 7}, {4, 3, 2, 1, 0}} {
		got, err := step(tr, d, idx, x, y)
		if err != nil {
			t.Fatal(err)
		}
		want := reference(rw, rb, bw, bb, d, idx, lr, momentum, k == 0)
		if !near(float32(got), want) {
			t.Errorf("step %d: loss %v, want %v", k, got, want)
		}
		checkAgainst(t, ctx, fmt.Sprintf("step %d", k), rw, rb)
	}
}

// TestWarmUpResets checks that warmUp leaves the model as initialised and
// the momentum at zero: the next step is the first step of PyTorch's run.
func TestWarmUpResets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := randomSet(rng, 7) // batch 4: a full batch of 4 and a partial one of 3
	m := newMLP(rng, 784, 10)
	ctx := context.New()
	const lr, momentum = 0.1, 0.9
	tr := train.NewTrainer(newBackend(t), ctx, m.logits, losses.SparseCategoricalCrossEntropyLogits,
		&sgdMomentum{lr: lr, momentum: momentum}, nil, nil)
	if err := warmUp(tr, ctx, m, d, 4); err != nil {
		t.Fatal(err)
	}
	rw, rb := make([]float64, 7840), make([]float64, 10)
	for i, v := range m.ws[0] {
		rw[i] = float64(v)
	}
	for i, v := range m.bs[0] {
		rb[i] = float64(v)
	}
	checkAgainst(t, ctx, "after warm-up", rw, rb)
	bw, bb := make([]float64, 7840), make([]float64, 10)
	idx := []int{6, 5, 4, 3}
	x, y := make([]float32, 4*784), make([]int32, 4)
	if _, err := step(tr, d, idx, x, y); err != nil {
		t.Fatal(err)
	}
	reference(rw, rb, bw, bb, d, idx, lr, momentum, true)
	checkAgainst(t, ctx, "first step after warm-up", rw, rb)
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
	trainSet, testSet := sample(512), sample(1000)
	m := newMLP(rng, 784, 256, 128, 10)
	ctx := context.New()
	backend := newBackend(t)
	tr := train.NewTrainer(backend, ctx, m.logits, losses.SparseCategoricalCrossEntropyLogits,
		&sgdMomentum{lr: 0.05, momentum: 0.9}, nil, nil)
	idx := make([]int, 64)
	x, y := make([]float32, 64*784), make([]int32, 64)
	for s := range 40 {
		for i := range idx {
			idx[i] = (s*64 + i) % trainSet.n
		}
		if _, err := step(tr, trainSet, idx, x, y); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := accuracy(backend, ctx, m, testSet)
	if err != nil {
		t.Fatal(err)
	}
	if acc < 0.9 {
		t.Errorf("accuracy after 40 steps = %.3f, want >= 0.9 (chance is 0.1)", acc)
	}
}
