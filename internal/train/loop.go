package train

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/runstate"
)

// Loop is the epoch loop every classifier program trains with
// (examples/mnist, examples/cifar): each epoch's batches go through Step at
// the recipe's learning rate for the step, with a progress bar on a
// terminal, a -metrics line a step and a checkpoint when the Saver says;
// after each epoch the test set is evaluated. It stops early after
// -max-steps steps, at a loss that is not finite and at a signal.
type Loop struct {
	Env   *Env
	Flags *cli.Flags // -epochs, -batch, -lr and -max-steps, and what the summary reports
	// Recipe gives the learning-rate schedule (NewSchedule).
	Recipe models.Recipe
	Step   *Step
	Train  *datasets.Dataset
	Test   *datasets.Dataset
	// Load are the loader's options for every epoch (shuffling,
	// augmentation, workers, dropping a short last batch); the loop adds
	// the epoch, this rank's shard, where a resumed epoch starts, and the
	// profile's hook.
	Load      []datasets.Option
	EvalBatch int // the test set's batches, without -mem-budget (memplan.Plan.EvalBatch)
	// Data names the data in the summary.
	Data string
	// Saver and Rec are the run's checkpoints and signals, and its
	// profile and metrics: Start makes them.
	Saver *Saver
	Rec   *Recorder
	// Plan is -mem-budget's plan, which Start makes and applies (nil
	// without a budget), and guard holds the steps to it.
	Plan  *memplan.Plan
	guard *Guard
}

// Start readies the loop to train run (its model, optimiser, scaler and
// configuration; Start sets its Extent): the Saver, which owns -save's
// directory (NewSaver) and restores a -resume run (Env.Resume), and the
// Recorder of the profile flags pf. It returns where training starts, and
// says so when it resumes. Close releases what Start made, even after an
// error.
func (l *Loop) Start(state cli.StateFlags, pf cli.ProfileFlags, run runstate.Run) (runstate.Position, error) {
	run.Extent = l.Extent()
	// -mem-budget: one step measured on the first batch, the plan printed
	// and applied before anything is saved or trained.
	if err := l.plan(); err != nil {
		return runstate.Position{}, err
	}
	var err error
	if l.Saver, err = l.Env.NewSaver(state, run); err != nil {
		return runstate.Position{}, err
	}
	l.guard = NewGuard(l.Env.Dev, l.Plan, l.Saver)
	pos, err := l.Env.Resume(l.Saver)
	if err != nil {
		return pos, err
	}
	// -profile, -trace, -metrics and -tensorboard: the profiler is nil
	// without the first two, and then costs the step nothing.
	if l.Rec, err = NewRecorder(pf, l.Env.Dev, Info(l.Env.Prog, l.Flags)); err != nil {
		return pos, err
	}
	if state.Resume != "" {
		l.Env.Log("resuming from step %d (epoch %d, batch %d) of %s", pos.Step, pos.Epoch+1, pos.Batch, state.Resume)
	}
	return pos, nil
}

// plan makes -mem-budget's plan on the loader's first batch (PlanBudget)
// and has the step's graphs made as it says; without a budget it does
// nothing.
func (l *Loop) plan() error {
	if !l.Flags.MemBudget.On() {
		return nil
	}
	var err error
	for b := range datasets.Batches(l.Train, l.Flags.Batch, l.Load...) {
		b = b.Part(0, l.Step.PartLen(len(b.Y))) // under -accum, a step's passes are a part's
		l.Plan, err = l.Env.PlanBudget(l.Flags.MemBudget, l.Step.Net, l.Step.Opt, l.Step.Accum > 1,
			func(g *autograd.Graph) *autograd.Var { return l.Step.BatchLoss(g, b) },
			&memplan.Eval{Batch: l.EvalBatch, Pass: EvalPass(l.Step.Net, l.Test, l.Flags.AMP.On(), l.Flags.AMP.DType())})
		break
	}
	l.Step.Options = l.Plan.Options()
	return err
}

// Close releases the Recorder (what Report did not write is discarded)
// and the Saver (-save's directory, and the signals).
func (l *Loop) Close() {
	if l.Rec != nil {
		l.Rec.Close()
	}
	if l.Saver != nil {
		l.Saver.Close()
	}
}

// Extent is the run's extent: its epochs, this rank's batches an epoch,
// and its steps in all, -max-steps included.
func (l *Loop) Extent() runstate.Extent {
	perEpoch := datasets.NumBatches(l.Train, l.Flags.Batch, slices.Concat(l.Load, l.Env.Shard())...)
	return runstate.Extent{Epochs: l.Flags.Epochs, PerEpoch: perEpoch, Steps: TotalSteps(perEpoch, l.Flags.Epochs, l.Flags.MaxSteps)}
}

