package train

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/runstate"
)

// Saver carries a training program's -save, -save-every, -resume and
// -overwrite: it owns -save's directory while the run lives, restores a
// run, saves checkpoints on schedule, and turns the first SIGINT, SIGTERM
// or SIGHUP into a checkpoint and a clean stop between steps (see
// cli.Signals: a second signal before the step ends ends the process at
// once; one during the save waits for it).
type Saver struct {
	prog    string
	stderr  io.Writer
	flags   cli.StateFlags
	run     runstate.Run
	lock    *runstate.DirLock
	signals *cli.Signals
	last    int // step of the newest checkpoint written, -1 for none
	// comm, under -dist, makes every rank stop at the same step (Together);
	// dev is the device its buffers live on.
	comm device.Comm
	dev  device.Device
	// exchanged says StepLoss has learnt, in any, the signal the next
	// AfterStep stops on.
	exchanged bool
	any       os.Signal
}

// Together makes the ranks of comm (nil: none, one process) stop together:
// at every step boundary they learn whether any of them has received a
// signal, every rank stops after that same step on that signal, and none
// returns before rank 0's checkpoint is written. A signal reaches the
// ranks at different moments, and a rank that stopped alone left the
// others in a collective it never joined (MPI_ERR_TRUNCATE, and exit 1
// instead of the signal's status); and mpirun ends the job when one rank
// exits, which could cut rank 0's checkpoint short. It costs a collective
// of four numbers a step, shared with StepLoss.
func (s *Saver) Together(comm device.Comm, dev device.Device) { s.comm, s.dev = comm, dev }

// received is the signal this rank stops on: its own first signal, or,
// under Together, when it has none, the first of cli.StopSignals that any
// rank has received; StepLoss's exchange, when it came since the last
// AfterStep, instead of a collective of its own.
func (s *Saver) received() (os.Signal, error) {
	if s.exchanged {
		s.exchanged = false
		return s.any, nil
	}
	_, sig, err := s.exchange(0)
	return sig, err
}

// StepLoss is, under Together, the mean of every rank's step loss l: what
// a run prints, and what each rank judges divergence by, so that a loss
// that is not finite on one rank stops every rank at the same step rather
// than leaving the others in the next step's collective. The same
// collective tells whether any rank has a signal, for the AfterStep that
// follows. Without Together it returns l.
func (s *Saver) StepLoss(l float64) (float64, error) {
	if s.comm == nil {
		return l, nil
	}
	mean, sig, err := s.exchange(l)
	s.any, s.exchanged = sig, err == nil
	return mean, err
}

// exchange sums, over the ranks, the loss l and which of cli.StopSignals
// each has received, in one collective; it returns the ranks' mean loss
// and this rank's signal or, when it has none, the first any rank has.
func (s *Saver) exchange(l float64) (float64, os.Signal, error) {
	sig := s.signals.Received()
	if s.comm == nil {
		return l, sig, nil
	}
	v := make([]float32, 1+len(cli.StopSignals))
	v[0] = float32(l)
	for i, stop := range cli.StopSignals {
		if sig == stop {
			v[1+i] = 1
		}
	}
	if err := distributed.AllReduceHost(s.comm, s.dev, v, device.Sum); err != nil {
		return 0, nil, err
	}
	for i, n := range v[1:] {
		if n > 0 && sig == nil {
			sig = cli.StopSignals[i]
		}
	}
	return float64(v[0]) / float64(s.comm.Size()), sig, nil
}

// together waits, under Together, for every rank to reach it.
func (s *Saver) together() error {
	if s.comm == nil {
		return nil
	}
	return s.comm.Barrier()
}

