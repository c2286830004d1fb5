// Package train holds what the programs share around their training
// scripts, so that each program reads top to bottom as a user's script
// would: where a run runs (Env: the device, the ranks of a data-parallel
// run, the output), the one training step every program takes (Step; the
// GPT's adds gradient clipping), the epoch loop of the classifiers (Loop),
// the optimiser and schedule a model's recipe names, evaluation, a run's
// checkpoints and signals (Saver), its metrics, trace and profile
// (Recorder), and its summary.
package train

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/tensor"
)

// Step is one training step as every program here takes it: a fresh graph,
// autocast when Low is F16 or BF16, the forward pass (checkpointed when
// Segments > 0), cross-entropy, backward through the scaler, the scaler's
// step and update, zeroed gradients, and the graph released.
type Step struct {
	Dev      device.Device
	Net      *nn.Sequential
	Opt      optim.Optimizer
	Scaler   *amp.GradScaler
	Low      dtype.DType // autocast dtype; F32 for none
	Segments int         // checkpoint Net's layers in this many segments; 0 for none
	// Attach, when set, gets each step's graph before the forward pass,
	// and Sync runs between backward and the scaler's step: a data-parallel
	// run starts averaging gradients over its ranks during backward and
	// finishes there.
	Attach func(*autograd.Graph)
	Sync   func() error
	// Prof, when set, times the step's ops, the gradients' averaging
	// (Sync), the scaler's unscale and the optimiser's step.
	Prof *profile.Profiler
	// Options are more options for each step's graph: a memory plan's
	// (memplan.Plan.Options).
	Options []autograd.Option
	// Accum, above 1, has RunBatch split each batch into that many parts
	// (gradient accumulation): each part's forward and backward pass on a
	// graph of its own, its loss weighted by its share of the batch, their
	// gradients added up, then the scaler's step once. The gradients are
	// the whole batch's mean loss's, in a part's memory. The scaler must
	// not unscale as products store (amp.UnscaleAsStored), which assumes
	// one backward pass a step.
	Accum int
}

// Run takes one step on the batch x (N, sample...) with labels y and
// returns the unscaled loss, which is NaN or infinite when training has
// diverged; the error is the scaler's.
func (s *Step) Run(x tensor.Host, y []int32) (float64, error) {
	return s.run(s.batchInput(datasets.Batch{X: x}), y)
}

// RunBatch takes one step on a loader's batch: on the bits the loader
// rounded it to (datasets.Bits with InputDType), read where they are
// (autograd.Graph.InputBitsView), else on its X as Run takes it. The
// loader refills the batch only once the step is over.
func (s *Step) RunBatch(b datasets.Batch) (float64, error) {
	if s.Accum > 1 {
		return s.runParts(b)
	}
	return s.run(s.batchInput(b), b.Y)
}

// batchInput makes b a leaf of a step's graph, as RunBatch takes it.
func (s *Step) batchInput(b datasets.Batch) func(*autograd.Graph) *autograd.Var {
	if b.X16.Bits == nil {
		return func(g *autograd.Graph) *autograd.Var { return input(g, b.X, s.InputDType()) }
	}
	return func(g *autograd.Graph) *autograd.Var { return g.InputBitsView(b.X16) }
}

// runParts is RunBatch under Accum: the batch's parts' passes, then one
// update. It returns the batch's mean loss.
func (s *Step) runParts(b datasets.Batch) (float64, error) {
	n := len(b.Y)
	var sum float64
	for k := range s.Accum {
		lo, hi := k*n/s.Accum, (k+1)*n/s.Accum
		if lo == hi {
			continue
		}
		p := b.Part(lo, hi)
		w := float32(hi-lo) / float32(n)
		l, err := s.backward(s.batchInput(p), p.Y, w, k == s.Accum-1)
		if err != nil {
			return 0, err
		}
		sum += l * float64(hi-lo)
	}
	return sum / float64(n), s.update()
}

// PartLen is the length of a batch of n samples' largest part under Accum.
func (s *Step) PartLen(n int) int {
	if s.Accum <= 1 {
		return n
	}
	return (n + s.Accum - 1) / s.Accum
}

