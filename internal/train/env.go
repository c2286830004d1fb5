package train

import (
	"fmt"
	"io"
	"maps"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/runstate"
)

// Env is where a training program runs: its name (the prefix of its lines
// on standard error), its device, the ranks of a data-parallel run, and
// where it reports. Open and OpenDevice make one; Close ends the ranks.
type Env struct {
	Prog   string
	Dev    device.Device
	Note   string      // why -device auto did not take CUDA, or ""
	Comm   device.Comm // nil without -dist
	Rank   int
	Ranks  int       // 1 without -dist
	Stdout io.Writer // io.Discard on a rank other than 0
	Stderr io.Writer // likewise
	JSON   bool      // -json: standard output gets the summary alone
	// Tag starts every line the program prints and its progress bars:
	// "[synthetic data] " says what the numbers are not.
	Tag string

	closeDist func() error
	dp        *distributed.DataParallel // DataParallel's, nil without -dist
}

// OpenDevice opens the device -device names (cli.OpenDevice) for program
// prog, and says on stderr what the user must know about it before
// training (cli.DeviceWarning). It starts no ranks: for a program without
// -dist.
func OpenDevice(prog, name string, json bool, stdout, stderr io.Writer) (*Env, error) {
	dev, note, err := cli.OpenDevice(name)
	if err != nil {
		return nil, err
	}
	if w := cli.DeviceWarning(dev); w != "" {
		fmt.Fprintf(stderr, "%s: %s: %s\n", prog, dev.Name(), w)
	}
	return &Env{Prog: prog, Dev: dev, Note: note, Ranks: 1, Stdout: stdout, Stderr: stderr, JSON: json,
		closeDist: func() error { return nil }}, nil
}

// Open opens the device as OpenDevice does and, with -dist, the ranks: one
// process per rank under mpirun, each training on its shard of every
// batch. Rank 0 alone prints, saves and profiles for the run, so on the
// others Open discards the output and clears f's -save, -save-every and
// profile flags.
func Open(prog string, f *cli.TrainFlags, stdout, stderr io.Writer) (*Env, error) {
	return OpenRanks(prog, f.Device, f.Dist, f.JSON, &f.State, &f.Profile, stdout, stderr)
}

// OpenRanks is Open for a program whose flags are its own: the device
// named device, the ranks dist asks for, and on a rank other than 0 no
// output, no -save or -save-every in state and no profiling in prof.
func OpenRanks(prog, device string, dist cli.DistFlags, json bool, state *cli.StateFlags, prof *cli.ProfileFlags, stdout, stderr io.Writer) (*Env, error) {
	// Under -dist nccl, each rank of a machine takes its own GPU.
	if err := dist.BindDevice(); err != nil {
		return nil, err
	}
	e, err := OpenDevice(prog, device, json, stdout, stderr)
	if err != nil {
		return nil, err
	}
	comm, closeDist, err := dist.Open(e.Dev) // nil without -dist
	if err != nil {
		return nil, err
	}
	e.closeDist = closeDist
	if comm != nil {
		e.Comm, e.Rank, e.Ranks = comm, comm.Rank(), comm.Size()
		if e.Rank != 0 {
			e.Stdout, e.Stderr = io.Discard, io.Discard
			state.Save, state.SaveEvery = "", 0
			*prof = cli.ProfileFlags{}
		}
	}
	return e, nil
}

// Close ends the ranks of a data-parallel run.
func (e *Env) Close() { e.closeDist() }

// Log prints a line on standard output, after Tag, unless -json asked for
// the summary alone.
func (e *Env) Log(format string, a ...any) {
	if !e.JSON {
		fmt.Fprintf(e.Stdout, e.Tag+format+"\n", a...)
	}
}

// LogNotes says what the run does otherwise than its flags suggest: the
// CPU where -device auto found no usable GPU, and no loss scaling where
// autocast (a) does not need it (BF16). The scaler is nil for a run that
// does not train.
func (e *Env) LogNotes(a cli.AMP, scaler *amp.GradScaler) {
	if e.Note != "" {
		e.Log("(CUDA not used: %s)", e.Note)
	}
	if a.On() && scaler != nil && !scaler.IsEnabled() {
		e.Log("(%s)", scaler.Note())
	}
}

// Agree stops every rank of a data-parallel run, rank 0 naming the
// difference, when the ranks' settings (flag name to value) or their
// training data (Fingerprint) differ: ranks that differ would fail late
// and obscurely, or train silently wrong. Without -dist it does nothing.
func (e *Env) Agree(settings map[string]string, data *datasets.Dataset) error {
	return e.AgreeOn(settings, Fingerprint(data))
}

// AgreeOn is Agree for data that is not a Dataset: fingerprint names it
// (the same on every rank that loaded the same data).
func (e *Env) AgreeOn(settings map[string]string, fingerprint string) error {
	if e.Comm == nil {
		return nil
	}
	s := maps.Clone(settings)
	s["data"] = fingerprint
	return Together(e.Comm, distributed.AgreeSettings(e.Comm, e.Dev, s), e.Stderr, e.Prog)
}