// NewSaver takes -save's directory for this run (runstate.Lock: a second
// run into it is refused, naming the process that has it), cleans up
// after a save that did not finish there (runstate.Clean), and refuses a
// directory that holds another run's checkpoints or final weights unless
// they are the run -resume continues or -overwrite says to delete them. It
// then starts watching for SIGINT, SIGTERM and SIGHUP; Close stops it and
// releases the directory. The program prog reports on stderr what the saver does
// on its own (what it cleaned or deleted, a checkpoint passed over on
// resuming).
func NewSaver(prog string, flags cli.StateFlags, run runstate.Run, stderr io.Writer) (*Saver, error) {
	s := &Saver{prog: prog, stderr: stderr, flags: flags, run: run, last: -1}
	s.run.ID = runstate.NewID() // a resumed run takes its checkpoint's instead
	if flags.Save != "" {
		lock, err := runstate.Lock(flags.Save)
		if err != nil {
			return nil, fmt.Errorf("-save: %w", err)
		}
		s.lock = lock
		if err := s.claim(); err != nil {
			lock.Unlock()
			return nil, err
		}
	}
	s.signals = cli.NotifySignals(prog, stderr)
	return s, nil
}

// claim makes -save's directory this run's, once it is locked.
func (s *Saver) claim() error {
	dir := s.flags.Save
	// What a save killed half-way left: removed, or (a checkpoint moved
	// aside to be replaced) put back.
	done, err := runstate.Clean(dir)
	for _, d := range done {
		fmt.Fprintf(s.stderr, "%s: %s, left by a save that did not finish\n", s.prog, d)
	}
	if err != nil {
		return err
	}
	c, err := runstate.Inspect(dir)
	if err != nil || c.Empty() {
		return err
	}
	if s.flags.Resume != "" {
		if sameDir(s.flags.Resume, dir) {
			return nil // the run continues where it is
		}
		if rc, err := runstate.Inspect(s.flags.Resume); err == nil && rc.Newest.Dir != "" && rc.Newest.ID == c.Newest.ID && len(c.Steps) > 0 {
			return nil // the same run, continued into a copy of its directory
		}
	}
	if s.flags.Overwrite {
		removed, err := runstate.Remove(dir, c)
		if len(removed) > 0 {
			fmt.Fprintf(s.stderr, "%s: -overwrite: deleted the earlier run's %s\n", s.prog, describe(c))
		}
		return err
	}
	what := "another run's " + describe(c)
	if c.Newest.Dir != "" {
		if diff := runstate.ConfigDiff(c.Newest.Config, s.run.Config); diff != "" {
			what += " (" + diff + ")"
		} else {
			what = "an earlier run's " + describe(c) + " with the same settings"
		}
	}
	return fmt.Errorf("-save %s holds %s; continue that run with -resume %s, save elsewhere, or pass -overwrite to delete it", dir, what, dir)
}

// describe lists the run files c holds.
func describe(c runstate.Contents) string {
	var parts []string
	switch n := len(c.Steps); {
	case n == 1:
		parts = append(parts, fmt.Sprintf("checkpoint of step %d", c.Steps[0]))
	case n > 1:
		parts = append(parts, fmt.Sprintf("%d checkpoints (steps %d to %d)", n, c.Steps[0], c.Steps[n-1]))
	}
	if c.Weights {
		parts = append(parts, "model.safetensors")
	}
	return strings.Join(parts, " and ")
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// Close stops watching for signals and releases -save's directory.
func (s *Saver) Close() {
	s.signals.Stop()
	if err := s.lock.Unlock(); err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", s.prog, err)
	}
	s.lock = nil
}

// Resume restores the run from the newest checkpoint in -resume's
// directory that loads and returns where to continue; with no -resume it
// returns the start. A newer checkpoint that is corrupt is passed over,
// and the program says so on standard error, naming it, why, and the one
// it resumes from (runstate.LoadNewest).
func (s *Saver) Resume() (runstate.Position, error) {
	if s.flags.Resume == "" {
		return runstate.Position{}, nil
	}
	dir, pos, passed, err := runstate.LoadNewest(s.flags.Resume, s.run)
	if err != nil {
		return runstate.Position{}, err
	}
	for _, p := range passed {
		fmt.Fprintf(s.stderr, "%s: passing over the checkpoint %s: %s\n", s.prog, p.Dir, oneLine(p.Err))
	}
	if len(passed) > 0 {
		fmt.Fprintf(s.stderr, "%s: resuming from the newest intact checkpoint, %s (step %d)\n", s.prog, dir, pos.Step)
	}
	info, err := runstate.ReadInfo(dir)
	if err != nil {
		return runstate.Position{}, err
	}
	s.run.ID = info.ID // the checkpoints to come are the same run's
	if !sameDir(s.flags.Resume, s.flags.Save) {
		s.last = -1 // nothing of this step is in -save's directory yet
	} else {
		s.last = pos.Step
	}
	return pos, nil
}

