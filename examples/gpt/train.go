package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/runstate"
)

// clipNorm is nanoGPT's gradient clipping.
const clipNorm = 1.0

// evalBatch is how many validation windows one forward pass takes.
const evalBatch = 32

// runner is one run of the program: the model, its data and optimiser,
// and where it reports.
type runner struct {
	f      flags
	cfg    models.GPTConfig
	env    *train.Env // where it runs and reports
	dev    device.Device
	m      *models.GPT
	text   *datasets.Text
	opt    *optim.Adam
	scaler *amp.GradScaler
	rec    *train.Recorder
	saver  *train.Saver
	plan   *memplan.Plan             // -mem-budget's; nil without one
	guard  *train.Guard              // holds the iterations to plan
	dp     *distributed.DataParallel // -dist's; nil without
	start  []int32                   // what -sample continues (prompt)
}

// result is what a run reports: the training loop's figures (Steps are
// iterations, Loss the last one's loss) and the GPT's own.
type result struct {
	train.Result
	tokens  int
	valLoss float64 // NaN when the run stopped early
}

// train runs the iterations from pos on. Iteration it trains on the
// windows a generator seeded with (seed, it) draws, so a resumed run needs
// nothing but the iteration to continue with the same batches. Under
// -dist the generator draws -batch windows for each rank and rank r takes
// the r-th -batch of them: N ranks see the windows one process with N
// times the batch would. A divergence or a signal stops it, and is in the
// result.
func (r *runner) train(pos runstate.Position) (res result, err error) {
	f, env := r.f, r.env
	wall := time.Now()
	defer func() { res.Wall = time.Since(wall).Seconds() }()
	schedule := optim.WarmupCosine(float32(f.LR), float32(f.LR/10), f.Warmup, f.Iters)
	n := f.Batch * f.Accum * f.Block // this rank's windows of an iteration
	xs, ys := make([]int32, n*env.Ranks), make([]int32, n*env.Ranks)
	x, y := xs[env.Rank*n:(env.Rank+1)*n], ys[env.Rank*n:(env.Rank+1)*n]
	res = result{Result: train.Result{Steps: pos.Step, Loss: math.NaN()}, valLoss: math.NaN()}
	bar := cli.NewProgress(r.env.Stderr, "gpt", f.Iters)
	defer bar.Done()
	ema := math.NaN() // the loss the progress bar shows, smoothed as nanoGPT's
	r.dev.ResetPeak()
	prof := r.rec.Prof
	for it := pos.Step; it < f.Iters; it++ {
		start := time.Now()
		prof.StepStart()
		optim.Apply(r.opt, schedule, it)
		datasets.SampleWindows(r.text.Train, f.Block, rand.New(rand.NewPCG(f.Seed, uint64(it))), xs, ys)
		l, err := r.step(prof, x, y)
		if err == nil {
			l, err = r.saver.StepLoss(l) // under -dist, the ranks' mean
		}
		prof.StepEnd()
		if err != nil {
			return res, err
		}
		res.TrainTime += time.Since(start).Seconds()
		res.Steps, res.Done, res.tokens, res.Loss = it+1, res.Done+1, res.tokens+len(xs), l
		r.rec.Step(it+1, 1, l, r.opt.LR(), r.scaler, len(xs))
		if math.IsNaN(l) || math.IsInf(l, 0) {
			res.Diverged = &cli.Diverged{Step: it + 1, Epoch: 1, Loss: l}
			res.Peak = train.MaxPeak(res.Peak, r.dev.MemStats())
			return res, nil
		}
		if math.IsNaN(ema) {
			ema = l
		}
		ema = 0.9*ema + 0.1*l
		eta := time.Duration(res.TrainTime / float64(res.Done) * float64(f.Iters-it-1) * float64(time.Second))
		bar.Update(it+1, fmt.Sprintf("loss %.4f, %.0f tokens/s, ETA %s", ema, float64(res.tokens)/res.TrainTime, eta.Round(time.Second)))
		if f.EvalEvery > 0 && (it+1)%f.EvalEvery == 0 && it+1 < f.Iters && env.Rank == 0 { // only rank 0 prints it
			res.Peak = train.MaxPeak(res.Peak, r.dev.MemStats())
			bar.Done()
			env.Log("iteration %d: train loss %.4f, val loss %.4f", it+1, ema, r.valLoss())
			if err := r.evalGuard(it + 1); err != nil {
				if errors.As(err, &res.OverBudget) {
					return res, nil
				}
				return res, err
			}
			r.dev.ResetPeak()
		}
		if err := r.saver.AfterStep(runstate.Position{Step: it + 1, Batch: it + 1}); err != nil {
			res.Peak = train.MaxPeak(res.Peak, r.dev.MemStats())
			if errors.As(err, &res.Interrupted) {
				return res, nil
			}
			return res, err
		}
		if err := r.guard.AfterStep(runstate.Position{Step: it + 1, Batch: it + 1}); err != nil {
			res.Peak = train.MaxPeak(res.Peak, r.dev.MemStats())
			if errors.As(err, &res.OverBudget) {
				return res, nil
			}
			return res, err
		}
	}
	res.Peak = train.MaxPeak(res.Peak, r.dev.MemStats())
	bar.Done()
	if err := r.saver.Finish(runstate.Position{Step: res.Steps, Batch: res.Steps}); err != nil {
		return res, err
	}
	if env.Rank == 0 { // only rank 0 reports
		res.valLoss = r.valLoss()
		if err := r.evalGuard(res.Steps); err != nil && !errors.As(err, &res.OverBudget) {
			return res, err
		}
	}
	return res, nil
}

