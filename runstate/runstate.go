// Package runstate saves and restores a whole training run, so that a run
// stopped at any step (a crash, a signal, a pre-empted machine) continues
// exactly as if it had not stopped: the weights (F32 masters and buffers),
// the optimiser's state, the GradScaler's state, every module's random
// stream, the position in the data and the LR schedule (both as the step
// count and the position in the epoch), the running loss sums, and the
// run's configuration.
//
// A checkpoint is a directory DIR/step-NNNNNNNN holding model.safetensors
// (PyTorch's state_dict names, loadable by PyTorch), optim.safetensors and
// state.json. It is written under a temporary name, every file is synced,
// and only then is the directory renamed into place and its parent synced,
// so a crash at any instant leaves the previous checkpoint as it was and no
// partial one under a checkpoint's name. state.json records each file's
// SHA-256, verified on load, so a truncated file or a flipped bit is one
// clear error.
//
// state.json guards itself the same way: its last member, state_sha256, is
// the SHA-256 of every byte of the file before the comma that precedes it,
// so that no byte of it can change unseen. It is then decoded strictly
// (unknown fields, a key given twice, null, a value of the wrong type and
// a missing field are refused), and the position it holds is checked
// against the run's Extent before anything is restored: a checkpoint that
// would send a run to epoch -5 or to batch 10^9 is an error, not a panic
// later. Every file is its owner's alone (0600).
//
// Around the checkpoints, a run's directory is the run's own: Lock holds it
// for one process at a time (a second run into it is refused, naming the
// first); Clean removes what a save killed half-way left; Inspect says
// whose checkpoints and weights a directory holds, for a program to refuse
// another run's; each checkpoint records its run's ID, and Save prunes
// only that run's; LoadNewest resumes from the newest checkpoint that
// loads, passing over corrupt ones and saying why.
package runstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/atomicfile"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/safetensors"
)

// Run is what a training program's state is made of. Scaler may be nil
// (FP32 and BF16 runs that have none). Config holds the settings a resumed
// run must share with the saved one (model, amp mode, batch size, seed,
// ...): Load refuses a checkpoint whose Config differs, naming the first
// difference.
type Run struct {
	Model     nn.Module
	Optimizer optim.Stateful
	Scaler    *amp.GradScaler
	Config    map[string]string
	// Extent is how far the run goes through its data, against which Load
	// checks a checkpoint's position.
	Extent Extent
	// ID is the run's identity (NewID), recorded in each checkpoint:
	// Save prunes only checkpoints of the same ID, and a run resumed takes
	// its checkpoint's (Info).
	ID string
}

// Extent is how much data a run goes through. Each field that is positive
// bounds a loaded Position: its Epoch must be below Epochs, its Batch at
// most PerEpoch and its Step at most Steps, and, with PerEpoch, its Step at
// most the batches its epoch and batch index account for (each step takes
// one batch). Zero leaves a bound unchecked, for runs that do not count in
// epochs.
type Extent struct {
	Epochs   int // epochs the run trains
	PerEpoch int // batches in an epoch (of this rank's shard)
	Steps    int // training steps in all
}

// Position is where the run is: Step training steps done in all, in Epoch
// (0-based) with Batch batches of it done, and whatever running sums the
// program reports (the loss sum and count of the current epoch, say).
type Position struct {
	Step   int                `json:"step"`
	Epoch  int                `json:"epoch"`
	Batch  int                `json:"batch"`
	Sums   map[string]float64 `json:"sums,omitempty"`
	Counts map[string]int     `json:"counts,omitempty"`
}

// state is state.json.
type state struct {
	Format   string               `json:"format"`
	Run      string               `json:"run"` // Run.ID
	Config   map[string]string    `json:"config"`
	Position Position             `json:"position"`
	Scaler   *amp.State           `json:"scaler,omitempty"`
	RNGs     map[string][2]uint64 `json:"rngs,omitempty"` // seed, counter
	Files    map[string]string    `json:"sha256"`         // file name -> hex digest
	// state_sha256, the sum of the bytes above, follows: see seal.
}