// Result is what a training loop did.
type Result struct {
	Steps     int     // the run's steps, those before a resume included
	Done      int     // the steps this process took
	Samples   int     // the samples of those steps, over every rank
	TrainTime float64 // seconds spent in the epochs' steps
	Wall      float64 // seconds from the loop's start to the final weights
	Loss      float64 // the last epoch's mean training loss, over every rank
	Accuracy  float64 // the test accuracy after the last epoch; NaN when it stopped early
	Peak      device.MemStats
	// Diverged is set when the loss became NaN or infinite; the loop
	// stopped at that step.
	Diverged *cli.Diverged
	// Interrupted is set when a signal stopped the loop after a step (and
	// the saver wrote its checkpoint).
	Interrupted *cli.Interrupted
	// OverBudget is set when a step went over -mem-budget and the loop
	// stopped after it (with its checkpoint saved).
	OverBudget *cli.OverBudget
	pos        runstate.Position
}

// stopped reports whether the loop stopped before its end.
func (r Result) stopped() bool {
	return r.Diverged != nil || r.Interrupted != nil || r.OverBudget != nil
}

// Err is what the program exits with: the signal or the divergence that
// stopped the run, nil when it ran to its end.
func (r Result) Err() error {
	switch {
	case r.Interrupted != nil:
		return r.Interrupted // main names the signal and the checkpoint, and exits with the signal's status
	case r.OverBudget != nil:
		return r.OverBudget // main names the step, its peak and the checkpoint, and exits with 4
	case r.Diverged != nil:
		return r.Diverged // main says where, and exits non-zero
	}
	return nil
}

// Run trains from pos (the start, or where a checkpoint left the run) to
// the end of the run and writes the final weights (Saver.Finish), unless
// the run stopped early. The error is a failure; a divergence or a signal
// is in the Result.
func (l *Loop) Run(pos runstate.Position) (Result, error) {
	ext := l.Extent()
	schedule := NewSchedule(l.Recipe, l.Flags.LR, ext.PerEpoch, ext.Steps)
	l.Step.Prof = l.Rec.Prof
	dev := l.Env.Dev
	dev.ResetPeak()
	res := Result{Steps: pos.Step, pos: pos}
	wall := time.Now()
	for epoch := pos.Epoch; epoch < l.Flags.Epochs; epoch++ {
		sum, n, err := l.epoch(&res, epoch, ext, schedule)
		if err != nil {
			return res, err
		}
		res.Loss = sum / float64(max(n, 1)) // the mean over every rank's samples: each loss is the ranks' mean
		res.Peak = MaxPeak(res.Peak, dev.MemStats())
		if res.stopped() {
			// A diverged model's accuracy is not worth measuring, and a
			// stopped run is not to be kept waiting for one.
			res.Accuracy = math.NaN()
			break
		}
		res.Accuracy = Evaluate(dev, l.Step.Net, l.Test, l.Plan.EvalBatch(l.EvalBatch), l.Flags.AMP.On(), l.Flags.AMP.DType(), l.Plan.Options()...)
		l.Rec.Eval(res.Steps, epoch+1, res.Accuracy)
		if err := l.guard.AfterEval(res.pos); err != nil {
			if !errors.As(err, &res.OverBudget) {
				return res, err
			}
			break
		}
		dev.ResetPeak()
		l.Env.Log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s, %.1f ms/step", epoch+1, res.Loss,
			100*res.Accuracy, float64(res.Samples)/max(res.TrainTime, 1e-9), 1000*res.TrainTime/float64(max(res.Done, 1)))
		if res.Steps >= ext.Steps {
			break
		}
	}
	if !res.stopped() { // a stopped run saved its checkpoint already
		if err := l.Saver.Finish(res.pos); err != nil {
			return res, err
		}
	}
	res.Wall = time.Since(wall).Seconds()
	return res, nil
}

