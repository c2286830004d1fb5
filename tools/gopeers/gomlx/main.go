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
// the clock starts.
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
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego" // the pure-Go backend, the only one linked in
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:staticcheck // GoMLX's documented style
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/losses"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gomlx:", err)
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

func run(args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("gomlx", flag.ContinueOnError)
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
	trainSet, err := loadMNIST(filepath.Join(*data, "mnist"), "train")
	if err != nil {
		return err
	}
	testSet, err := loadMNIST(filepath.Join(*data, "mnist"), "t10k")
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
	rng := rand.New(rand.NewPCG(*seed, 0x676f6d6c78))
	ctx := context.New()
	model := newMLP(rng, 784, 256, 128, 10)
	opt := &sgdMomentum{lr: *lr, momentum: *momentum}
	trainer := train.NewTrainer(backend, ctx, model.logits, losses.SparseCategoricalCrossEntropyLogits, opt, nil, nil)

	log := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	log("mnist: mlp 784-256-128-10, SGD lr %g momentum %g, batch %d, GoMLX %s backend on the CPU", *lr, *momentum, *batch, backend.Name())

	if err := warmUp(trainer, ctx, model, trainSet, *batch); err != nil {
		return err
	}

	steps, samples, trainTime, lastLoss, acc := 0, 0, 0.0, 0.0, 0.0
	wall := time.Now()
	order := make([]int, trainSet.n)
	for i := range order {
		order[i] = i
	}
	x := make([]float32, *batch*784)
	y := make([]int32, *batch)
	for epoch := range *epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		start := time.Now()
		sum, nb := 0.0, 0
		for lo := 0; lo < trainSet.n; lo += *batch {
			idx := order[lo:min(lo+*batch, trainSet.n)]
			loss, err := step(trainer, trainSet, idx, x, y)
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
		if acc, err = accuracy(backend, ctx, model, testSet); err != nil {
			return err
		}
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s", epoch+1, lastLoss, 100*acc, float64(samples)/trainTime)
		if *maxSteps > 0 && steps >= *maxSteps {
			break
		}
	}
	s := summary{Model: "mlp", Device: "cpu", AMP: "off", Framework: "gomlx " + version("github.com/gomlx/gomlx") + " (" + simplego.BackendName + " backend)",
		Epochs: *epochs, Steps: steps, Batch: *batch, LR: *lr, TrainLoss: lastLoss, TestAccuracy: acc,
		SamplesPerSec: float64(samples) / trainTime, MsPerStep: 1000 * trainTime / float64(max(steps, 1)),
		WallSeconds: time.Since(wall).Seconds()}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(s)
	}
	return nil
}

// warmUp runs one step at each batch size an epoch uses (full batches and
// the last, partial one), which makes the trainer build and compile their
// graphs, then puts every variable back to its initial value (weights and
// biases as drawn, momentum buffers zero), so that the timed loop sees only
// training and starts from the same state as the other frameworks.
func warmUp(t *train.Trainer, ctx *context.Context, m *mlp, d *mnist, batch int) error {
	x := make([]float32, batch*784)
	y := make([]int32, batch)
	sizes := []int{batch}
	if r := d.n % batch; r != 0 {
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
func step(t *train.Trainer, d *mnist, idx []int, x []float32, y []int32) (float64, error) {
	b := len(idx)
	for i, j := range idx {
		copy(x[i*784:(i+1)*784], d.images[j*784:(j+1)*784])
		y[i] = int32(d.labels[j])
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
func accuracy(backend backends.Backend, ctx *context.Context, m *mlp, d *mnist) (float64, error) {
	exec, err := context.NewExec(backend, ctx.Reuse(), func(ctx *context.Context, x *Node) *Node {
		return ArgMax(m.logits(ctx, nil, []*Node{x})[0], -1, dtypes.Int32)
	})
	if err != nil {
		return 0, err
	}
	defer exec.Finalize()
	const b = 1000
	correct := 0
	for lo := 0; lo < d.n; lo += b {
		hi := min(lo+b, d.n)
		out, err := exec.Exec(tensors.FromFlatDataAndDimensions(d.images[lo*784:hi*784], hi-lo, 784))
		if err != nil {
			return 0, err
		}
		pred, err := tensors.CopyFlatData[int32](out[0])
		if err != nil {
			return 0, err
		}
		for i, p := range pred {
			if int(p) == int(d.labels[lo+i]) {
				correct++
			}
		}
	}
	return float64(correct) / float64(d.n), nil
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
		m.ws = append(m.ws, uniform(in*out))
		m.bs = append(m.bs, uniform(out))
	}
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