// InputDType is the dtype to feed the step's batches in: see the function
// InputDType.
func (s *Step) InputDType() dtype.DType { return InputDType(s.Net, s.Low) }

// run takes one step on the batch that input makes a leaf of the step's
// graph, with labels y.
func (s *Step) run(input func(*autograd.Graph) *autograd.Var, y []int32) (float64, error) {
	l, err := s.backward(input, y, 1, true)
	if err != nil {
		return 0, err
	}
	return l, s.update()
}

// backward takes the forward and backward passes of the batch that input
// makes a leaf of a fresh graph, with labels y, its loss weighted by w
// (with its gradients added to those already there), and returns the
// unweighted loss. The last pass of a step attaches the data-parallel
// averaging and finishes it.
func (s *Step) backward(input func(*autograd.Graph) *autograd.Var, y []int32, w float32, last bool) (float64, error) {
	if s.Segments < 0 {
		panic(fmt.Sprintf("train.Step: %d checkpoint segments; want 0 (none) or more", s.Segments))
	}
	g := autograd.NewGraph(s.Dev, append([]autograd.Option{s.Prof.Graph()}, s.Options...)...)
	defer g.Release()
	if s.Attach != nil && last {
		s.Attach(g)
	}
	loss := s.forward(g, input, y)
	weighted := loss
	if w != 1 {
		weighted = g.Scale(loss, w)
	}
	g.Backward(s.Scaler.Scale(g, weighted))
	if s.Sync != nil && last {
		if err := s.Prof.Phase(profile.Comm, s.Sync); err != nil {
			return 0, err
		}
	}
	return float64(loss.Value.Item()), nil
}

// update is the step after its backward passes: the scaler's unscale,
// step and update, and the gradients zeroed.
func (s *Step) update() error {
	// Unscaled apart from Step (which would do it) so that a profile
	// shows the two apart.
	if err := s.Prof.Phase(profile.Unscale, func() error { return s.Scaler.Unscale(s.Opt) }); err != nil {
		return err
	}
	if err := s.Prof.Phase(profile.Optim, func() error { _, err := s.Scaler.Step(s.Opt); return err }); err != nil {
		return err
	}
	if err := s.Scaler.Update(); err != nil {
		return err
	}
	s.Opt.ZeroGrad()
	return nil
}

// forward records the step's forward pass on g, autocast included, and
// returns the unscaled loss.
func (s *Step) forward(g *autograd.Graph, input func(*autograd.Graph) *autograd.Var, y []int32) *autograd.Var {
	if s.Low != dtype.F32 {
		amp.Autocast(g, s.Low)
	}
	in := input(g)
	var logits *autograd.Var
	if s.Segments > 0 {
		logits = nn.CheckpointSequential(g, s.Net.Layers, s.Segments, in)
	} else {
		logits = s.Net.Forward(g, in)
	}
	return nn.CrossEntropy(g, logits, y)
}

// Loss records Run's forward pass of the batch x with labels y on g, and
// returns the loss scaled as Run's backward pass takes it: what a memory
// planner's dry step measures (memplan.Config.Loss).
func (s *Step) Loss(g *autograd.Graph, x tensor.Host, y []int32) *autograd.Var {
	return s.BatchLoss(g, datasets.Batch{X: x, Y: y})
}

// BatchLoss is Loss for a loader's batch, as RunBatch takes it.
func (s *Step) BatchLoss(g *autograd.Graph, b datasets.Batch) *autograd.Var {
	return s.Scaler.Scale(g, s.forward(g, s.batchInput(b), b.Y))
}

// InputDType is the dtype to feed net's batches in (autograd.Graph.InputAs)
// under autocast to low (F32: none): low when the op that alone takes the
// input computes in low (a first Linear or convolution), which gives the
// bits of that op's own cast of an F32 batch without the F32 copy and the
// cast; F32 otherwise.
func InputDType(net nn.Module, low dtype.DType) dtype.DType {
	if low == dtype.F32 {
		return dtype.F32
	}
	if op, ok := nn.FirstOp(net); ok && amp.ClassOf(op) == amp.Low {
		return low
	}
	return dtype.F32
}

