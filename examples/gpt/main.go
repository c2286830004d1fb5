// Command gpt trains a character-level GPT (nanoGPT's model and CPU
// recipe) on Jane Austen's novels, Newton's Opticks or any UTF-8 text, in
// FP32 or automatic mixed precision, and reports the validation loss,
// speed and peak memory; it can also sample text from the model.
//
//	go run ./examples/gpt                         # Austen, 2000 iterations, FP32
//	go run ./examples/gpt -amp bf16 -sample 300   # mixed precision, then 300 characters
//	go run ./examples/gpt -corpus opticks -iters 200
//	mpirun -np 2 ./gpt -dist mpi -batch 6           # data-parallel: 2 ranks of 6 windows
//
// The default recipe is nanoGPT's shakespeare_char on a CPU: 4 layers, 4
// heads, 128 wide, blocks of 64 characters, batches of 12, AdamW (betas
// 0.9 and 0.99, weight decay 0.1 on matrices only) at 1e-3 with 100
// warm-up iterations and a cosine decay to 1e-4, gradients clipped to norm
// 1. The validation loss is deterministic: the mean cross-entropy over the
// first -eval-windows non-overlapping windows of the validation split.
//
// A bad flag or input exits with status 2, a run whose loss becomes NaN
// or infinite with 3, any other failure with 1.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mixprec/mixprec/amp"
	_ "github.com/mixprec/mixprec/cudaops" // the CUDA backend, used when a GPU opens
	_ "github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/runstate"
)

func main() {
	os.Exit(cli.Exit(os.Stderr, "gpt", cli.Catch(func() error { return run(os.Args[1:], os.Stdout, os.Stderr) })))
}

func run(args []string, stdout, stderr io.Writer) error {
	var f flags
	fs := f.register()
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := f.check(fs); err != nil {
		return err
	}
	// The device, and under -dist the ranks (rank 0 alone prints and saves).
	env, err := train.OpenRanks("gpt", f.Device, f.Dist, f.JSON, &f.State, &f.Profile, stdout, stderr)
	if err != nil {
		return err
	}
	defer env.Close()
	text, err := loadCorpus(f.Corpus, f.Data, env.Stderr)
	if err != nil {
		return err
	}
	m, cfg, err := f.model(fs, text)
	if err != nil {
		return err
	}
	start, err := prompt(text, f.Prompt) // checked before training
	if err != nil {
		return err
	}
	if err := env.AgreeOn(f.settings(cfg), train.TextFingerprint(text)); err != nil { // under -dist, every rank's flags and text alike
		return err
	}
	nn.To(m, env.Dev)
	defer nn.Release(m)
	env.Log("%s: %d characters (%d distinct), %s, %d parameters, on %s%s, amp %s, checkpointing %s",
		text.Name, len(text.Train)+len(text.Val), len(text.Vocab), m, nn.CountParams(m), env.Dev.Name(), ranks(env), f.AMP, f.Checkpoint)
	r := &runner{f: f, cfg: cfg, env: env, dev: env.Dev, m: m, text: text, start: start}
	if f.EvalOnly {
		env.LogNotes(f.AMP, nil)
		return r.evalOnly(env.Stdout)
	}
	opt := optim.NewAdamWGroups(optim.DecayGroups(m.Params(), float32(f.WeightDecay)), optim.LR(float32(f.LR)), optim.Betas(0.9, 0.99))
	defer optim.Release(opt)
	// Gradients are unscaled as the GEMMs store them unless -accum adds
	// batches' gradients up first.
	scaler := amp.NewGradScaler(amp.For(f.AMP.DType()), amp.UnscaleAsStored(f.Accum == 1))
	env.LogNotes(f.AMP, scaler)
	r.opt, r.scaler = opt, scaler
	// Under -dist: rank 0's weights, gradients averaged as backward runs.
	if r.dp, err = env.DataParallel(m); err != nil {
		return err
	}
	// -mem-budget: planned before anything is saved or trained.
	if r.plan, err = r.planBudget(); err != nil {
		return err
	}
	// The saver owns -save's directory, restores a run and turns a signal
	// into a checkpoint and a stop between iterations (internal/train).
	saver, err := env.NewSaver(f.State, runstate.Run{Model: m, Optimizer: opt, Scaler: scaler, Config: f.runConfig(cfg, env.Ranks),
		Extent: runstate.Extent{Steps: f.Iters}})
	if err != nil {
		return err
	}
	defer saver.Close()
	pos, err := env.Resume(saver) // under -dist, every rank from the same iteration
	if err != nil {
		return err
	}
	if f.State.Resume != "" {
		env.Log("resuming from iteration %d of %s", pos.Step, f.State.Resume)
	}
	rec, err := train.NewRecorder(f.Profile, env.Dev, profile.RunInfo{Label: train.Label(f.AMP, f.Checkpoint), Program: "gpt",
		Model: "gpt", AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(), Batch: f.Batch, Seed: f.Seed})
	if err != nil {
		return err
	}
	defer rec.Close()
	r.rec, r.saver, r.guard = rec, saver, train.NewGuard(env.Dev, r.plan, saver)
	res, err := r.train(pos)
	if err != nil {
		return err
	}
	if err := rec.Finish(env.Stderr); err != nil {
		return err
	}
	if res.Err() == nil && f.Sample > 0 && env.Rank == 0 {
		r.sample(env.Stdout, f.Sample)
	}
	if err := r.report(env.Stdout, res); err != nil {
		return err
	}
	return env.Outcome(res.Err()) // nil, or the divergence, the signal or the step over budget, which main reports with its own status
}

// ranks says how many processes train under -dist: ", 2 ranks".
func ranks(env *train.Env) string {
	if env.Ranks == 1 {
		return ""
	}
	return fmt.Sprintf(", %d ranks", env.Ranks)
}

// given reports which flags the command line set.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}
