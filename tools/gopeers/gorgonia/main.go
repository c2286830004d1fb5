// Command gorgonia is a benchmark peer: the MNIST MLP workload of mixprec's
// examples/mnist (784-256-128-10 with ReLU, SGD with momentum 0.9, lr 0.05,
// batch 128, PyTorch's default initialisation, a fresh shuffle each epoch)
// written in Gorgonia, which is what a Go user would pick instead of
// mixprec. It lives in a module of its own so that mixprec's own module does
// not depend on Gorgonia.
//
//	go run . -data DIR [-epochs N] [-max-steps N] [-json]
//
// With -json the last line of standard output is one JSON object with the
// keys mixprec's examples print (samples_per_sec, ms_per_step, train_loss,
// test_accuracy, ...). The timed part is the training steps alone (batch
// assembly, forward, backward, update), as in mixprec's examples; evaluation
// on the test set is not timed.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	_ "go4.org/unsafe/assume-no-moving-gc" // a newer copy than gorgonia's, which panics at start on Go 1.26
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gorgonia:", err)
		}
		os.Exit(1)
	}
}

// summary is the JSON line mixprec's examples print, less what this peer
// cannot measure (peak bytes per category).
type summary struct {
	Model         string  `json:"model"`
	Device        string  `json:"device"`
	AMP           string  `json:"amp"`
	Framework     string  `json:"framework"`
	Epochs        int     `json:"epochs"`
	Steps         int     `json:"steps"`
	Batch         int     `json:"batch"`
	LR            float64 `json:"lr"`
	TrainLoss     float64 `json:"train_loss"`
	TestAccuracy  float64 `json:"test_accuracy"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	MsPerStep     float64 `json:"ms_per_step"`
	WallSeconds   float64 `json:"wall_seconds"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gorgonia", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", os.Getenv("MIXPREC_DATA"), "data directory holding mnist/ (the four IDX .gz files)")
	epochs := fs.Int("epochs", 1, "epochs")
	batch := fs.Int("batch", 128, "batch size")
	lr := fs.Float64("lr", 0.05, "learning rate")
	momentum := fs.Float64("momentum", 0.9, "SGD momentum")
	seed := fs.Uint64("seed", 1, "random seed (initialisation and shuffling)")
	maxSteps := fs.Int("max-steps", 0, "stop after this many steps (0: whole epochs)")
	asJSON := fs.Bool("json", false, "print one JSON summary line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *data == "" {
		*data = "data"
	}
	if *batch < 1 || *epochs < 1 {
		return fmt.Errorf("-batch %d, -epochs %d: both must be >= 1", *batch, *epochs)
	}
	train, err := loadMNIST(filepath.Join(*data, "mnist"), "train")
	if err != nil {
		return err
	}
	test, err := loadMNIST(filepath.Join(*data, "mnist"), "t10k")
	if err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(*seed, 0x676f72676f6e6961))
	w := newWeights(rng, 784, 256, 128, 10)
	// Gorgonia's graphs have fixed shapes, so the last, partial batch of an
	// epoch (60000 = 468*128 + 96) and evaluation get graphs of their own
	// that share the weight tensors with the main one; the solver keeps its
	// momentum per parameter position, which is the same in every graph.
	solver := G.NewMomentum(G.WithLearnRate(*lr), G.WithMomentum(*momentum))
	nets := map[int]*net{}
	trainNet := func(b int) (*net, error) {
		if n, ok := nets[b]; ok {
			return n, nil
		}
		n, err := newNet(w, b, true)
		nets[b] = n
		return n, err
	}
	defer func() {
		for _, n := range nets {
			n.vm.Close()
		}
	}()
	evalNet, err := newNet(w, 1000, false)
	if err != nil {
		return err
	}
	defer evalNet.vm.Close()

	log := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	log("mnist: mlp 784-256-128-10, SGD lr %g momentum %g, batch %d, Gorgonia on the CPU", *lr, *momentum, *batch)
	steps, samples, trainTime, lastLoss, acc := 0, 0, 0.0, 0.0, 0.0
	wall := time.Now()
	order := make([]int, train.n)
	for i := range order {
		order[i] = i
	}
	for epoch := range *epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		start := time.Now()
		sum, nb := 0.0, 0
		for lo := 0; lo < train.n; lo += *batch {
			idx := order[lo:min(lo+*batch, train.n)]
			n, err := trainNet(len(idx))
			if err != nil {
				return err
			}
			loss, err := n.step(train, idx, solver)
			if err != nil {
				return err
			}
			sum += loss
			nb++
			steps++
			samples += len(idx)
			if *maxSteps > 0 && steps >= *maxSteps {
				break
			}
		}
		trainTime += time.Since(start).Seconds()
		lastLoss = sum / float64(max(nb, 1))
		if acc, err = evalNet.accuracy(test); err != nil {
			return err
		}
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s", epoch+1, lastLoss, 100*acc, float64(samples)/trainTime)
		if *maxSteps > 0 && steps >= *maxSteps {
			break
		}
	}
	s := summary{Model: "mlp", Device: "cpu", AMP: "off", Framework: "gorgonia " + version("gorgonia.org/gorgonia"),
		Epochs: *epochs, Steps: steps, Batch: *batch, LR: *lr, TrainLoss: lastLoss, TestAccuracy: acc,
		SamplesPerSec: float64(samples) / trainTime, MsPerStep: 1000 * trainTime / float64(max(steps, 1)),
		WallSeconds: time.Since(wall).Seconds()}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(s)
	}
	return nil
}

