// Command gomlx is a benchmark peer: the MNIST MLP workload of mixprec's
// examples/mnist (784-256-128-10 with ReLU, SGD with momentum 0.9, lr 0.05,
// batch 128, PyTorch's default initialisation, a fresh shuffle each epoch)
// written in GoMLX on its pure-Go backend ("go", SimpleGo), which is what a
// Go user would pick instead of mixprec. It lives in a module of its own so
// that mixprec's own module does not depend on GoMLX.
//
//	go run . -data DIR [-epochs N] [-max-steps N] [-json]
//
// With -json the last line of standard output is one JSON object with the
// keys mixprec's examples print (samples_per_sec, ms_per_step, train_loss,
// test_accuracy, ...). The timed part is the training steps alone (batch
// assembly, forward, backward, update), as in mixprec's examples; evaluation
// on the test set is not timed, and neither is the compilation of the two
// training graphs (full and last partial batch), which happens once, before
// the clock starts. The flags, data, loop and summary are
// tools/gopeers/peer's, shared with the Gorgonia peer.
package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego" // the pure-Go backend, the only one linked in
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX's documented style
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
	"github.com/mixprec/mixprec/tools/gopeers/peer"
)

func main() { peer.Main("gomlx", run) }

func run(args []string, stdout, stderr io.Writer) (err error) {
	f, err := peer.ParseFlags("gomlx", args, stderr)
	if err != nil {
		return err
	}
	trainSet, testSet, err := f.Load()
	if err != nil {
		return err
	}
	// GoMLX reports graph-building errors by panicking; turn them into an
	// error for main to print.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()

	backend, err := backends.NewWithConfig(simplego.BackendName)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(f.Seed, 0x676f6d6c78))
	ctx := context.New()
	model := newMLP(rng, 784, 256, 128, 10)
	opt := &sgdMomentum{lr: f.LR, momentum: f.Momentum}
	trainer := train.NewTrainer(backend, ctx, model.logits, losses.SparseCategoricalCrossEntropyLogits, opt, nil, nil)
	log := f.Logger(stdout)
	log("mnist: mlp 784-256-128-10, SGD lr %g momentum %g, batch %d, GoMLX %s backend on the CPU", f.LR, f.Momentum, f.Batch, backend.Name())
	if err := warmUp(trainer, ctx, model, trainSet, f.Batch); err != nil {
		return err
	}

	x, y := make([]float32, f.Batch*784), make([]int32, f.Batch)
	s, err := peer.Train(f, "gomlx "+peer.Version("github.com/gomlx/gomlx")+" ("+simplego.BackendName+" backend)", trainSet, rng,
		func(idx []int) (float64, error) { return step(trainer, trainSet, idx, x, y) },
		func() (float64, error) { return accuracy(backend, ctx, model, testSet) }, log)
	if err != nil {
		return err
	}
	return f.Report(stdout, s)
}

// warmUp runs one step at each batch size an epoch uses (full batches and
// the last, partial one), which makes the trainer build and compile their
// graphs, then puts every variable back to its initial value (weights and
// biases as drawn, momentum buffers zero), so that the timed loop sees only
// training and starts from the same state as the other frameworks.
func warmUp(t *train.Trainer, ctx *context.Context, m *mlp, d *peer.MNIST, batch int) error {
	x := make([]float32, batch*784)
	y := make([]int32, batch)
	sizes := []int{batch}
	if r := d.N % batch; r != 0 {
		sizes = append(sizes, r)
	}
	for _, b := range sizes {
		idx := make([]int, b)
		for i := range idx {
			idx[i] = i
		}
		if _, err := step(t, d, idx, x, y); err != nil {
			return err
		}
	}
	var err error
	ctx.EnumerateVariables(func(v *context.Variable) {
		var i int
		switch {
		case v.Trainable && v.Name() == "weights" && scopeLayer(v.Scope(), &i):
			err = errors.Join(err, v.SetValue(tensors.FromFlatDataAndDimensions(m.ws[i], m.sizes[i], m.sizes[i+1])))
		case v.Trainable && v.Name() == "biases" && scopeLayer(v.Scope(), &i):
			err = errors.Join(err, v.SetValue(tensors.FromFlatDataAndDimensions(m.bs[i], 1, m.sizes[i+1])))
		case v.Trainable:
			err = errors.Join(err, fmt.Errorf("warm-up: unexpected trainable variable %s/%s", v.Scope(), v.Name()))
		case strings.HasSuffix(v.Name(), "_momentum"):
			err = errors.Join(err, v.SetValue(tensors.FromShape(v.Shape())))
		}
	})
	return err
}

// scopeLayer reports whether scope names layer i of the model ("/linear<i>").
func scopeLayer(scope string, i *int) bool {
	_, err := fmt.Sscanf(scope, context.ScopeSeparator+"linear%d", i)
	return err == nil
}

