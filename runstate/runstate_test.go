package runstate_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/runstate"
	"github.com/mixprec/mixprec/safetensors"
)

const (
	batch      = 32
	totalSteps = 20 // 7 batches an epoch: the run crosses two epoch boundaries
	seed       = 11
)

var data = datasets.Synthetic(200, []int{1, 8, 8}, 10, 5)

// result is what a run ends with.
type result struct {
	weights []safetensors.Tensor
	lossSum float64
	skipped int
}

// train runs the recipe of the examples in small (dropout, AdamW, a
// one-cycle schedule, random shifts, shuffling, autocast to low with a loss
// scaler under F16) from the start or, when resume is set, from the newest
// checkpoint in dir, until totalSteps, saving a checkpoint at step stopAt
// and returning there when stop is set (as a killed run would stop).
func train(t *testing.T, low dtype.DType, dir string, stopAt int, stop, resume bool, initSeed uint64) result {
	t.Helper()
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(initSeed, 1))
	model := nn.NewSequential(nn.Flatten(), nn.NewLinear(64, 32, rng), nn.ReLU(), nn.NewDropout(0.2, rng), nn.NewLinear(32, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	opt := optim.NewAdamW(model.Params(), optim.LR(1e-3))
	defer optim.Release(opt)
	var scaler *amp.GradScaler
	if low == dtype.F16 {
		scaler = amp.NewGradScaler(amp.InitScale(1024), amp.GrowthInterval(3))
	}
	sched := optim.OneCycle(5e-3, totalSteps, 0.3, 25, 1e4)
	run := runstate.Run{Model: model, Optimizer: opt, Scaler: scaler,
		Config: map[string]string{"model": "tiny", "amp": low.String(), "batch": "32"}}
	var pos runstate.Position
	if resume {
		latest, err := runstate.Latest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if pos, err = runstate.Load(latest, run); err != nil {
			t.Fatal(err)
		}
	}
	x := data
	for epoch := pos.Epoch; pos.Step < totalSteps; epoch++ {
		opts := []datasets.Option{datasets.Shuffle(seed), datasets.Epoch(epoch), datasets.Augment(datasets.RandomShift(1, 0))}
		if epoch == pos.Epoch {
			opts = append(opts, datasets.From(pos.Batch))
		} else {
			pos.Epoch, pos.Batch = epoch, 0
		}
		for b := range datasets.Batches(x, batch, opts...) {
			opt.SetLR(sched(pos.Step))
			g := autograd.NewGraph(dev)
			if low != dtype.F32 {
				amp.Autocast(g, low)
			}
			loss := nn.CrossEntropy(g, model.Forward(g, g.Input(b.X)), b.Y)
			if scaler != nil {
				g.Backward(scaler.Scale(g, loss))
				if _, err := scaler.Step(opt); err != nil {
					t.Fatal(err)
				}
				if err := scaler.Update(); err != nil {
					t.Fatal(err)
				}
			} else {
				g.Backward(loss)
				opt.Step()
			}
			opt.ZeroGrad()
			if pos.Sums == nil {
				pos.Sums = map[string]float64{}
			}
			pos.Sums["loss"] += float64(loss.Value.Item())
			g.Release()
			pos.Step++
			pos.Batch = b.Index + 1
			if pos.Step == stopAt {
				if _, err := runstate.Save(dir, run, pos, 2); err != nil {
					t.Fatal(err)
				}
				if stop {
					return result{}
				}
			}
			if pos.Step == totalSteps {
				break
			}
		}
	}
	r := result{weights: nn.Weights(model), lossSum: pos.Sums["loss"]}
	if scaler != nil {
		r.skipped = scaler.Skipped()
	}
	return r
}

// TestResumeIsExact stops a run at several steps (mid-epoch, on an epoch
// boundary), resumes it in fresh objects initialised differently, and
// requires the uninterrupted run's weights bit for bit and its loss sum.
func TestResumeIsExact(t *testing.T) {
	for _, low := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		want := train(t, low, t.TempDir(), -1, false, false, 1)
		for _, stopAt := range []int{3, 7, 15} {
			t.Run(low.String()+"/stop"+string(rune('0'+stopAt/10))+string(rune('0'+stopAt%10)), func(t *testing.T) {
				dir := t.TempDir()
				train(t, low, dir, stopAt, true, false, 1)
				got := train(t, low, dir, -1, false, true, 99)
				if got.lossSum != want.lossSum || got.skipped != want.skipped {
					t.Errorf("loss sum %v (skipped %d), uninterrupted %v (skipped %d)", got.lossSum, got.skipped, want.lossSum, want.skipped)
				}
				for i := range want.weights {
					for j, w := range want.weights[i].F32 {
						if g := got.weights[i].F32[j]; math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%s[%d] = %v resumed, %v uninterrupted", want.weights[i].Name, j, g, w)
						}
					}
				}
			})
		}
	}
}