// format names state.json's layout. mixprec-run-1 had no checksum of its
// own and is refused: its position could not be trusted.
const format = "mixprec-run-2"

// Dir is the name of the checkpoint of step within root.
func Dir(root string, step int) string {
	return filepath.Join(root, fmt.Sprintf("step-%08d", step))
}

// Save writes a checkpoint of r at pos into root (created if needed) and
// returns its directory. An existing checkpoint of the same step is
// replaced only once the new one is complete. Older checkpoints of the
// same run (r.ID) beyond the newest keep are removed after the new one is
// in place (keep < 1 keeps all); no other run's checkpoint is removed.
func Save(root string, r Run, pos Position, keep int) (string, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	tmp, err := os.MkdirTemp(root, ".tmp-step-")
	if err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	st := state{Format: format, Run: r.ID, Config: r.Config, Position: pos, Files: map[string]string{}, RNGs: map[string][2]uint64{}}
	if r.Scaler != nil {
		s := r.Scaler.State()
		st.Scaler = &s
	}
	for _, n := range nn.RNGs(r.Model) {
		st.RNGs[n.Name] = [2]uint64{n.RNG.Seed, n.RNG.Counter}
	}
	if err := safetensors.WriteFile(filepath.Join(tmp, "model.safetensors"), nn.Weights(r.Model), r.Config); err != nil {
		return "", fmt.Errorf("runstate: saving the weights: %w", err)
	}
	ots, ometa := r.Optimizer.StateDict()
	if err := safetensors.WriteFile(filepath.Join(tmp, "optim.safetensors"), ots, ometa); err != nil {
		return "", fmt.Errorf("runstate: saving the optimiser: %w", err)
	}
	for _, name := range []string{"model.safetensors", "optim.safetensors"} {
		sum, err := atomicfile.SHA256(filepath.Join(tmp, name))
		if err != nil {
			return "", fmt.Errorf("runstate: %w", err)
		}
		st.Files[name] = sum
	}
	js, err := seal(st)
	if err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	// The last file of the checkpoint: written whole and synced, with the
	// directory, before the directory takes its name.
	if err := atomicfile.WriteFile(filepath.Join(tmp, "state.json"), js, 0o600); err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	final := Dir(root, pos.Step)
	if _, err := os.Stat(final); err == nil {
		// Same step saved twice (a signal right after a periodic save): move
		// the old one aside first, since a directory cannot be renamed over
		// a non-empty one.
		old := final + ".old"
		os.RemoveAll(old)
		if err := os.Rename(final, old); err != nil {
			return "", fmt.Errorf("runstate: %w", err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	done = true
	if err := atomicfile.SyncDir(root); err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	if keep > 0 {
		// Only this run's: a checkpoint of another, or one whose state
		// cannot be read, is not this run's to delete.
		steps, _ := list(root)
		var mine []int
		for _, step := range steps {
			if info, err := ReadInfo(Dir(root, step)); err == nil && info.ID == r.ID {
				mine = append(mine, step)
			}
		}
		for i := 0; i+keep < len(mine); i++ {
			os.RemoveAll(Dir(root, mine[i]))
		}
	}
	return final, nil
}

// Info is what a checkpoint's state.json says of the run that made it.
type Info struct {
	Dir      string
	ID       string
	Config   map[string]string
	Position Position
}

// ReadInfo reads and verifies the state.json of the checkpoint in dir
// (its checksum, strictly decoded) without loading anything.
func ReadInfo(dir string) (Info, error) {
	st, err := readState(dir)
	if err != nil {
		return Info{}, err
	}
	return Info{Dir: dir, ID: st.Run, Config: st.Config, Position: st.Position}, nil
}

// readState reads and verifies the state.json of the checkpoint in dir.
func readState(dir string) (state, error) {
	js, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return state{}, fmt.Errorf("runstate: %w", err)
	}
	st, err := unseal(js)
	if err != nil {
		return state{}, fmt.Errorf("runstate: %s: %w", filepath.Join(dir, "state.json"), err)
	}
	return st, nil
}

// Contents is what run files a directory holds.
type Contents struct {
	Steps   []int // its checkpoints, oldest first
	Weights bool  // it holds model.safetensors
	// Newest is the newest checkpoint whose state.json reads; its Dir is
	// "" when none does.
	Newest Info
}

// Empty reports whether the directory holds no run's files.
func (c Contents) Empty() bool { return len(c.Steps) == 0 && !c.Weights }

// Inspect lists the run files in root: checkpoints, final weights, and
// which run made the newest checkpoint that reads. A missing root is
// empty.
func Inspect(root string) (Contents, error) {
	var c Contents
	steps, err := list(root)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("runstate: %w", err)
	}
	c.Steps = steps
	if _, err := os.Lstat(filepath.Join(root, "model.safetensors")); err == nil {
		c.Weights = true
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if info, err := ReadInfo(Dir(root, steps[i])); err == nil {
			c.Newest = info
			break
		}
	}
	return c, nil
}

// Remove deletes the run files Inspect lists in root (its checkpoints and
// model.safetensors) and returns what it removed; anything else in root
// stays.
func Remove(root string, c Contents) ([]string, error) {
	var done []string
	for _, step := range c.Steps {
		if err := os.RemoveAll(Dir(root, step)); err != nil {
			return done, fmt.Errorf("runstate: %w", err)
		}
		done = append(done, Dir(root, step))
	}
	if c.Weights {
		p := filepath.Join(root, "model.safetensors")
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return done, fmt.Errorf("runstate: %w", err)
		}
		done = append(done, p)
	}
	return done, atomicfile.SyncDir(root)
}