// NewOptimizer makes the optimiser name ("sgd", "sgd-nesterov", "adam" or
// "adamw") over params at learning rate lr. The recipe's momentum, Nesterov
// flag and weight decay apply when it names the same optimiser
// (cli.OptimizerName); another one gets its package defaults, since a
// recipe's settings are tuned for its own, except that "sgd-nesterov" has
// momentum 0.9, without which Nesterov's has no meaning.
func NewOptimizer(name string, params []*autograd.Var, lr float64, r models.Recipe) (optim.Optimizer, error) {
	opts := []optim.Option{optim.LR(float32(lr))}
	switch {
	case name == cli.OptimizerName(r):
		if r.Momentum != 0 {
			opts = append(opts, optim.Momentum(r.Momentum))
		}
		if r.Nesterov {
			opts = append(opts, optim.Nesterov())
		}
		if r.WeightDecay != 0 {
			opts = append(opts, optim.WeightDecay(float32(r.WeightDecay)))
		}
	case name == "sgd-nesterov":
		opts = append(opts, optim.Momentum(0.9), optim.Nesterov())
	}
	switch name {
	case "sgd", "sgd-nesterov":
		return optim.NewSGD(params, opts...), nil
	case "adam":
		return optim.NewAdam(params, opts...), nil
	case "adamw":
		return optim.NewAdamW(params, opts...), nil
	}
	return nil, fmt.Errorf("optimiser %q: want sgd, sgd-nesterov, adam or adamw", name)
}

// NewSchedule is the recipe's learning-rate schedule at base rate lr over
// total steps of perEpoch each.
func NewSchedule(r models.Recipe, lr float64, perEpoch, total int) optim.Schedule {
	switch r.Schedule {
	case models.OneCycle:
		return optim.OneCycle(float32(lr), total, 0.25, 25, 1e4)
	case models.Cosine:
		return optim.Cosine(float32(lr), 0, min(perEpoch, total/10), total)
	}
	return optim.Constant(float32(lr))
}

// TotalSteps is how many steps a run of epochs takes at perEpoch steps each,
// capped by maxSteps when it is positive, without overflowing.
func TotalSteps(perEpoch, epochs, maxSteps int) int {
	total := perEpoch * epochs
	if perEpoch > 0 && epochs > (1<<62)/perEpoch {
		total = 1 << 62
	}
	if maxSteps > 0 {
		total = min(total, maxSteps)
	}
	return total
}

// input is x as a leaf of g in dtype dt: read in place when dt is F32 and
// the device's memory is the host's (autograd.Graph.InputView), as x does
// not change while g lives; converted as it is copied otherwise.
func input(g *autograd.Graph, x tensor.Host, dt dtype.DType) *autograd.Var {
	if dt == dtype.F32 {
		return g.InputView(x)
	}
	return g.InputAs(x, dt)
}

// Evaluate returns net's accuracy on d in evaluation mode, without
// recording gradients, under autocast to low when useAMP is set, in
// batches of batch samples on graphs made with opts (a memory plan's). It
// leaves net in evaluation mode.
func Evaluate(dev device.Device, net nn.Module, d *datasets.Dataset, batch int, useAMP bool, low dtype.DType, opts ...autograd.Option) float64 {
	nn.SetTraining(net, false)
	correct := 0
	opts = append([]autograd.Option{autograd.WithoutGrad()}, opts...)
	for b := range datasets.Batches(d, batch) {
		g := autograd.NewGraph(dev, opts...)
		correct += evalBatch(g, net, b, useAMP, low)
		g.Release()
	}
	return float64(correct) / float64(max(d.Len(), 1))
}

// EvalPass is Evaluate's pass over the first n samples of d, for a memory
// plan to fit (memplan.Eval): it leaves net in training mode.
func EvalPass(net nn.Module, d *datasets.Dataset, useAMP bool, low dtype.DType) func(g *autograd.Graph, n int) {
	return func(g *autograd.Graph, n int) {
		nn.SetTraining(net, false)
		defer nn.SetTraining(net, true)
		for b := range datasets.Batches(d, n) {
			evalBatch(g, net, b, useAMP, low)
			break
		}
	}
}

