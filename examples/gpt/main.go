// Command gpt trains a character-level GPT (nanoGPT's model and CPU
// recipe) on Jane Austen's novels, Newton's Opticks or any UTF-8 text, in
// FP32 or automatic mixed precision, and reports the validation loss,
// speed and peak memory; it can also sample text from the model.
//
//	go run ./examples/gpt                         # Austen, 2000 iterations, FP32
//	go run ./examples/gpt -amp bf16 -sample 300   # mixed precision, then 300 characters
//	go run ./examples/gpt -corpus opticks -iters 200
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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

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
	os.Exit(cli.Exit(os.Stderr, "gpt", run(os.Args[1:], os.Stdout, os.Stderr)))
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
	dev, note, err := cli.OpenDevice(f.Device)
	if err != nil {
		return err
	}
	if w := cli.DeviceWarning(dev); w != "" {
		fmt.Fprintf(stderr, "gpt: %s: %s\n", dev.Name(), w)
	}
	text, err := loadCorpus(f.Corpus, f.Data, stderr)
	if err != nil {
		return err
	}
	m, cfg, err := f.model(fs, text)
	if err != nil {
		return err
	}
	nn.To(m, dev)
	defer nn.Release(m)
	log := logger(stdout, f.JSON)
	log("%s: %d characters (%d distinct), %s, %d parameters, on %s, amp %s, checkpointing %s",
		text.Name, len(text.Train)+len(text.Val), len(text.Vocab), m, nn.CountParams(m), dev.Name(), f.AMP, f.Checkpoint)
	if note != "" {
		log("(CUDA not used: %s)", note)
	}
	r := &runner{f: f, cfg: cfg, dev: dev, m: m, text: text, log: log, stderr: stderr}
	if f.EvalOnly {
		return r.evalOnly(stdout)
	}
	opt := optim.NewAdamWGroups(optim.DecayGroups(m.Params(), float32(f.WeightDecay)), optim.LR(float32(f.LR)), optim.Betas(0.9, 0.99))
	defer optim.Release(opt)
	scaler := amp.NewGradScaler(amp.For(f.AMP.DType()), amp.UnscaleAsStored(true))
	if f.AMP.On() && !scaler.IsEnabled() {
		log("(%s)", scaler.Note())
	}
	// The saver owns -save's directory, restores a run and turns a signal
	// into a checkpoint and a stop between iterations (internal/train).
	saver, err := train.NewSaver("gpt", f.State, runstate.Run{Model: m, Optimizer: opt, Scaler: scaler, Config: f.runConfig(cfg),
		Extent: runstate.Extent{Steps: f.Iters}}, stderr)
	if err != nil {
		return err
	}
	defer saver.Close()
	pos, err := saver.Resume()
	if err != nil {
		return err
	}
	if f.State.Resume != "" {
		log("resuming from iteration %d of %s", pos.Step, f.State.Resume)
	}
	rec, err := train.NewRecorder(f.Profile, dev, profile.RunInfo{Label: train.Label(f.AMP, f.Checkpoint), Program: "gpt",
		Model: "gpt", AMP: f.AMP.String(), Checkpoint: f.Checkpoint.String(), Batch: f.Batch, Seed: f.Seed})
	if err != nil {
		return err
	}
	defer rec.Close()
	r.opt, r.scaler, r.rec, r.saver = opt, scaler, rec, saver
	wall := time.Now()
	res, err := r.train(pos)
	var div *cli.Diverged
	var stopped *cli.Interrupted // a signal: the summary says so, and main exits with its status
	if err != nil && !errors.As(err, &div) && !errors.As(err, &stopped) {
		return err
	}
	res.wall, res.interrupted = time.Since(wall).Seconds(), stopped != nil
	if err := rec.Finish(stderr); err != nil {
		return err
	}
	if div == nil && stopped == nil && f.Sample > 0 {
		r.sample(stdout, f.Sample)
	}
	if err := r.report(stdout, res); err != nil {
		return err
	}
	return err // nil, or the divergence or the signal, which main reports with its own status
}

// given reports which flags the command line set.
func given(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}