// Resumed says where a run starts, for ranks to compare: "the start", or
// the step it resumed from.
func Resumed(flags cli.StateFlags, pos runstate.Position) string {
	if flags.Resume == "" {
		return "the start"
	}
	return fmt.Sprintf("step %d (epoch %d, batch %d)", pos.Step, pos.Epoch, pos.Batch)
}

// oneLine is err's message on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "runstate: ")), " ")
}

// keep is how many checkpoints a run leaves: the newest, and the one before
// in case the newest is what the user wanted to roll back from.
const keep = 2

// AfterStep saves a checkpoint when -save-every says so, and after a
// signal saves one (when there is a -save directory) and returns an
// *cli.Interrupted, on which the program stops: it ends its loops, skips
// what is left (evaluation, the final weights), writes its -metrics,
// -trace and TensorBoard files and its summary marked interrupted, and
// returns the Interrupted, whose exit status is the signal's.
func (s *Saver) AfterStep(pos runstate.Position) error {
	sig, err := s.received()
	if err != nil {
		return err
	}
	if sig != nil {
		err := s.stop(sig, pos)
		if berr := s.together(); berr != nil { // every rank waits for rank 0's checkpoint
			return fmt.Errorf("%v after step %d: %w", sig, pos.Step, berr)
		}
		return err
	}
	if s.flags.Save != "" && s.flags.SaveEvery > 0 && pos.Step%s.flags.SaveEvery == 0 {
		if _, err := s.save(pos); err != nil {
			return err
		}
	}
	return nil
}

// stop saves the checkpoint of pos after signal sig when there is a -save
// directory, and returns the *cli.Interrupted the run stops on.
func (s *Saver) stop(sig os.Signal, pos runstate.Position) error {
	if s.flags.Save == "" {
		return &cli.Interrupted{Signal: sig, Step: pos.Step}
	}
	fmt.Fprintf(s.stderr, "%s: %v after step %d: saving a checkpoint in %s, then stopping\n", s.prog, sig, pos.Step, s.flags.Save)
	dir, err := s.save(pos)
	if err != nil {
		return fmt.Errorf("%v after step %d, and saving failed: %w", sig, pos.Step, err)
	}
	return &cli.Interrupted{Signal: sig, Step: pos.Step, Saved: dir}
}

// save writes the checkpoint of pos, with signals held off until it is
// whole.
func (s *Saver) save(pos runstate.Position) (string, error) {
	if pos.Step == s.last {
		return runstate.Dir(s.flags.Save, pos.Step), nil
	}
	defer s.signals.Hold(fmt.Sprintf("the checkpoint of step %d", pos.Step))()
	dir, err := runstate.Save(s.flags.Save, s.run, pos, keep)
	if err != nil {
		return "", err
	}
	s.last = pos.Step
	return dir, nil
}

// Finish writes the final weights to -save's model.safetensors, with
// metadata (the run's configuration), and the run's final state beside
// them; without -save it does nothing.
func (s *Saver) Finish(pos runstate.Position) error {
	if s.flags.Save == "" {
		return nil
	}
	if _, err := s.save(pos); err != nil {
		return err
	}
	path := filepath.Join(s.flags.Save, "model.safetensors")
	defer s.signals.Hold(path)()
	if err := nn.SaveWeights(path, s.run.Model, s.run.Config); err != nil {
		return err
	}
	return nil
}

// LoadEval loads -eval's weights into m.
func LoadEval(path string, m nn.Module) error {
	if _, err := nn.LoadWeights(path, m); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("-eval %s: no such file", path)
		}
		return err
	}
	return nil
}

// Entries lists m's parameters and buffers for distributed.New.
func Entries(m nn.Module) []distributed.Entry {
	var out []distributed.Entry
	for _, e := range nn.State(m) {
		out = append(out, distributed.Entry{Name: e.Name, Var: e.Var})
	}
	return out
}