// checkpointed trains an F32 run to step stopAt, saving as it goes, in a
// new directory, and returns the newest checkpoint there.
func checkpointed(t *testing.T, stopAt int) string {
	t.Helper()
	dir := t.TempDir()
	train(t, dtype.F32, dir, stopAt, true, false, 1)
	latest, err := runstate.Latest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return latest
}

func TestLoadRefuses(t *testing.T) {
	latest := checkpointed(t, 2)
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.NewSequential(nn.Flatten(), nn.NewLinear(64, 32, rng), nn.ReLU(), nn.NewDropout(0.2, rng), nn.NewLinear(32, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	opt := optim.NewAdamW(model.Params(), optim.LR(1e-3))
	run := runstate.Run{Model: model, Optimizer: opt, Config: map[string]string{"model": "tiny", "amp": "bf16", "batch": "32"}}
	if _, err := runstate.Load(latest, run); err == nil || !strings.Contains(err.Error(), "made with amp=f32, this run has amp=bf16") {
		t.Errorf("resuming with another amp mode: %v, want an error naming it", err)
	}
	run.Config["amp"] = "f32"
	// A flipped bit in the weights is found.
	p := filepath.Join(latest, "model.safetensors")
	b, _ := os.ReadFile(p)
	b[len(b)-3] ^= 4
	os.WriteFile(p, b, 0o644)
	if _, err := runstate.Load(latest, run); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a flipped bit: %v, want a corrupt-file error", err)
	}
	if _, err := runstate.Latest(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Latest of an empty directory: %v, want fs.ErrNotExist", err)
	}
}

// TestCheckpointFilesOwnerOnly requires every file of a checkpoint to be
// readable by its owner alone, state.json as the weights.
func TestCheckpointFilesOwnerOnly(t *testing.T) {
	latest := checkpointed(t, 2)
	for _, name := range []string{"model.safetensors", "optim.safetensors", "state.json"} {
		fi, err := os.Stat(filepath.Join(latest, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want -rw-------", name, fi.Mode(), err)
		}
	}
}

func TestSaveKeepsNewest(t *testing.T) {
	dir := t.TempDir()
	train(t, dtype.F32, dir, 1, true, false, 1)
	for _, step := range []int{5, 9} {
		train(t, dtype.F32, dir, step, true, false, 1)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "step-00000005 step-00000009" {
		t.Errorf("checkpoints left: %v, want the newest two and no temporaries", names)
	}
}

// TestSaveFullDisk fills a small tmpfs: Save returns the file system's
// error, the checkpoint already there stays loadable, and no partial
// checkpoint or temporary is left. It needs root to mount, and skips
// without.
func TestSaveFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", dir).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	defer exec.Command("umount", dir).Run()
	train(t, dtype.F32, dir, 1, true, false, 1) // a checkpoint of about 20 KB fits
	before, _ := os.ReadDir(dir)
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 1))
	big := nn.NewSequential(nn.NewLinear(100, 100, rng)) // 40 KB of weights: more than is left
	nn.To(big, dev)
	defer nn.Release(big)
	opt := optim.NewAdam(big.Params())
	_, err := runstate.Save(dir, runstate.Run{Model: big, Optimizer: opt, Config: map[string]string{}}, runstate.Position{Step: 9}, 2)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("Save into a full file system: %v, want the file system's error", err)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Errorf("%d entries after a failed save, %d before: a partial checkpoint or temporary was left", len(after), len(before))
	}
	latest, err := runstate.Latest(dir)
	if err != nil || !strings.HasSuffix(latest, "step-00000001") {
		t.Errorf("Latest after a failed save = %s, %v; want the earlier checkpoint", latest, err)
	}
}