// epoch trains one epoch's batches, from where a resumed run left it,
// until the run's last step, and returns the sum and count of their
// losses (a resumed epoch's include those before it was saved).
func (l *Loop) epoch(res *Result, epoch int, ext runstate.Extent, schedule optim.Schedule) (sum float64, n int, err error) {
	nn.SetTraining(l.Step.Net, true)
	bar := cli.NewProgress(l.Env.Stderr, fmt.Sprintf("%sepoch %d/%d", l.Env.Tag, epoch+1, l.Flags.Epochs), ext.PerEpoch)
	defer bar.Done()
	start := time.Now()
	defer func() { res.TrainTime += time.Since(start).Seconds() }()
	opts := slices.Concat(l.Load, []datasets.Option{datasets.Epoch(epoch), l.Rec.Prof.Loader()}, l.Env.Shard())
	if pos := res.pos; epoch == pos.Epoch && pos.Batch > 0 { // resumed mid-epoch: the sums so far come with it
		sum, n = pos.Sums["loss"], pos.Counts["loss"]
		opts = append(opts, datasets.From(pos.Batch))
	}
	opt, scaler := l.Step.Opt, l.Step.Scaler
	for b := range l.Rec.Prof.Steps(datasets.Batches(l.Train, l.Flags.Batch, opts...)) { // the profile times the wait for each batch
		if res.Steps >= ext.Steps { // resumed at the end
			break
		}
		optim.Apply(opt, schedule, res.Steps)
		loss, err := l.Step.RunBatch(b)
		if err == nil {
			loss, err = l.Saver.StepLoss(loss) // under -dist, the ranks' mean
		}
		if err != nil {
			return sum, n, err
		}
		for _, w := range scaler.Warnings() {
			fmt.Fprintf(l.Env.Stderr, "%s: %v\n", l.Env.Prog, w)
		}
		sum, n = sum+loss, n+1
		res.Steps++
		res.Done++
		res.Samples += len(b.Y) * l.Env.Ranks
		l.Rec.Step(res.Steps, epoch+1, loss, opt.LR(), scaler, len(b.Y)*l.Env.Ranks) // -metrics
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			// Steps on NaN weights teach nothing: stop and report. An
			// overflow the scaler skips shows in the gradients, not here:
			// the loss is computed in F32 from the unscaled forward pass.
			res.Diverged = &cli.Diverged{Step: res.Steps, Epoch: epoch + 1, Loss: loss}
			break
		}
		bar.Update(n, fmt.Sprintf("loss %.4f lr %.3g", sum/float64(n), opt.LR()))
		res.pos = runstate.Position{Step: res.Steps, Epoch: epoch, Batch: b.Index + 1,
			Sums: map[string]float64{"loss": sum}, Counts: map[string]int{"loss": n}}
		if err := l.Saver.AfterStep(res.pos); err != nil {
			if !errors.As(err, &res.Interrupted) {
				return sum, n, err
			}
			break
		}
		if err := l.guard.AfterStep(res.pos); err != nil {
			if !errors.As(err, &res.OverBudget) {
				return sum, n, err
			}
			break
		}
		if res.Steps >= ext.Steps {
			break
		}
	}
	return sum, n, nil
}

// Report ends the run: it writes the -profile table and the -trace and
// -metrics files, prints the summary (the JSON line with -json; else the
// loss scale and the peak memory), and returns what the program exits
// with (Result.Err).
func (l *Loop) Report(res Result) error {
	s := l.summary(res)
	if err := l.Rec.Finish(l.Env.Stderr); err != nil {
		return err
	}
	if l.Env.JSON {
		if err := cli.PrintJSON(l.Env.Stdout, l.Rec.Summary(s)); err != nil {
			return err
		}
		return l.Env.Outcome(res.Err())
	}
	if l.Step.Scaler.IsEnabled() {
		l.Env.Log("loss scale %g, %d of %d steps skipped", s.FinalScale, s.SkippedSteps, s.Steps)
	}
	l.Env.Log("peak memory: %s (activations %s)", device.FormatBytes(s.PeakBytes.Total), device.FormatBytes(s.PeakBytes.Activation))
	return l.Env.Outcome(res.Err())
}

// summary is the run's JSON summary.
func (l *Loop) summary(res Result) cli.Summary {
	f, scaler := l.Flags, l.Step.Scaler
	s := cli.Summary{Model: f.Model, Data: l.Data, Device: l.Env.Dev.Name(), AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(),
		Epochs: f.Epochs, Steps: res.Steps, TrainLoss: cli.Float(res.Loss), TestAccuracy: cli.Float(res.Accuracy),
		SamplesPerSec: cli.Float(float64(res.Samples) / max(res.TrainTime, 1e-9)), MsPerStep: cli.Float(1000 * res.TrainTime / float64(max(res.Done, 1))),
		WallSeconds: cli.Float(res.Wall), SkippedSteps: scaler.Skipped(), FinalScale: cli.Float(scaler.LossScale()),
		PeakBytes: cli.Peaks(res.Peak), AtPeakBytes: cli.AtPeak(res.Peak), Seed: f.Seed, Batch: f.Batch, LR: cli.Float(f.LR), Optimizer: f.Optimizer,
		DeviceFallback: l.Env.Note, Diverged: res.Diverged != nil, Interrupted: res.Interrupted != nil}
	if l.Env.Ranks > 1 {
		s.WorldSize = l.Env.Ranks
	}
	if res.Diverged != nil {
		s.DivergedStep = res.Diverged.Step
	}
	s.Planned = cli.PlannedOf(l.Plan, res.OverBudget)
	return s
}
