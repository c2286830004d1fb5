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
// on the test set is not timed. The flags, data, loop and summary are
// tools/gopeers/peer's, shared with the GoMLX peer.
package main

import (
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/mixprec/mixprec/tools/gopeers/peer"
	_ "go4.org/unsafe/assume-no-moving-gc" // a newer copy than gorgonia's, which panics at start on Go 1.26
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func main() { peer.Main("gorgonia", run) }

func run(args []string, stdout, stderr io.Writer) error {
	f, err := peer.ParseFlags("gorgonia", args, stderr)
	if err != nil {
		return err
	}
	train, test, err := f.Load()
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(f.Seed, 0x676f72676f6e6961))
	w := newWeights(rng, 784, 256, 128, 10)
	// Gorgonia's graphs have fixed shapes, so the last, partial batch of an
	// epoch (60000 = 468*128 + 96) and evaluation get graphs of their own
	// that share the weight tensors with the main one; the solver keeps its
	// momentum per parameter position, which is the same in every graph.
	solver := G.NewMomentum(G.WithLearnRate(f.LR), G.WithMomentum(f.Momentum))
	nets := map[int]*net{}
	defer func() {
		for _, n := range nets {
			n.vm.Close()
		}
	}()
	step := func(idx []int) (float64, error) {
		n, ok := nets[len(idx)]
		if !ok {
			var err error
			if n, err = newNet(w, len(idx), true); err != nil {
				return 0, err
			}
			nets[len(idx)] = n
		}
		return n.step(train, idx, solver)
	}
	evalNet, err := newNet(w, 1000, false)
	if err != nil {
		return err
	}
	defer evalNet.vm.Close()

	log := f.Logger(stdout)
	log("mnist: mlp 784-256-128-10, SGD lr %g momentum %g, batch %d, Gorgonia on the CPU", f.LR, f.Momentum, f.Batch)
	s, err := peer.Train(f, "gorgonia "+peer.Version("gorgonia.org/gorgonia"), train, rng, step,
		func() (float64, error) { return evalNet.accuracy(test) }, log)
	if err != nil {
		return err
	}
	return f.Report(stdout, s)
}

// weights are the MLP's parameters as Gorgonia tensors: ws[i] is (in, out)
// so that a layer is x·W + b, bs[i] is (out).
type weights struct {
	sizes  []int
	ws, bs []*tensor.Dense
}

// newWeights initialises as PyTorch's nn.Linear does (peer.Init).
func newWeights(rng *rand.Rand, sizes ...int) *weights {
	w := &weights{sizes: sizes}
	ws, bs := peer.Init(rng, sizes...)
	for i := range ws {
		w.ws = append(w.ws, tensor.New(tensor.WithShape(sizes[i], sizes[i+1]), tensor.WithBacking(ws[i])))
		w.bs = append(w.bs, tensor.New(tensor.WithShape(sizes[i+1]), tensor.WithBacking(bs[i])))
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
func (n *net) step(d *peer.MNIST, idx []int, s G.Solver) (float64, error) {
	d.Fill(n.xv.Data().([]float32), n.yv.Data().([]float32), idx)
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
func (n *net) accuracy(d *peer.MNIST) (float64, error) {
	correct, idx := 0, make([]int, n.b)
	for lo := 0; lo+n.b <= d.N; lo += n.b {
		for i := range idx {
			idx[i] = lo + i
		}
		d.Fill(n.xv.Data().([]float32), n.yv.Data().([]float32), idx)
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
			if best == int(d.Labels[lo+i]) {
				correct++
			}
		}
		n.vm.Reset()
	}
	return float64(correct) / float64(d.N), nil
}
