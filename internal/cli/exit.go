package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/mixprec/mixprec/device"
)

// The exit statuses of every program here.
const (
	ExitOK       = 0 // done, or help was asked for
	ExitError    = 1 // the run failed: data, device, files
	ExitUsage    = 2 // a bad command line, as package flag's own
	ExitDiverged = 3 // the loss became NaN or infinite; the summary was printed
)

// UsageError is a bad command line: an unknown flag, a value out of range, a
// stray argument. Programs exit with ExitUsage on it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef makes a UsageError for a problem found after parsing, such as a
// combination of flags that cannot work.
func Usagef(format string, a ...any) error {
	return &UsageError{fmt.Errorf(format, a...)}
}

// Diverged reports a training run stopped because its loss became NaN or
// infinite. Programs print their summary first, then exit with
// ExitDiverged on it.
type Diverged struct {
	Step  int     // 1-based training step whose loss was not finite
	Epoch int     // 1-based
	Loss  float64 // the loss: NaN or ±Inf
}

func (e *Diverged) Error() string {
	return fmt.Sprintf("loss became non-finite (%v) at step %d (epoch %d); stopped", e.Loss, e.Step, e.Epoch)
}

// Quiet is an error that another process of the same job reports: a
// mismatch that every rank of a data-parallel job finds alike, which rank
// 0 alone says, so that the terminal shows it once. Exit returns its
// status without writing it.
type Quiet struct{ Err error }

func (e *Quiet) Error() string { return e.Err.Error() }
func (e *Quiet) Unwrap() error { return e.Err }

// Exit writes err, if any, to stderr as one line prefixed with prog and
// returns the exit status for it: ExitOK for nil and for flag.ErrHelp (help
// was asked for and printed), ExitUsage for a UsageError, ExitDiverged for
// Diverged, ExitOverBudget for OverBudget, the signal's status for Interrupted (SignalStatus: 130 for
// SIGINT, 143 for SIGTERM, 129 for SIGHUP), ExitError otherwise.
func Exit(stderr io.Writer, prog string, err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	// One line, whatever the error carries: scripts read the last line.
	msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
	if q := (*Quiet)(nil); !errors.As(err, &q) {
		fmt.Fprintf(stderr, "%s: %s\n", prog, msg)
	}
	var usage *UsageError
	var diverged *Diverged
	var interrupted *Interrupted
	var over *OverBudget
	switch {
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, &diverged):
		return ExitDiverged
	case errors.As(err, &over):
		return ExitOverBudget
	case errors.As(err, &interrupted):
		return SignalStatus(interrupted.Signal)
	}
	return ExitError
}

// Catch runs run and returns its error. A device that runs out of memory
// panics with a *device.OutOfMemoryError (Alloc has no error to return);
// Catch turns that into an error for Exit, which says what to try: the
// run's memory is lost, and the line is what a user needs. Any other panic
// goes on, as the bug it is.
func Catch(run func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			oom, ok := r.(*device.OutOfMemoryError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w; -mem-budget plans the recomputation that fits the memory you give it, and a smaller -batch needs less", oom)
		}
	}()
	return run()
}

// NewFlagSet returns a flag set for the program or command name (as typed:
// "mixprec bench matmul") whose help is a usage line, about, and the flags.
// Parse it with Parse.
func NewFlagSet(name, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: %s [flags]\n\n%s\n\nflags:\n", name, about)
		PrintFlags(w, fs)
	}
	return fs
}

// Parse parses args into fs. For -h or -help it prints help to stdout and
// returns flag.ErrHelp (Exit maps it to ExitOK); any other problem, a
// positional argument included, is a *UsageError of one line, without the
// flag list that package flag would print after it.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return flag.ErrHelp
	case err != nil:
		return &UsageError{err}
	case fs.NArg() > 0:
		return Usagef("unexpected argument %q (every option is a flag; -h lists them)", fs.Arg(0))
	}
	return nil
}

// PrintFlags writes fs's flags to w as flag.PrintDefaults does, but with
// each value's own argument name (its choices, for a Choice) and the models'
// defaults where they depend on the model.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if a := argName(f.Value); a != "" {
			arg = a
		}
		line := "  -" + f.Name
		if arg != "" {
			line += " " + arg
		}
		def := f.DefValue
		if d, ok := f.Value.(interface{ DefaultText() string }); ok {
			def = d.DefaultText()
		}
		if def != "" && def != "false" {
			usage += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

// argName is a flag value's Arg(), or "" when it has none.
func argName(v flag.Value) string {
	if a, ok := v.(interface{ Arg() string }); ok {
		return a.Arg()
	}
	return ""
}