// step trains on the samples idx of d and returns the batch's loss; x and y
// are scratch space for at least len(idx) samples.
func step(t *train.Trainer, d *peer.MNIST, idx []int, x []float32, y []int32) (float64, error) {
	b := len(idx)
	for i, j := range idx {
		copy(x[i*784:(i+1)*784], d.Images[j*784:(j+1)*784])
		y[i] = int32(d.Labels[j])
	}
	xt := tensors.FromFlatDataAndDimensions(x[:b*784], b, 784)
	yt := tensors.FromFlatDataAndDimensions(y[:b], b, 1)
	metrics, err := t.TrainStep(b, []*tensors.Tensor{xt}, []*tensors.Tensor{yt})
	if err != nil {
		return 0, err
	}
	// The first metric is the batch's loss.
	return float64(tensors.ToScalar[float32](metrics[0])), nil
}

// accuracy is the fraction of d the network classifies correctly.
func accuracy(backend backends.Backend, ctx *context.Context, m *mlp, d *peer.MNIST) (float64, error) {
	exec, err := context.NewExec(backend, ctx.Reuse(), func(ctx *context.Context, x *Node) *Node {
		return ArgMax(m.logits(ctx, nil, []*Node{x})[0], -1, dtypes.Int32)
	})
	if err != nil {
		return 0, err
	}
	defer exec.Finalize()
	const b = 1000
	correct := 0
	for lo := 0; lo < d.N; lo += b {
		hi := min(lo+b, d.N)
		out, err := exec.Exec(tensors.FromFlatDataAndDimensions(d.Images[lo*784:hi*784], hi-lo, 784))
		if err != nil {
			return 0, err
		}
		pred, err := tensors.CopyFlatData[int32](out[0])
		if err != nil {
			return 0, err
		}
		for i, p := range pred {
			if int(p) == int(d.Labels[lo+i]) {
				correct++
			}
		}
	}
	return float64(correct) / float64(d.N), nil
}

// mlp is the network: Linear layers with ReLU between them, whose initial
// values are drawn once, as PyTorch's nn.Linear draws them (weight and bias
// uniform in ±1/√fan_in).
type mlp struct {
	sizes  []int
	ws, bs [][]float32 // initial values: ws[i] is (in, out), so a layer is x·W + b
}

func newMLP(rng *rand.Rand, sizes ...int) *mlp {
	m := &mlp{sizes: sizes}
	m.ws, m.bs = peer.Init(rng, sizes...)
	return m
}

// logits is the model function GoMLX's trainer calls for every graph it
// builds: inputs[0] is (b, 784), the result (b, 10). Variables are created
// with the initial values on the first graph a context sees and reused
// after.
func (m *mlp) logits(ctx *context.Context, _ any, inputs []*Node) []*Node {
	h := inputs[0]
	g := h.Graph()
	for i := range m.ws {
		in, out := m.sizes[i], m.sizes[i+1]
		c := ctx.In(fmt.Sprintf("linear%d", i))
		w := c.VariableWithValue("weights", tensors.FromFlatDataAndDimensions(m.ws[i], in, out)).ValueGraph(g)
		b := c.VariableWithValue("biases", tensors.FromFlatDataAndDimensions(m.bs[i], 1, out)).ValueGraph(g)
		h = Add(Dot(h, w), b)
		if i+1 < len(m.ws) {
			h = activations.Relu(h)
		}
	}
	return []*Node{h}
}

// sgdMomentum is torch.optim.SGD with momentum (no dampening, no Nesterov,
// no weight decay): buf = momentum·buf + grad; w -= lr·buf. GoMLX's own SGD
// has no momentum (and decays its rate by 1/√step by default), so this is
// the recipe's optimiser written against GoMLX's optimizer interface.
type sgdMomentum struct {
	lr, momentum float64
}

// UpdateGraph adds the update of every trainable variable the graph uses.
func (o *sgdMomentum) UpdateGraph(ctx *context.Context, g *Graph, loss *Node) {
	// BuildTrainableVariablesGradientsGraph returns gradients in the order
	// the context enumerates its trainable variables in use by g: collect
	// them in that order before creating any momentum buffer.
	grads := ctx.BuildTrainableVariablesGradientsGraph(loss)
	var vars []*context.Variable
	ctx.EnumerateVariables(func(v *context.Variable) {
		if v.Trainable && v.InUseByGraph(g) {
			vars = append(vars, v)
		}
	})
	if len(vars) != len(grads) {
		panic(fmt.Sprintf("sgdMomentum: %d gradients for %d trainable variables", len(grads), len(vars)))
	}
	unchecked := ctx.Checked(false) // the second graph finds the buffers the first made
	for i, v := range vars {
		shape := v.Shape()
		buf := unchecked.InAbsPath(context.ScopeSeparator+"sgd_momentum"+v.Scope()).VariableWithValue(v.Name()+"_momentum", tensors.FromShape(shape)).SetTrainable(false)
		next := Add(MulScalar(buf.ValueGraph(g), o.momentum), grads[i])
		buf.SetValueGraph(next)
		v.SetValueGraph(Sub(v.ValueGraph(g), MulScalar(next, o.lr)))
	}
}

// Clear has nothing to free beyond the momentum buffers, which live in the
// context and go with it.
func (o *sgdMomentum) Clear(*context.Context) error { return nil }