// Parallel makes step data-parallel under -dist: every rank starts from
// rank 0's weights, and the gradients are averaged over the ranks while
// backward runs. Without -dist it does nothing.
func (e *Env) Parallel(step *Step) error {
	dp, err := e.DataParallel(step.Net)
	if dp != nil {
		step.Attach, step.Sync = dp.Attach, dp.SyncGrads
	}
	return err
}

// DataParallel is Parallel for a step of the program's own: under -dist,
// m's weights are rank 0's and the result averages the gradients of the
// graphs it is attached to (Attach before the forward pass, SyncGrads
// between backward and the optimiser); nil without -dist.
//
// Each of m's dropout streams is split among the ranks (autograd.RNG.Shard),
// so that no two ranks draw the same masks.
func (e *Env) DataParallel(m nn.Module) (*distributed.DataParallel, error) {
	if e.Comm == nil {
		return nil, nil
	}
	dp, err := distributed.New(e.Comm, Entries(m))
	if err != nil {
		return nil, Together(e.Comm, err, e.Stderr, e.Prog)
	}
	for _, r := range nn.RNGs(m) {
		r.RNG.Shard(e.Rank, e.Ranks)
	}
	e.dp = dp
	return dp, nil
}

// Shard is the loader's option that gives this rank its part of every
// batch under -dist; none without.
func (e *Env) Shard() []datasets.Option {
	if e.Ranks > 1 {
		return []datasets.Option{datasets.Shard(e.Rank, e.Ranks)}
	}
	return nil
}

// Outcome is the error a run's result ends the program with (Result.Err):
// on a rank other than 0 made quiet (cli.Quiet, the same exit status),
// since rank 0 names the signal, the divergence or the step over budget
// and its checkpoint for the whole run, where another rank would say that
// it saved nothing.
func (e *Env) Outcome(err error) error {
	if err == nil || e.Rank == 0 {
		return err
	}
	return &cli.Quiet{Err: err}
}

// NewSaver is the program's Saver (NewSaver) for state and run, whose
// ranks, under -dist, stop together (Saver.Together).
func (e *Env) NewSaver(state cli.StateFlags, run runstate.Run) (*Saver, error) {
	s, err := NewSaver(e.Prog, state, run, e.Stderr)
	if err == nil && e.Comm != nil {
		s.Together(e.Comm, e.Dev)
	}
	return s, err
}

// Resume restores the run as s.Resume does and, under -dist, stops every
// rank unless all go on from the same step.
func (e *Env) Resume(s *Saver) (runstate.Position, error) {
	pos, err := s.Resume()
	if err != nil || e.Comm == nil {
		return pos, err
	}
	resumed := map[string]string{"-resume": Resumed(s.flags, pos)}
	return pos, Together(e.Comm, distributed.AgreeSettings(e.Comm, e.Dev, resumed), e.Stderr, e.Prog)
}

// Config is what a checkpoint of program prog's run records of it, and a
// run that resumes it must share (runstate.Run.Config): the flags that
// shape the run, the number of ranks, and the program's own settings in
// extra.
func Config(prog string, f *cli.Flags, ranks int, extra map[string]string) map[string]string {
	c := map[string]string{"program": prog, "model": f.Model, "amp": f.AMP.String(), "batch": fmt.Sprint(f.Batch),
		"seed": fmt.Sprint(f.Seed), "optim": f.Optimizer, "lr": fmt.Sprint(f.LR), "epochs": fmt.Sprint(f.Epochs),
		"max_steps": fmt.Sprint(f.MaxSteps), "checkpoint": f.Checkpoint.String(), "ranks": fmt.Sprint(ranks)}
	if f.Accum > 1 { // named only then, as checkpoints before -accum never named it
		c["accum"] = fmt.Sprint(f.Accum)
	}
	maps.Copy(c, extra)
	return c
}

// Info describes program prog's run for the -metrics file's first line.
func Info(prog string, f *cli.Flags) profile.RunInfo {
	return profile.RunInfo{Label: Label(f.AMP, f.Checkpoint), Program: prog, Model: f.Model, AMP: f.AMP.String(),
		Checkpoint: f.Checkpoint.String(), Batch: f.Batch, Seed: f.Seed}
}

// EvalOnly is -eval: it loads the weights at path into net and reports
// their accuracy on test (evaluated in batches of batch), with -json in a
// summary of what evaluating measured (EvalSummary); data names the data.
func (e *Env) EvalOnly(f *cli.Flags, path string, net nn.Module, test *datasets.Dataset, batch int, data string) error {
	if err := LoadEval(path, net); err != nil {
		return err
	}
	s := EvalSummary(e.Dev, net, test, batch, f.AMP.On(), f.AMP.DType())
	e.Log("%s: %s from %s: test accuracy %.2f%%", data, f.Model, path, 100*s.TestAccuracy)
	if !e.JSON {
		return nil
	}
	s.Model, s.Data, s.Device, s.AMP, s.Checkpoint, s.Seed, s.Optimizer = f.Model, data, e.Dev.Name(), f.AMP.String(), f.Checkpoint.String(), f.Seed, f.Optimizer
	return cli.PrintJSON(e.Stdout, s)
}
