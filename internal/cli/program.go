package cli

import (
	"flag"
	"io"

	"github.com/mixprec/mixprec/nn/models"
)

// TrainFlags are every option of a program that trains a classifier
// (examples/mnist, examples/cifar): the common flags, the ones that make a
// run outlive its process, -dist and the profile's. A program adds its own
// beside them.
type TrainFlags struct {
	Flags
	State   StateFlags
	Dist    DistFlags
	Profile ProfileFlags
}

// Register defines them all on fs; the arguments are Flags.Register's.
func (t *TrainFlags) Register(fs *flag.FlagSet, specs []models.Spec, optims []string, autoText string) {
	t.Flags.Register(fs, specs, optims, autoText)
	t.State.Register(fs)
	t.Dist.Register(fs)
	t.Profile.Register(fs)
}

// Parse parses args into fs (Parse: -h prints help), refuses combinations
// that cannot work (StateFlags.Check, which also probes -save's directory,
// ProfileFlags.Check, -eval with any profiling or with -mem-budget, and
// -mem-budget beside -checkpoint: MemBudget.Check), and fills what the
// command line left out from the chosen model's recipe (Flags.Resolve),
// whose spec it returns. Every error is one line; a bad command line is a
// UsageError.
func (t *TrainFlags) Parse(fs *flag.FlagSet, args []string, stdout io.Writer) (models.Spec, error) {
	if err := Parse(fs, args, stdout); err != nil {
		return models.Spec{}, err
	}
	if err := t.State.Check(); err != nil {
		return models.Spec{}, err
	}
	if err := t.Profile.Check(); err != nil {
		return models.Spec{}, err
	}
	if t.State.Eval != "" && t.Profile.Any() {
		return models.Spec{}, Usagef("-eval only evaluates: -profile, -trace, -metrics and -tensorboard are about training")
	}
	if t.State.Eval != "" && t.MemBudget.On() {
		return models.Spec{}, Usagef("-eval trains nothing: -mem-budget plans training steps")
	}
	if err := t.MemBudget.Check(t.Checkpoint); err != nil {
		return models.Spec{}, err
	}
	spec := t.Resolve(fs)
	if t.Accum > t.Batch {
		return models.Spec{}, Usagef("-accum %d splits -batch %d into parts of no sample: want -accum at most -batch", t.Accum, t.Batch)
	}
	return spec, nil
}