// Clean removes what a save that did not finish left in root (a process
// killed in the middle of Save or of safetensors.WriteFile) and returns
// what it removed or restored: temporary checkpoint directories
// (.tmp-step-*), temporary weights files (.model.safetensors.*.tmp), and a
// checkpoint moved aside to be replaced (step-N.old), which is removed when
// step-N is in place and otherwise renamed back to step-N, since then it
// is the only copy. Call it only on a directory this process owns (Lock):
// another run's save in progress looks the same.
func Clean(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runstate: %w", err)
	}
	var done []string
	for _, e := range entries {
		name, p := e.Name(), filepath.Join(root, e.Name())
		switch {
		case strings.HasPrefix(name, ".tmp-step-") && e.IsDir(), isSaveTemp(name) && e.Type().IsRegular():
			if err := os.RemoveAll(p); err != nil {
				return done, fmt.Errorf("runstate: %w", err)
			}
			done = append(done, "removed "+p)
		case strings.HasSuffix(name, ".old") && e.IsDir() && isStep(strings.TrimSuffix(name, ".old")):
			final := strings.TrimSuffix(p, ".old")
			if _, err := os.Stat(final); err == nil {
				if err := os.RemoveAll(p); err != nil {
					return done, fmt.Errorf("runstate: %w", err)
				}
				done = append(done, "removed "+p)
				continue
			}
			if err := os.Rename(p, final); err != nil {
				return done, fmt.Errorf("runstate: %w", err)
			}
			done = append(done, "restored "+final+" from "+name)
		}
	}
	if len(done) > 0 {
		if err := atomicfile.SyncDir(root); err != nil {
			return done, fmt.Errorf("runstate: %w", err)
		}
	}
	return done, nil
}

// isSaveTemp reports whether name is the temporary file of the final
// weights' write (atomicfile.TempFor), which a killed save leaves in the
// run's directory.
func isSaveTemp(name string) bool {
	target, ok := atomicfile.TempFor(name)
	return ok && target == "model.safetensors"
}