// reseal rewrites the state.json of checkpoint dir with edit applied to
// its text and, when it has one, its checksum line made right again: what a
// hand edit, or a bug in a writer, would leave.
func reseal(t *testing.T, dir string, edit func(string) string) {
	t.Helper()
	p := filepath.Join(dir, "state.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	body, sealed := string(b), false
	if i := strings.LastIndex(body, ",\n\t\"state_sha256\""); i >= 0 {
		body, sealed = body[:i], true
	}
	body = edit(body)
	if sealed {
		sum := sha256.Sum256([]byte(body))
		body += ",\n\t\"state_sha256\": \"" + hex.EncodeToString(sum[:]) + "\"\n}\n"
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newRun builds train's model and optimiser afresh, for Load.
func newRun(t *testing.T, amp string, extent runstate.Extent) runstate.Run {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.NewSequential(nn.Flatten(), nn.NewLinear(64, 32, rng), nn.ReLU(), nn.NewDropout(0.2, rng), nn.NewLinear(32, 10, rng))
	nn.To(model, cpu.New())
	t.Cleanup(func() { nn.Release(model) })
	opt := optim.NewAdamW(model.Params(), optim.LR(1e-3))
	return runstate.Run{Model: model, Optimizer: opt, Config: map[string]string{"model": "tiny", "amp": amp, "batch": "32"}, Extent: extent}
}

// TestStateFlips flips every byte of a checkpoint's state.json in turn,
// three ways each: Load must refuse every one.
func TestStateFlips(t *testing.T) {
	latest := checkpointed(t, 9)
	p := filepath.Join(latest, "state.json")
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	run := newRun(t, "f32", runstate.Extent{})
	if _, err := runstate.Load(latest, run); err != nil {
		t.Fatalf("the intact checkpoint: %v", err)
	}
	loaded := 0
	for i := range orig {
		for _, x := range []byte{0x01, 0x04, 0x20} {
			b := bytes.Clone(orig)
			b[i] ^= x
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := runstate.Load(latest, run); err == nil {
				loaded++
				if loaded <= 5 {
					t.Errorf("byte %d (%q) xor %#x: loaded", i, orig[i], x)
				}
			}
		}
	}
	if loaded > 0 {
		t.Errorf("%d of %d single-byte flips loaded, want none", loaded, 3*len(orig))
	}
}

// TestStateStrict edits a checkpoint's state.json and makes its checksum
// right again: what encoding/json would let pass, or a position no run
// reaches, is still refused, naming the problem.
func TestStateStrict(t *testing.T) {
	extent := runstate.Extent{Epochs: 3, PerEpoch: 7, Steps: 20}
	for _, tt := range []struct {
		name string
		edit func(string) string
		want string
	}{
		{"unknown field", replace(`"format"`, `"extra": 1,`+"\n\t"+`"format"`), `unknown field "extra"`},
		{"duplicate key", replace(`"step": 9,`, `"step": 9, "step": 1,`), `names "step" twice`},
		{"null", replace(`"batch": 2,`, `"batch": null,`), "null at position.batch"},
		{"wrong type", replace(`"step": 9,`, `"step": "9",`), "cannot unmarshal string"},
		{"missing", replace(`"batch": 2,`, ``), `no position "batch"`},
		{"negative step", replace(`"step": 9,`, `"step": -100,`), "may be negative"},
		{"negative epoch", replace(`"epoch": 1,`, `"epoch": -5,`), "may be negative"},
		{"huge batch", replace(`"batch": 2,`, `"batch": 1000000000,`), "past the 7 batches"},
		{"late epoch", replace(`"epoch": 1,`, `"epoch": 3,`), "past the run's 3 epochs"},
		{"step past the data", replace(`"step": 9,`, `"step": 10,`), "more than the 9 batches"},
		{"fractional", replace(`"step": 9,`, `"step": 9.5,`), "cannot unmarshal number 9.5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			train(t, dtype.F32, dir, 9, true, false, 1)
			latest, err := runstate.Latest(dir)
			if err != nil {
				t.Fatal(err)
			}
			run := newRun(t, "f32", extent)
			if _, err := runstate.Load(latest, run); err != nil {
				t.Fatalf("the intact checkpoint: %v", err)
			}
			reseal(t, latest, tt.edit)
			if pos, err := runstate.Load(latest, run); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %+v, %v; want an error containing %q", pos, err, tt.want)
			}
		})
	}
}

// replace is an edit that replaces old, which must be there, by new.
func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			return "state.json does not hold " + old
		}
		return strings.Replace(s, old, new, 1)
	}
}