// evalBatch records net's forward pass of b on g and returns how many of
// b's samples it classifies right.
func evalBatch(g *autograd.Graph, net nn.Module, b datasets.Batch, useAMP bool, low dtype.DType) int {
	in := dtype.F32
	if useAMP {
		in = InputDType(net, low)
		amp.Autocast(g, low)
	}
	logits := net.Forward(g, input(g, b.X, in))
	dev := g.Device()
	pred := tensor.New(dev, dtype.F32, device.Temp, len(b.Y))
	defer pred.Release()
	dev.Argmax(pred.Buffer(), logits.Value.Buffer(), len(b.Y), logits.Shape()[1])
	correct := 0
	for i, p := range pred.ToHost() {
		if int32(p) == b.Y[i] {
			correct++
		}
	}
	return correct
}

// EvalSummary evaluates net on d as Evaluate does and returns the -json
// summary of an -eval run with what evaluating measured: the accuracy, the
// wall time, the samples a second and the peak memory, and the batch it
// evaluated in. What only training measures (the training loss, the time a
// step, the loss scale, the learning rate) is NaN, which the summary
// prints as null; the caller fills in the run's names.
func EvalSummary(dev device.Device, net nn.Module, d *datasets.Dataset, batch int, useAMP bool, low dtype.DType) cli.Summary {
	dev.ResetPeak()
	start := time.Now()
	acc := Evaluate(dev, net, d, batch, useAMP, low)
	secs := time.Since(start).Seconds()
	nan := cli.Float(math.NaN())
	return cli.Summary{TestAccuracy: cli.Float(acc), WallSeconds: cli.Float(secs), SamplesPerSec: cli.Float(float64(d.Len()) / max(secs, 1e-9)),
		PeakBytes: cli.Peaks(dev.MemStats()), AtPeakBytes: cli.AtPeak(dev.MemStats()), Batch: batch, TrainLoss: nan, MsPerStep: nan, FinalScale: nan, LR: nan}
}

// Fingerprint says which data d holds, for ranks to compare: its name,
// size, sample shape and a digest of its labels (the samples' order and
// classes), so that ranks loading different files, or the same files
// differently, are told apart without hashing every pixel.
func Fingerprint(d *datasets.Dataset) string {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, d.Y)
	return fmt.Sprintf("%s: %d samples of %v, labels %x", d.Name, d.Len(), d.Shape, h.Sum(nil)[:8])
}

// TextFingerprint names a corpus by its name, size, vocabulary and a hash
// of its ids, as Fingerprint names a Dataset.
func TextFingerprint(t *datasets.Text) string {
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, t.Vocab)
	binary.Write(h, binary.LittleEndian, t.Train)
	binary.Write(h, binary.LittleEndian, t.Val)
	return fmt.Sprintf("%s: %d characters (%d distinct), %x", t.Name, len(t.Train)+len(t.Val), len(t.Vocab), h.Sum(nil)[:8])
}

// Together is err as a rank of a data-parallel job returns it: a mismatch
// that every rank finds alike (distributed.MismatchError) is written once,
// by rank 0 on stderr as program prog's one line, and every rank waits for
// that before it returns the error quietly (cli.Quiet), since mpirun ends
// the whole job as soon as one rank exits with an error, which could cut
// rank 0 short before it has said why. Other errors are returned as they
// are, for each rank to say.
func Together(comm device.Comm, err error, stderr io.Writer, prog string) error {
	var m *distributed.MismatchError
	if err == nil || !errors.As(err, &m) {
		return err
	}
	if comm.Rank() == 0 {
		fmt.Fprintf(stderr, "%s: %s\n", prog, strings.Join(strings.Fields(err.Error()), " "))
	}
	comm.Barrier() // an error here changes nothing: every rank stops anyway
	return &cli.Quiet{Err: err}
}

// MaxPeak keeps, figure by figure, the larger peak of a and b: the peak
// over several stretches of training with evaluation (and a ResetPeak) in
// between. AtPeak is that of the larger Peak.Total (a's on a tie, the
// earlier stretch, as the accounting keeps the first time a peak is
// reached).
func MaxPeak(a, b device.MemStats) device.MemStats {
	if b.Peak.Total > a.Peak.Total {
		a.AtPeak = b.AtPeak
	}
	a.Peak = a.Peak.Max(b.Peak)
	return a
}