// isStep reports whether name is a checkpoint's: step- and eight digits.
func isStep(name string) bool {
	rest, ok := strings.CutPrefix(name, "step-")
	if !ok || len(rest) != 8 {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}

// Latest returns the directory of the newest checkpoint in root, or an
// error wrapping fs.ErrNotExist when there is none. Half-written ones
// never carry a checkpoint's name, so the newest name is complete.
func Latest(root string) (string, error) {
	steps, err := list(root)
	if err != nil {
		return "", fmt.Errorf("runstate: %w", err)
	}
	if len(steps) == 0 {
		return "", fmt.Errorf("runstate: no checkpoint in %s: %w", root, fs.ErrNotExist)
	}
	return Dir(root, steps[len(steps)-1]), nil
}

// list returns the steps of root's checkpoints, oldest first.
func list(root string) ([]int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var steps []int
	for _, e := range entries {
		if e.IsDir() && isStep(e.Name()) {
			n, _ := strconv.Atoi(strings.TrimPrefix(e.Name(), "step-"))
			steps = append(steps, n)
		}
	}
	sort.Ints(steps)
	return steps, nil
}

// Load restores r from the checkpoint in dir and returns its position. It
// verifies state.json's SHA-256 and every file's, and refuses a checkpoint
// whose configuration differs from r.Config, naming the difference, or
// whose position lies outside r.Extent. r is changed only when everything
// checks out, except that a failure after the weights load (an optimiser
// that does not fit them, a scaler state out of range) leaves the weights
// loaded and says so. An error that says the checkpoint belongs to another
// kind of run (its configuration, its loss scaler, its random streams, its
// tensors' names and shapes differ) is a *MismatchError: another checkpoint
// of the same run would fail the same way.
func Load(dir string, r Run) (Position, error) {
	st, err := readState(dir)
	if err != nil {
		return Position{}, err
	}
	if err := st.Position.check(r.Extent); err != nil {
		return Position{}, fmt.Errorf("runstate: %s: position %w", filepath.Join(dir, "state.json"), err)
	}
	if err := sameConfig(st.Config, r.Config); err != nil {
		return Position{}, &MismatchError{err}
	}
	for _, name := range []string{"model.safetensors", "optim.safetensors"} {
		sum, err := atomicfile.SHA256(filepath.Join(dir, name))
		if err != nil {
			return Position{}, fmt.Errorf("runstate: %w", err)
		}
		if sum != st.Files[name] {
			return Position{}, fmt.Errorf("runstate: %s/%s has SHA-256 %s, the checkpoint says %s: the file is corrupt", dir, name, sum, st.Files[name])
		}
	}
	if (st.Scaler != nil) != (r.Scaler != nil) {
		return Position{}, mismatchf("runstate: the checkpoint has a loss scaler: %v, this run: %v", st.Scaler != nil, r.Scaler != nil)
	}
	rngs := nn.RNGs(r.Model)
	if len(rngs) != len(st.RNGs) {
		return Position{}, mismatchf("runstate: the checkpoint has %d random streams, the model %d", len(st.RNGs), len(rngs))
	}
	for _, n := range rngs {
		if _, ok := st.RNGs[n.Name]; !ok {
			return Position{}, mismatchf("runstate: the checkpoint has no random stream %s", n.Name)
		}
	}
	model, err := safetensors.ReadFile(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return Position{}, fmt.Errorf("runstate: %w", err)
	}
	opt, err := safetensors.ReadFile(filepath.Join(dir, "optim.safetensors"))
	if err != nil {
		return Position{}, fmt.Errorf("runstate: %w", err)
	}
	if err := nn.SetWeights(r.Model, model.Tensors); err != nil {
		return Position{}, mismatchf("runstate: %w", err)
	}
	if err := r.Optimizer.LoadStateDict(opt.Tensors, opt.Metadata); err != nil {
		return Position{}, mismatchf("runstate: the weights loaded but the optimiser state does not fit: %w", err)
	}
	if r.Scaler != nil {
		if err := r.Scaler.Load(*st.Scaler); err != nil {
			return Position{}, fmt.Errorf("runstate: %w", err)
		}
	}
	for _, n := range rngs {
		v := st.RNGs[n.Name]
		n.RNG.Seed, n.RNG.Counter = v[0], v[1]
	}
	return st.Position, nil
}

// MismatchError is Load's refusal of a checkpoint that is intact but was
// made by another kind of run.
type MismatchError struct{ Err error }

func (e *MismatchError) Error() string { return e.Err.Error() }
func (e *MismatchError) Unwrap() error { return e.Err }

func mismatchf(format string, a ...any) error { return &MismatchError{fmt.Errorf(format, a...)} }

// Passed is a checkpoint LoadNewest passed over, and why.
type Passed struct {
	Dir string
	Err error
}

// LoadNewest restores r from the newest checkpoint in root that loads:
// one that is corrupt (a flipped bit, a file cut short or missing, a
// position outside r.Extent) is passed over for the next older, and each
// one passed over is returned with its reason, newest first, for the
// program to report. It never uses a corrupt checkpoint and fails only when
// none loads, with every reason, or at the first that belongs to another
// kind of run (a *MismatchError), since the older ones were made by the
// same. The error wraps fs.ErrNotExist when root holds no checkpoint.
func LoadNewest(root string, r Run) (dir string, pos Position, passed []Passed, err error) {
	steps, err := list(root)
	if err != nil {
		return "", Position{}, nil, fmt.Errorf("runstate: %w", err)
	}
	if len(steps) == 0 {
		return "", Position{}, nil, fmt.Errorf("runstate: no checkpoint in %s: %w", root, fs.ErrNotExist)
	}
	for i := len(steps) - 1; i >= 0; i-- {
		dir := Dir(root, steps[i])
		pos, err := Load(dir, r)
		var mismatch *MismatchError
		switch {
		case err == nil:
			return dir, pos, passed, nil
		case errors.As(err, &mismatch):
			return "", Position{}, passed, err
		}
		passed = append(passed, Passed{dir, err})
	}
	msgs := make([]string, len(passed))
	for i, p := range passed {
		msgs[i] = fmt.Sprintf("%s: %v", filepath.Base(p.Dir), strings.TrimPrefix(p.Err.Error(), "runstate: "))
	}
	return "", Position{}, passed, fmt.Errorf("runstate: no checkpoint in %s loads: %s", root, strings.Join(msgs, "; "))
}

// primary are the settings that decide others (a model brings its own
// learning rate and batch size): when one of them differs, it is the one
// a refusal to resume names first.
var primary = []string{"program", "data", "dataset", "model"}

// ConfigDiff says how the settings of a saved run and of this one differ
// ("" when they do not), as a refusal to resume does: the first of the
// settings that decide others (program, data, model) that differs, else
// the first in alphabetical order, and then every other one.
func ConfigDiff(saved, now map[string]string) string {
	if err := sameConfig(saved, now); err != nil {
		return strings.TrimPrefix(err.Error(), "runstate: cannot resume: ")
	}
	return ""
}

// sameConfig names the settings in which a saved run and this one differ:
// the first of primary that does, else the first in alphabetical order,
// and then every other one.
func sameConfig(saved, now map[string]string) error {
	keys := map[string]bool{}
	for k := range saved {
		keys[k] = true
	}
	for k := range now {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if !slices.Contains(primary, k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range slices.Backward(primary) {
		if keys[k] {
			names = append([]string{k}, names...)
		}
	}
	var first string
	var others []string
	for _, k := range names {
		a, inSaved := saved[k]
		b, inNow := now[k]
		if inSaved && inNow && a == b {
			continue
		}
		if first == "" {
			switch {
			case !inSaved:
				first = fmt.Sprintf("this run sets %s=%s, the checkpoint does not record %s", k, b, k)
			case !inNow:
				first = fmt.Sprintf("the checkpoint was made with %s=%s, this run has no %s", k, a, k)
			default:
				first = fmt.Sprintf("the checkpoint was made with %s=%s, this run has %s=%s", k, a, k, b)
			}
			continue
		}
		others = append(others, fmt.Sprintf("%s (%s, now %s)", k, orNone(a, inSaved), orNone(b, inNow)))
	}
	switch {
	case first == "":
		return nil
	case len(others) > 0:
		return fmt.Errorf("runstate: cannot resume: %s; other differences: %s", first, strings.Join(others, ", "))
	}
	return fmt.Errorf("runstate: cannot resume: %s", first)
}

func orNone(v string, ok bool) string {
	if !ok {
		return "none"
	}
	return v
}