// TestLoadNewestFallsBack damages the newest of two checkpoints in several
// ways: LoadNewest resumes from the older, naming the newer and why; with
// both damaged it fails naming both; a checkpoint of another kind of run
// stops it at once.
func TestLoadNewestFallsBack(t *testing.T) {
	flip := func(name string) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, name)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x10
			os.WriteFile(p, b, 0o600)
		}
	}
	cut := func(name string) func(string) {
		return func(dir string) {
			p := filepath.Join(dir, name)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/3], 0o600)
		}
	}
	remove := func(name string) func(string) {
		return func(dir string) { os.Remove(filepath.Join(dir, name)) }
	}
	for _, tt := range []struct {
		name   string
		damage func(string)
		want   string
	}{
		{"model flipped", flip("model.safetensors"), "model.safetensors has SHA-256"},
		{"optimiser cut", cut("optim.safetensors"), "optim.safetensors has SHA-256"},
		{"state flipped", flip("state.json"), "state.json"},
		{"state cut", cut("state.json"), "state.json"},
		{"state missing", remove("state.json"), "no such file"},
		{"model missing", remove("model.safetensors"), "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			train(t, dtype.F32, root, 5, true, false, 1)
			train(t, dtype.F32, root, 9, true, false, 1)
			tt.damage(runstate.Dir(root, 9))
			dir, pos, passed, err := runstate.LoadNewest(root, newRun(t, "f32", runstate.Extent{}))
			if err != nil || dir != runstate.Dir(root, 5) || pos.Step != 5 {
				t.Fatalf("LoadNewest = %s at step %d, %v; want step-00000005", dir, pos.Step, err)
			}
			if len(passed) != 1 || passed[0].Dir != runstate.Dir(root, 9) || !strings.Contains(passed[0].Err.Error(), tt.want) {
				t.Errorf("passed over %+v; want step-00000009 with a reason containing %q", passed, tt.want)
			}
			tt.damage(runstate.Dir(root, 5))
			_, _, passed, err = runstate.LoadNewest(root, newRun(t, "f32", runstate.Extent{}))
			if err == nil || len(passed) != 2 || !strings.Contains(err.Error(), "step-00000009: ") || !strings.Contains(err.Error(), "step-00000005: ") {
				t.Errorf("both damaged: %v (passed %d); want an error naming both", err, len(passed))
			}
		})
	}
	t.Run("mismatch", func(t *testing.T) {
		root := t.TempDir()
		train(t, dtype.F32, root, 5, true, false, 1)
		train(t, dtype.F32, root, 9, true, false, 1)
		_, _, passed, err := runstate.LoadNewest(root, newRun(t, "bf16", runstate.Extent{}))
		var mismatch *runstate.MismatchError
		if !errors.As(err, &mismatch) || len(passed) != 0 || !strings.Contains(err.Error(), "amp=f32, this run has amp=bf16") {
			t.Errorf("another amp: %v (passed %d); want a MismatchError from the newest", err, len(passed))
		}
	})
	if _, _, _, err := runstate.LoadNewest(t.TempDir(), newRun(t, "f32", runstate.Extent{})); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadNewest of an empty directory: %v, want fs.ErrNotExist", err)
	}
}

// TestClean plants what saves killed at various instants leave: Clean
// removes the temporaries, removes a checkpoint moved aside when its
// replacement is in place and puts it back when it is not, and leaves
// everything else alone.
func TestClean(t *testing.T) {
	root := t.TempDir()
	train(t, dtype.F32, root, 5, true, false, 1)
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(root, p), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(root, p, "model.safetensors"), []byte("half"), 0o600)
	}
	mk(".tmp-step-123")
	mk(".tmp-step-456")
	os.WriteFile(filepath.Join(root, ".model.safetensors.789.tmp"), []byte("half"), 0o600)
	os.Rename(runstate.Dir(root, 5), runstate.Dir(root, 5)+".old") // killed between moving aside and renaming in
	train(t, dtype.F32, root, 3, true, false, 1)
	if err := os.Rename(runstate.Dir(root, 3), runstate.Dir(root, 3)+".old"); err != nil {
		t.Fatal(err)
	}
	train(t, dtype.F32, root, 3, true, false, 1) // step 3 in place again: its .old is stale
	os.WriteFile(filepath.Join(root, "notes.txt"), []byte("mine"), 0o600)
	mk("step-0000001")
	done, err := runstate.Clean(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 5 {
		t.Errorf("Clean did %d things, want 5: %q", len(done), done)
	}
	var names []string
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, " "), "notes.txt step-00000003 step-00000005 step-0000001"; got != want {
		t.Errorf("left %s, want %s", got, want)
	}
	if _, err := runstate.Load(runstate.Dir(root, 5), newRun(t, "f32", runstate.Extent{})); err != nil {
		t.Errorf("the checkpoint put back does not load: %v", err)
	}
	if done, err := runstate.Clean(filepath.Join(root, "missing")); err != nil || done != nil {
		t.Errorf("Clean of a missing directory = %q, %v; want nothing", done, err)
	}
}

