package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mixprec/mixprec/profile"
)

// ProfileFlags are the options that show where a run's time and memory
// go: -profile, -trace FILE and -metrics FILE.
type ProfileFlags struct {
	Profile bool   // a table of where each step's time went, on standard error at the end
	Trace   string // a Chrome trace of the first steps
	Metrics string // one JSON line per step and per evaluation
	// TensorBoard is a directory for TensorBoard event files (made if
	// missing): the metrics as scalars.
	TensorBoard string
}

// Register defines -profile, -trace and -metrics on fs.
func (p *ProfileFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&p.Profile, "profile", false, "time every op by phase, the optimiser, the data wait and the host's overhead;\n"+
		"print a table and a three-line summary on standard error at the end\n(with -json, the summary gains a \"profile\" object)")
	fs.Var(&outputFile{&p.Trace}, "trace", fmt.Sprintf("write a Chrome trace of the first %d steps to `FILE`, for ui.perfetto.dev or chrome://tracing", profile.DefaultTraceSteps))
	fs.Var(&outputFile{&p.Metrics}, "metrics", "write one JSON line per training step and per evaluation to `FILE` (mixprec plot draws them)")
	fs.Var(&outputDir{&p.TensorBoard}, "tensorboard", "write the metrics as TensorBoard scalars into an event file in `DIR` (made if missing;\nopen it with tensorboard --logdir)")
}

// outputDir is a flag naming a directory the program will write into,
// which it makes, with its parents, if missing.
type outputDir struct{ p *string }

func (v *outputDir) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *outputDir) Set(s string) error {
	if s == "" {
		return errors.New("want a directory name")
	}
	if fi, err := os.Stat(s); err == nil && !fi.IsDir() {
		return fmt.Errorf("%s is a file; want a directory", s)
	}
	// Made with its parents, as TensorBoard users nest runs (runs/f16):
	// the nearest that exists must be a directory.
	for p := filepath.Dir(filepath.Clean(s)); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is a file, so %s cannot be made", p, s)
			}
			break
		}
		if p == filepath.Dir(p) {
			break
		}
	}
	*v.p = s
	return nil
}

// Arg names the flag's value in help.
func (*outputDir) Arg() string { return "DIR" }

// On reports whether the run needs a profiler: for the table or the trace.
func (p ProfileFlags) On() bool { return p.Profile || p.Trace != "" }

// Any reports whether any of the flags asks for something.
func (p ProfileFlags) Any() bool { return p.On() || p.Metrics != "" || p.TensorBoard != "" }

// Check refuses one file for both outputs.
func (p ProfileFlags) Check() error {
	if p.Trace != "" && p.Metrics != "" {
		a, _ := filepath.Abs(p.Trace)
		b, _ := filepath.Abs(p.Metrics)
		if a == b {
			return Usagef("-trace and -metrics name the same file %s", p.Trace)
		}
	}
	return nil
}

// NewOutputFile returns a flag value that sets *p to a file the program
// will write, refusing at parse time a path whose directory does not
// exist or that names a directory.
func NewOutputFile(p *string) flag.Value { return &outputFile{p} }

// outputFile is a flag naming a file the program will write: a path whose
// directory exists and which is not itself a directory. The file is only
// written at the end (through a temporary file renamed over it), so a run
// that fails leaves an existing file as it was.
type outputFile struct{ p *string }

func (v *outputFile) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return *v.p
}

func (v *outputFile) Set(s string) error {
	if s == "" {
		return errors.New("want a file name")
	}
	if fi, err := os.Stat(s); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory; want a file", s)
	}
	dir := filepath.Dir(s)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("no directory %s to write it in", dir)
	}
	*v.p = s
	return nil
}

// Arg names the flag's value in help.
func (*outputFile) Arg() string { return "FILE" }

// ProfiledSummary is the JSON summary with the profile a -profile run
// adds, as "profile": {"summary": {...}, "ops": [...]}.
type ProfiledSummary struct {
	Summary
	Profile *profile.Report `json:"profile,omitempty"`
}