// version is the version of module path linked into this binary.
func version(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

// weights are the MLP's parameters as Gorgonia tensors: ws[i] is (in, out)
// so that a layer is x·W + b, bs[i] is (out).
type weights struct {
	sizes  []int
	ws, bs []*tensor.Dense
}

// newWeights initialises as PyTorch's nn.Linear does: weight and bias
// uniform in ±1/√fan_in.
func newWeights(rng *rand.Rand, sizes ...int) *weights {
	w := &weights{sizes: sizes}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		bound := float32(1 / math.Sqrt(float64(in)))
		uniform := func(n int) []float32 {
			v := make([]float32, n)
			for j := range v {
				v[j] = bound * (2*rng.Float32() - 1)
			}
			return v
		}
		w.ws = append(w.ws, tensor.New(tensor.WithShape(in, out), tensor.WithBacking(uniform(in*out))))
		w.bs = append(w.bs, tensor.New(tensor.WithShape(out), tensor.WithBacking(uniform(out))))
	}
	return w
}

// net is one graph of the MLP for a fixed batch size.
type net struct {
	b        int
	x, y     *G.Node // inputs: images (b, 784) and one-hot labels (b, 10)
	xv, yv   *tensor.Dense
	logits   *G.Node
	loss     *G.Node
	params   G.Nodes
	vm       G.VM
	lossVal  G.Value
	logitVal G.Value
}

// newNet builds the graph for batch size b over the shared weights w; with
// train it also builds the cross-entropy loss and its gradient.
func newNet(w *weights, b int, train bool) (*net, error) {
	g := G.NewGraph()
	n := &net{b: b}
	in, classes := w.sizes[0], w.sizes[len(w.sizes)-1]
	n.xv = tensor.New(tensor.WithShape(b, in), tensor.Of(tensor.Float32))
	n.yv = tensor.New(tensor.WithShape(b, classes), tensor.Of(tensor.Float32))
	n.x = G.NewMatrix(g, tensor.Float32, G.WithShape(b, in), G.WithName("x"), G.WithValue(n.xv))
	n.y = G.NewMatrix(g, tensor.Float32, G.WithShape(b, classes), G.WithName("y"), G.WithValue(n.yv))
	h := n.x
	var err error
	for i := range w.ws {
		wn := G.NewMatrix(g, tensor.Float32, G.WithShape(w.ws[i].Shape()...), G.WithName(fmt.Sprintf("w%d", i)), G.WithValue(w.ws[i]))
		bn := G.NewVector(g, tensor.Float32, G.WithShape(w.bs[i].Shape()...), G.WithName(fmt.Sprintf("b%d", i)), G.WithValue(w.bs[i]))
		n.params = append(n.params, wn, bn)
		if h, err = G.Mul(h, wn); err != nil {
			return nil, err
		}
		if h, err = G.BroadcastAdd(h, bn, nil, []byte{0}); err != nil {
			return nil, err
		}
		if i+1 < len(w.ws) {
			if h, err = G.Rectify(h); err != nil {
				return nil, err
			}
		}
	}
	n.logits = h
	G.Read(n.logits, &n.logitVal)
	if !train {
		n.vm = G.NewTapeMachine(g)
		return n, nil
	}
	// Cross-entropy averaged over the batch: -Σ y·log_softmax(logits) / b.
	lsm, err := G.LogSoftMax(n.logits)
	if err != nil {
		return nil, err
	}
	picked, err := G.HadamardProd(lsm, n.y)
	if err != nil {
		return nil, err
	}
	total, err := G.Sum(picked)
	if err != nil {
		return nil, err
	}
	if n.loss, err = G.Mul(total, G.NewConstant(float32(-1)/float32(b))); err != nil {
		return nil, err
	}
	G.Read(n.loss, &n.lossVal)
	if _, err = G.Grad(n.loss, n.params...); err != nil {
		return nil, err
	}
	n.vm = G.NewTapeMachine(g, G.BindDualValues(n.params...))
	return n, nil
}

// step trains on the samples idx of d: forward, backward and one SGD
// update. It returns the batch's loss.
func (n *net) step(d *mnist, idx []int, s G.Solver) (float64, error) {
	d.fill(n.xv.Data().([]float32), n.yv.Data().([]float32), idx)
	if err := n.vm.RunAll(); err != nil {
		return 0, err
	}
	if err := s.Step(G.NodesToValueGrads(n.params)); err != nil {
		return 0, err
	}
	n.vm.Reset()
	return float64(n.lossVal.Data().(float32)), nil
}

// accuracy is the fraction of d the network classifies correctly.
func (n *net) accuracy(d *mnist) (float64, error) {
	correct, idx := 0, make([]int, n.b)
	for lo := 0; lo+n.b <= d.n; lo += n.b {
		for i := range idx {
			idx[i] = lo + i
		}
		d.fill(n.xv.Data().([]float32), n.yv.Data().([]float32), idx)
		if err := n.vm.RunAll(); err != nil {
			return 0, err
		}
		logits := n.logitVal.Data().([]float32)
		classes := len(logits) / n.b
		for i := range n.b {
			row := logits[i*classes : (i+1)*classes]
			best := 0
			for c := range row {
				if row[c] > row[best] {
					best = c
				}
			}
			if best == int(d.labels[lo+i]) {
				correct++
			}
		}
		n.vm.Reset()
	}
	return float64(correct) / float64(d.n), nil
}