// evalGuard checks the validation pass after iteration it against
// -mem-budget (Guard.AfterEval). Under -dist rank 0 alone validates, and
// the guard's checkpoint is saved by every rank together, so there the
// pass is held to the plan's fit (memplan.Plan.FitEval) without the
// check.
func (r *runner) evalGuard(it int) error {
	if r.env.Ranks > 1 {
		return nil
	}
	return r.guard.AfterEval(runstate.Position{Step: it, Batch: it})
}

// step is one training iteration: forward and backward under autocast
// with the loss scaled, for each of -accum batches of x and y, their
// gradients added up (each loss divided by -accum: the mean over all the
// windows), then unscaled and clipped to norm 1, the scaler's step and
// update. It returns the unscaled loss, the batches' mean.
func (r *runner) step(prof *profile.Profiler, x, y []int32) (float64, error) {
	a := r.f.Accum
	n := len(x) / a
	var sum float64
	for k := range a {
		l, err := r.backward(prof, x[k*n:(k+1)*n], y[k*n:(k+1)*n], k == a-1)
		if err != nil {
			return 0, err
		}
		sum += l
	}
	if err := prof.Phase(profile.Unscale, func() error { return r.scaler.Unscale(r.opt) }); err != nil {
		return 0, err
	}
	err := prof.Phase(profile.Optim, func() error {
		optim.ClipGradNorm(r.opt.Params(), clipNorm)
		_, err := r.scaler.Step(r.opt)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := r.scaler.Update(); err != nil {
		return 0, err
	}
	for _, w := range r.scaler.Warnings() {
		fmt.Fprintf(r.env.Stderr, "%s: %v\n", r.env.Prog, w)
	}
	r.opt.ZeroGrad()
	return sum / float64(a), nil
}

// backward takes the forward and backward passes of one batch, adding its
// gradients to those of the iteration's batches before it, and returns
// its loss; after the last, under -dist, every rank's sums are averaged.
func (r *runner) backward(prof *profile.Profiler, x, y []int32, last bool) (float64, error) {
	g := autograd.NewGraph(r.dev, append([]autograd.Option{prof.Graph()}, r.plan.Options()...)...)
	defer g.Release()
	if r.dp != nil && last {
		r.dp.Attach(g)
	}
	loss := r.loss(g, x, y)
	scaled := loss
	if r.f.Accum > 1 {
		scaled = g.Scale(loss, 1/float32(r.f.Accum))
	}
	g.Backward(r.scaler.Scale(g, scaled))
	if r.dp != nil && last { // every rank's gradients averaged before they are unscaled and clipped
		if err := prof.Phase(profile.Comm, r.dp.SyncGrads); err != nil {
			return 0, err
		}
	}
	return float64(loss.Value.Item()), nil
}

// loss records an iteration's forward pass on g: autocast, the windows x
// and their targets y, the model, the loss.
func (r *runner) loss(g *autograd.Graph, x, y []int32) *autograd.Var {
	if r.f.AMP.On() {
		amp.Autocast(g, r.f.AMP.DType())
	}
	return r.m.Loss(g, r.m.Forward(g, g.InputIDs(x, r.f.Batch, r.f.Block)), y)
}

// planBudget is -mem-budget's plan, made before training from one
// iteration measured on the first iteration's windows, printed and
// applied to the model; nil without a budget.
func (r *runner) planBudget() (*memplan.Plan, error) {
	if !r.f.MemBudget.On() {
		return nil, nil
	}
	x, y := make([]int32, r.f.Batch*r.f.Block), make([]int32, r.f.Batch*r.f.Block)
	datasets.SampleWindows(r.text.Train, r.f.Block, rand.New(rand.NewPCG(r.f.Seed, 0)), x, y)
	eval := &memplan.Eval{Batch: evalBatch, Pass: func(g *autograd.Graph, n int) {
		nn.SetTraining(r.m, false)
		defer nn.SetTraining(r.m, true)
		r.evalLoss(g, 0, min(n, datasets.EvalWindows(r.text.Val, r.cfg.Block, r.f.EvalWindows)))
	}}
	return r.env.PlanBudget(r.f.MemBudget, r.m, r.opt, r.f.Accum > 1, func(g *autograd.Graph) *autograd.Var {
		return r.scaler.Scale(g, r.loss(g, x, y))
	}, eval)
}

// valLoss is the deterministic validation loss: the mean cross-entropy
// over the first -eval-windows non-overlapping windows of the validation
// split (window i: x = val[i·block:(i+1)·block], y the next characters),
// dropout off, under the run's autocast, in batches of evalBatch windows
// (under -mem-budget, of the batch the plan fits).
func (r *runner) valLoss() float64 {
	nn.SetTraining(r.m, false)
	defer nn.SetTraining(r.m, true)
	batch := r.plan.EvalBatch(evalBatch)
	w := datasets.EvalWindows(r.text.Val, r.cfg.Block, r.f.EvalWindows)
	opts := append([]autograd.Option{autograd.WithoutGrad()}, r.plan.Options()...)
	var sum float64
	for i0 := 0; i0 < w; i0 += batch {
		g := autograd.NewGraph(r.dev, opts...)
		sum += r.evalLoss(g, i0, min(batch, w-i0))
		g.Release()
	}
	return sum / float64(w*r.cfg.Block)
}

// evalLoss records on g the loss of the n validation windows from i0 on
// and returns their sum: the mean times the characters.
func (r *runner) evalLoss(g *autograd.Graph, i0, n int) float64 {
	block := r.cfg.Block
	x, y := make([]int32, n*block), make([]int32, n*block)
	for i := range n {
		datasets.EvalWindow(r.text.Val, block, i0+i, x[i*block:(i+1)*block], y[i*block:(i+1)*block])
	}
	if r.f.AMP.On() {
		amp.Autocast(g, r.f.AMP.DType())
	}
	loss := r.m.Loss(g, r.m.Forward(g, g.InputIDs(x, n, block)), y)
	return float64(loss.Value.Item()) * float64(n*block)
}

// evalOnly reports the validation loss of the loaded weights.
func (r *runner) evalOnly(stdout io.Writer) error {
	wall := time.Now()
	v := r.valLoss()
	res := result{Result: train.Result{Loss: math.NaN(), Wall: time.Since(wall).Seconds(), Peak: r.dev.MemStats()}, valLoss: v}
	r.env.Log("validation loss %.4f over %d windows of %d characters", v, datasets.EvalWindows(r.text.Val, r.cfg.Block, r.f.EvalWindows), r.cfg.Block)
	if r.f.Sample > 0 {
		r.sample(stdout, r.f.Sample)
	}
	return r.report(stdout, res)
}

// prompt is what -sample continues: -prompt's characters, or a newline
// (or the first character of the vocabulary) without one. A character
// outside the vocabulary is a usage error, found before training.
func prompt(text *datasets.Text, p string) ([]int32, error) {
	if p == "" {
		i, _ := slices.BinarySearch(text.Vocab, '\n')
		return []int32{int32(min(i, len(text.Vocab)-1))}, nil
	}
	ids, err := text.Encode(p)
	if err != nil {
		return nil, cli.Usagef("-prompt: %v", strings.TrimPrefix(err.Error(), "datasets: "))
	}
	return ids, nil
}

// sample prints n characters the model generates after r.start, with the
// temperature and top-k flags, from a stream seeded with -seed: after
// -prompt, which it prints first.
func (r *runner) sample(w io.Writer, n int) {
	nn.SetTraining(r.m, false)
	defer nn.SetTraining(r.m, true)
	rng := rand.New(rand.NewPCG(r.f.Seed, 0x73616d706c65))
	ctx := slices.Clone(r.start)
	v := r.cfg.Vocab
	probs := make([]float64, v)
	// Each character is a graph of its own: autocast's weight copies are
	// made once, on the parameters, and those training did not keep go
	// afterwards.
	defer nn.DropNewCasts(r.m)()
	for range n {
		c := ctx[max(0, len(ctx)-r.cfg.Block):]
		g := autograd.NewGraph(r.dev, autograd.WithoutGrad(), autograd.KeepCasts())
		if r.f.AMP.On() {
			amp.Autocast(g, r.f.AMP.DType())
		}
		logits := r.m.Forward(g, g.InputIDs(c, 1, len(c))).Value.ToHost()
		g.Release()
		ctx = append(ctx, pick(logits[(len(c)-1)*v:], probs, r.f.Temperature, r.f.TopK, rng))
	}
	fmt.Fprintln(w, r.f.Prompt+r.text.Decode(ctx[len(r.start):]))
}

// pick draws an id from logits divided by temperature, among the topK
// largest (all when topK is 0).
func pick(logits []float32, probs []float64, temperature float64, topK int, rng *rand.Rand) int32 {
	cut := math.Inf(-1)
	if topK > 0 && topK < len(logits) {
		s := slices.Clone(logits)
		slices.Sort(s)
		cut = float64(s[len(s)-topK])
	}
	m := math.Inf(-1)
	for _, l := range logits {
		m = math.Max(m, float64(l))
	}
	var z float64
	for i, l := range logits {
		probs[i] = 0
		if float64(l) >= cut {
			probs[i] = math.Exp((float64(l) - m) / temperature)
		}
		z += probs[i]
	}
	u := rng.Float64() * z
	for i, p := range probs {
		if u < p {
			return int32(i)
		}
		u -= p
	}
	return int32(len(probs) - 1)
}

// summary is the JSON object -json prints last.
type summary struct {
	Schema         cli.SchemaVersion `json:"schema"`
	Model          string            `json:"model"`
	Corpus         string            `json:"corpus"`
	Device         string            `json:"device"`
	AMP            string            `json:"amp"`
	Checkpoint     string            `json:"checkpoint"`
	Iters          int               `json:"iters"`
	Params         int               `json:"params"`
	TrainLoss      cli.Float         `json:"train_loss"`
	ValLoss        cli.Float         `json:"val_loss"`
	TokensPerSec   cli.Float         `json:"tokens_per_sec"`
	MsPerStep      cli.Float         `json:"ms_per_step"`
	WallSeconds    cli.Float         `json:"wall_seconds"`
	SkippedSteps   int               `json:"skipped_steps"`
	FinalScale     cli.Float         `json:"final_scale"`
	PeakBytes      cli.PeakBytes     `json:"peak_bytes"`
	AtPeakBytes    cli.PeakBytes     `json:"at_peak_bytes"` // what peak_bytes.total was made of
	Seed           uint64            `json:"seed"`
	Batch          int               `json:"batch"`
	Block          int               `json:"block"`
	LR             cli.Float         `json:"lr"`
	Diverged       bool              `json:"diverged"`
	DivergedStep   int               `json:"diverged_step,omitempty"`
	Interrupted    bool              `json:"interrupted,omitempty"` // a signal stopped the run between iterations (val_loss is then null)
	WorldSize      int               `json:"world_size,omitempty"`  // ranks of a data-parallel run; absent for one process
	Profile        any               `json:"profile,omitempty"`
	DeviceFallback string            `json:"device_note,omitempty"`
	cli.Planned                      // -mem-budget's plan: null without one
}

// report prints the run's last lines, or its JSON summary.
func (r *runner) report(stdout io.Writer, res result) error {
	s := summary{Model: "gpt", Corpus: r.text.Name, Device: r.dev.Name(), AMP: r.f.AMP.String(),
		Checkpoint: r.f.Checkpoint.String(), Iters: res.Steps, Params: nn.CountParams(r.m),
		TrainLoss: cli.Float(res.Loss), ValLoss: cli.Float(res.valLoss),
		TokensPerSec: cli.Float(float64(res.tokens) / max(res.TrainTime, 1e-9)), MsPerStep: cli.Float(1000 * res.TrainTime / float64(max(res.Steps, 1))),
		WallSeconds: cli.Float(res.Wall), PeakBytes: cli.Peaks(res.Peak), AtPeakBytes: cli.AtPeak(res.Peak), Seed: r.f.Seed, Batch: r.f.Batch, Block: r.cfg.Block,
		LR: cli.Float(r.f.LR), Diverged: res.Diverged != nil, Interrupted: res.Interrupted != nil, DeviceFallback: r.env.Note}
	if r.scaler != nil {
		s.SkippedSteps, s.FinalScale = r.scaler.Skipped(), cli.Float(r.scaler.LossScale())
	}
	if res.Diverged != nil {
		s.DivergedStep = res.Diverged.Step
	}
	if r.env.Ranks > 1 {
		s.WorldSize = r.env.Ranks
	}
	s.Planned = cli.PlannedOf(r.plan, res.OverBudget)
	if r.rec != nil {
		if rep := r.rec.Report(); rep != nil {
			s.Profile = rep
		}
	}
	if r.f.JSON {
		return cli.PrintJSON(stdout, s)
	}
	if res.Steps > 0 {
		val := fmt.Sprintf("val loss %.4f", res.valLoss)
		if math.IsNaN(res.valLoss) {
			val = "val loss not measured (the run stopped early)"
		}
		r.env.Log("%d iterations: train loss %.4f, %s, %.0f tokens/s", res.Steps, res.Loss, val, float64(s.TokensPerSec))
		if r.scaler.IsEnabled() {
			r.env.Log("loss scale %g, %d of %d steps skipped", float64(s.FinalScale), s.SkippedSteps, res.Steps)
		}
	}
	r.env.Log("peak memory: %s (activations %s)", device.FormatBytes(s.PeakBytes.Total), device.FormatBytes(s.PeakBytes.Activation))
	return nil
}
