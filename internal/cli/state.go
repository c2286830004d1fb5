package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/mixprec/mixprec/atomicfile"
)

// ExitInterrupted is the status after SIGINT (128 + SIGINT's number, as
// shells report it): the run stopped early, on purpose, after saving its
// state when -save said where. SIGTERM and SIGHUP give their own
// (SignalStatus).
const ExitInterrupted = 130

// Interrupted reports a run stopped by a signal.
type Interrupted struct {
	Signal os.Signal
	Step   int    // steps done
	Saved  string // the checkpoint written, or "" with no -save
}

func (e *Interrupted) Error() string {
	if e.Saved == "" {
		return fmt.Sprintf("%v after step %d; no -save directory, so nothing was saved", e.Signal, e.Step)
	}
	return fmt.Sprintf("%v after step %d; saved %s (continue with -resume)", e.Signal, e.Step, e.Saved)
}

// StateFlags are the options that make a run outlive its process.
type StateFlags struct {
	Save      string // directory: final weights (model.safetensors) and run checkpoints
	SaveEvery int    // steps between checkpoints; 0: only at the end and on a signal
	Resume    string // directory to continue from (its newest checkpoint)
	Eval      string // safetensors weights to evaluate instead of training
	// Overwrite lets -save replace another run's checkpoints and weights.
	Overwrite bool
}

// Register defines -save, -save-every, -resume, -eval and -overwrite on fs.
func (s *StateFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&s.Save, "save", "", "save the final weights to `DIR`/model.safetensors and the run's state beside them\n(also every -save-every steps, and on SIGINT or SIGTERM)")
	fs.Var(&IntValue{p: &s.SaveEvery, min: 0}, "save-every", "save the run's state every n steps (0: at the end and on a signal only)")
	fs.StringVar(&s.Resume, "resume", "", "continue from the newest checkpoint in `DIR`, with the same flags otherwise\n(-save defaults to DIR)")
	fs.StringVar(&s.Eval, "eval", "", "load weights from a safetensors `FILE` and only evaluate them")
	fs.BoolVar(&s.Overwrite, "overwrite", false, "let -save use a directory that holds another run's checkpoints or weights:\n"+
		"they are deleted when this run starts (without it, such a directory is refused)")
}

// Check refuses combinations that cannot work, makes -save default to
// -resume's directory, and checks that -save's directory can be written
// (ProbeDir), so that a run that could not save its work stops before it
// does any, not after.
func (s *StateFlags) Check() error {
	switch {
	case s.Eval != "" && (s.Save != "" || s.Resume != "" || s.SaveEvery != 0 || s.Overwrite):
		return Usagef("-eval only evaluates: it takes none of -save, -save-every, -resume and -overwrite")
	case s.Overwrite && s.Save == "":
		return Usagef("-overwrite needs -save DIR, the directory whose earlier run it replaces")
	case s.SaveEvery > 0 && s.Save == "" && s.Resume == "":
		return Usagef("-save-every %d needs -save DIR (or -resume DIR) to save into", s.SaveEvery)
	}
	if s.Save == "" {
		s.Save = s.Resume
	}
	if s.Save != "" {
		if err := ProbeDir(s.Save); err != nil {
			return Usagef("-save %s: %v", s.Save, err)
		}
	}
	return nil
}

// ProbeDir makes dir (and its parents) if missing and checks that a file
// can be created, written and synced in it and removed again, as a
// checkpoint will be: a directory that is not one, is not writable, is on
// a read-only or full file system fails here, with the system's reason.
func ProbeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make the directory: %w", unwrapPath(err))
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("cannot create a file there: %w", unwrapPath(err))
	}
	defer os.Remove(f.Name())
	_, err = f.Write([]byte("mixprec checks that checkpoints can be written here\n"))
	if err == nil {
		err = f.Sync()
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("cannot write a file there: %w", unwrapPath(err))
	}
	if err := os.Remove(f.Name()); err != nil {
		return fmt.Errorf("cannot remove a file there: %w", unwrapPath(err))
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("cannot sync the directory: %w", unwrapPath(err))
	}
	return nil
}

// unwrapPath drops the path a *PathError repeats, which the message names
// already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