// TestConfigDifference resumes with settings that differ in several ways:
// the refusal names the setting that decides the others (the model, whose
// recipe brings its own learning rate) first, then the rest.
func TestConfigDifference(t *testing.T) {
	latest := checkpointed(t, 2)
	for _, tt := range []struct {
		config map[string]string
		want   string
	}{
		{map[string]string{"model": "big", "amp": "f32", "batch": "64"},
			"cannot resume: the checkpoint was made with model=tiny, this run has model=big; other differences: batch (32, now 64)"},
		{map[string]string{"model": "tiny", "amp": "f32", "batch": "32", "lr": "0.1"},
			"cannot resume: this run sets lr=0.1, the checkpoint does not record lr"},
		{map[string]string{"model": "tiny", "batch": "32"},
			"cannot resume: the checkpoint was made with amp=f32, this run has no amp"},
	} {
		run := newRun(t, "f32", runstate.Extent{})
		run.Config = tt.config
		if _, err := runstate.Load(latest, run); err == nil || !strings.HasSuffix(err.Error(), tt.want) {
			t.Errorf("config %v: %v; want an error ending %q", tt.config, err, tt.want)
		}
	}
}

// TestLock takes a directory twice (refused, naming this process), after
// release, and over locks left by processes that are gone: one that
// exited, and one whose process id was reused since. A lock from another
// host is refused, saying how to remove it.
func TestLock(t *testing.T) {
	root := filepath.Join(t.TempDir(), "run")
	l, err := runstate.Lock(root)
	if err != nil {
		t.Fatal(err)
	}
	var locked *runstate.LockedError
	if _, err := runstate.Lock(root); !errors.As(err, &locked) || locked.PID != os.Getpid() ||
		!strings.Contains(err.Error(), fmt.Sprintf("in use by process %d", os.Getpid())) {
		t.Fatalf("second Lock = %v; want a LockedError naming process %d", err, os.Getpid())
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, runstate.LockFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the lock file is still there after Unlock: %v", err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Skipf("cannot run true: %v", err)
	}
	host, _ := os.Hostname()
	for _, tt := range []struct {
		name, content string
		taken         bool
	}{
		{"exited", fmt.Sprintf("pid %d\nhost %s\nstart -\nsince then\n", exited.Process.Pid, host), true},
		{"pid reused", fmt.Sprintf("pid %d\nhost %s\nstart 1\nsince then\n", os.Getpid(), host), true},
		{"garbage", "\x00\x01", true},
		{"other host", "pid 1\nhost elsewhere.example\nstart 1\nsince 2026-01-01T00:00:00Z\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(root, runstate.LockFile), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			l, err := runstate.Lock(root)
			switch {
			case tt.taken && err != nil:
				t.Errorf("Lock over a stale lock: %v", err)
			case !tt.taken && (err == nil || !strings.Contains(err.Error(), "process 1 on elsewhere.example") || !strings.Contains(err.Error(), "remove "+filepath.Join(root, ".lock"))):
				t.Errorf("Lock over another host's lock: %v; want a refusal naming it and the file", err)
			}
			l.Unlock()
			os.Remove(filepath.Join(root, runstate.LockFile))
		})
	}
}

// TestPruneKeepsOtherRuns saves checkpoints of two runs into one
// directory: pruning removes only the saving run's older checkpoints.
func TestPruneKeepsOtherRuns(t *testing.T) {
	root := t.TempDir()
	a, b := newRun(t, "f32", runstate.Extent{}), newRun(t, "f32", runstate.Extent{})
	a.ID, b.ID = runstate.NewID(), runstate.NewID()
	if a.ID == b.ID || len(a.ID) != 16 {
		t.Fatalf("NewID gave %q and %q", a.ID, b.ID)
	}
	for step := 1; step <= 6; step++ {
		r := a
		if step > 3 {
			r = b
		}
		if _, err := runstate.Save(root, r, runstate.Position{Step: step}, 2); err != nil {
			t.Fatal(err)
		}
	}
	c, err := runstate.Inspect(root)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.Steps) != "[2 3 5 6]" || c.Newest.ID != b.ID || c.Newest.Dir != runstate.Dir(root, 6) || c.Weights {
		t.Errorf("Inspect = %+v; want steps [2 3 5 6], the newest b's", c)
	}
	done, err := runstate.Remove(root, c)
	if err != nil || len(done) != 4 {
		t.Errorf("Remove = %q, %v", done, err)
	}
	if c, _ := runstate.Inspect(root); !c.Empty() {
		t.Errorf("after Remove: %+v", c)
	}
}
