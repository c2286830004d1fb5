package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/safetensors"
)

// flags are the program's options, each parsed once into its typed value.
type flags struct {
	Corpus                   string
	Layers, Heads, Embd      int
	Block, Batch, Iters      int
	Accum                    int
	LR, WeightDecay, Dropout float64
	Warmup                   int
	Bias                     bool
	Seed                     uint64
	AMP                      cli.AMP
	Checkpoint               cli.Checkpoint
	MemBudget                cli.MemBudget
	Device, Data             string
	Init                     string
	EvalOnly                 bool
	EvalWindows, EvalEvery   int
	Sample, TopK             int
	Temperature              float64
	Prompt                   string
	JSON                     bool
	State                    cli.StateFlags
	Dist                     cli.DistFlags
	Profile                  cli.ProfileFlags
}

func (f *flags) register() *flag.FlagSet {
	fs := cli.NewFlagSet("gpt", "Trains a character-level GPT (nanoGPT's model and CPU recipe) in FP32 or mixed\n"+
		"precision and reports the validation loss, speed and peak memory.")
	fs.StringVar(&f.Corpus, "corpus", "austen", "austen (Jane Austen's six novels, fetched from Debian's archive), opticks (Newton's, shipped with Go) or the path of a UTF-8 text file")
	cli.IntVar(fs, &f.Layers, "layers", 4, 1, 1024, "transformer blocks")
	cli.IntVar(fs, &f.Heads, "heads", 4, 1, 1024, "attention heads (must divide -embd)")
	cli.IntVar(fs, &f.Embd, "embd", 128, 1, 1<<16, "embedding width")
	cli.IntVar(fs, &f.Block, "block", 64, 1, 1<<16, "context length in characters")
	cli.IntVar(fs, &f.Batch, "batch", 12, 1, cli.MaxBatch, "windows per training batch")
	cli.IntVar(fs, &f.Accum, "accum", 1, 1, 1<<16, "batches whose gradients add up before each optimiser step (nanoGPT's gradient_accumulation_steps):\n"+
		"an iteration trains on -batch × -accum windows in the memory of -batch")
	cli.IntVar(fs, &f.Iters, "iters", 2000, 0, 1<<30, "training iterations")
	cli.FloatVar(fs, &f.LR, "lr", 1e-3, "learning rate", false, "learning rate (the peak of the schedule)")
	cli.FloatVar(fs, &f.WeightDecay, "weight-decay", 0.1, "weight decay", true, "AdamW's decay on weight matrices and embeddings")
	cli.FloatVar(fs, &f.Dropout, "dropout", 0, "dropout", true, "dropout probability, below 1")
	cli.IntVar(fs, &f.Warmup, "warmup", 100, 0, 1<<30, "linear warm-up iterations before the cosine decay to lr/10")
	fs.BoolVar(&f.Bias, "bias", false, "biases in Linears and LayerNorms")
	cli.SeedVar(fs, &f.Seed, 1, "random seed (initialisation, batches, dropout, sampling)")
	fs.Var(&f.AMP, "amp", "mixed precision: off, f16 or bf16")
	fs.Var(&f.Checkpoint, "checkpoint", "gradient checkpointing: off, auto (each block) or a number of segments of blocks")
	cli.MemBudgetVar(fs, &f.MemBudget)
	f.Device = "auto"
	fs.Var(cli.NewChoice(&f.Device, "auto", "cpu", "cuda"), "device", "backend: auto takes CUDA when a GPU opens, else the CPU")
	fs.StringVar(&f.Data, "data", "", "data directory (default $MIXPREC_DATA, else ./data)")
	fs.StringVar(&f.Init, "init", "", "start from nanoGPT-named safetensors weights (sizes, bias and, from its metadata, heads inferred from the file where flags leave them unset)")
	fs.BoolVar(&f.EvalOnly, "eval-only", false, "report the validation loss of the -init weights and stop")
	cli.IntVar(fs, &f.EvalWindows, "eval-windows", 200, 1, 1<<30, "validation windows the loss is averaged over")
	cli.IntVar(fs, &f.EvalEvery, "eval-every", 500, 0, 1<<30, "iterations between validation losses while training (0: at the end only)")
	cli.IntVar(fs, &f.Sample, "sample", 0, 0, 1<<20, "after training, print this many generated characters")
	cli.FloatVar(fs, &f.Temperature, "temperature", 0.8, "temperature", false, "sampling temperature")
	cli.IntVar(fs, &f.TopK, "top-k", 200, 0, 1<<20, "sample among the k likeliest characters (0: all)")
	fs.StringVar(&f.Prompt, "prompt", "", "text that -sample continues, printed before what it generates (default: from a newline)")
	fs.BoolVar(&f.JSON, "json", false, "print a JSON summary as the last line")
	f.State.Register(fs)
	f.Dist.Register(fs)
	f.Profile.Register(fs)
	return fs
}

// check refuses combinations no run can use.
func (f *flags) check(fs *flag.FlagSet) error {
	if err := f.MemBudget.Check(f.Checkpoint); err != nil {
		return err
	}
	if f.MemBudget.On() && f.EvalOnly {
		return cli.Usagef("-eval-only trains nothing: -mem-budget plans training steps")
	}
	if err := f.State.Check(); err != nil {
		return err
	}
	if err := f.Profile.Check(); err != nil {
		return err
	}
	if f.Dropout >= 1 {
		return cli.Usagef("-dropout %v: want a probability below 1", f.Dropout)
	}
	if f.Prompt != "" && f.Sample == 0 {
		return cli.Usagef("-prompt is what -sample continues: give -sample N too")
	}
	if f.EvalOnly && f.Init == "" && f.State.Resume == "" {
		return cli.Usagef("-eval-only needs weights: -init FILE")
	}
	if f.Embd%f.Heads != 0 && (f.Init == "" || given(fs)["embd"]) {
		return cli.Usagef("-heads %d does not divide -embd %d", f.Heads, f.Embd)
	}
	return nil
}

// loadCorpus loads the corpus the flag names; Austen's from the data
// directory, fetched there the first time (as MNIST is).
func loadCorpus(corpus, data string, progress io.Writer) (*datasets.Text, error) {
	return datasets.LoadText(corpus, datasets.In(filepath.Join(datasets.Root(data), "austen")), datasets.Download(), datasets.Progress(progress))
}

// model builds the GPT the flags and the corpus describe, or the one -init
// holds: the file's sizes and bias apply where no flag was given, and must
// agree with those that were and with the corpus's vocabulary.
func (f *flags) model(fs *flag.FlagSet, text *datasets.Text) (*models.GPT, models.GPTConfig, error) {
	cfg := models.GPTConfig{Vocab: len(text.Vocab), Block: f.Block, Layers: f.Layers, Heads: f.Heads, Embd: f.Embd,
		Dropout: float32(f.Dropout), Bias: f.Bias}
	var weights []safetensors.Tensor
	if f.Init != "" {
		file, err := safetensors.ReadFile(f.Init)
		if err != nil {
			return nil, cfg, fmt.Errorf("-init: %w", err)
		}
		if weights, err = models.GPTWeights(file.Tensors); err != nil {
			return nil, cfg, fmt.Errorf("-init %s: %w", f.Init, err)
		}
		if cfg, err = f.fromFile(fs, cfg, weights, file.Metadata); err != nil {
			return nil, cfg, fmt.Errorf("-init %s: %w", f.Init, err)
		}
	}
	if err := cfg.Check(); err != nil {
		return nil, cfg, cli.Usagef("%v", err)
	}
	if n := len(text.Train) + len(text.Val); n < 2*cfg.Block+2 {
		return nil, cfg, cli.Usagef("corpus %s has %d characters; a block of %d needs at least %d", text.Name, n, cfg.Block, 2*cfg.Block+2)
	}
	if len(text.Train) < cfg.Block+1 || len(text.Val) < cfg.Block+1 {
		return nil, cfg, cli.Usagef("corpus %s splits into %d training and %d validation characters; a block of %d needs %d in each",
			text.Name, len(text.Train), len(text.Val), cfg.Block, cfg.Block+1)
	}
	m := models.NewGPT(cfg, rand.New(rand.NewPCG(f.Seed, 0x677074)))
	if weights != nil {
		if err := nn.SetWeights(m, weights); err != nil {
			return nil, cfg, fmt.Errorf("-init %s: %w", f.Init, err)
		}
	}
	if f.Checkpoint.On() {
		m.Segments = f.Checkpoint.Segments(cfg.Layers) // auto: each block its own segment
	}
	return m, cfg, nil
}

// fromFile fills cfg from a weights file where the flags were not given,
// and checks the file against those that were and the vocabulary. The
// heads, which weights do not show, come from the file's metadata when it
// names them (mixprec's "heads", a nanoGPT export's "n_head").
func (f *flags) fromFile(fs *flag.FlagSet, cfg models.GPTConfig, weights []safetensors.Tensor, meta map[string]string) (models.GPTConfig, error) {
	fc, err := models.GPTConfigOf(weights)
	if err != nil {
		return cfg, err
	}
	set := given(fs)
	for _, k := range []string{"heads", "n_head"} {
		if h, err := strconv.Atoi(meta[k]); err == nil && h > 0 && !set["heads"] {
			cfg.Heads = h
			break
		}
	}
	for _, c := range []struct {
		flag      string
		file, use *int
	}{{"layers", &fc.Layers, &cfg.Layers}, {"embd", &fc.Embd, &cfg.Embd}, {"block", &fc.Block, &cfg.Block}} {
		switch {
		case !set[c.flag]:
			*c.use = *c.file
		case *c.file != *c.use:
			return cfg, fmt.Errorf("the file's -%s is %d, the flag says %d", c.flag, *c.file, *c.use)
		}
	}
	if !set["bias"] {
		cfg.Bias = fc.Bias
	} else if fc.Bias != cfg.Bias {
		return cfg, fmt.Errorf("the file has bias=%v, the flag says %v", fc.Bias, cfg.Bias)
	}
	if fc.Vocab != cfg.Vocab {
		return cfg, fmt.Errorf("tensor transformer.wte.weight is %v in the file; the corpus's %d characters need %v",
			[]int{fc.Vocab, fc.Embd}, cfg.Vocab, []int{cfg.Vocab, cfg.Embd})
	}
	if cfg.Embd%cfg.Heads != 0 {
		return cfg, cli.Usagef("-heads %d does not divide the file's embedding width %d", cfg.Heads, cfg.Embd)
	}
	return cfg, nil
}

// runConfig is what a resumed run must share with the saved one, and
// the ranks of a data-parallel run with each other; ranks is the number of
// them (named only when above 1, as checkpoints of one process never
// named it; -accum likewise).
func (f *flags) runConfig(c models.GPTConfig, ranks int) map[string]string {
	m := map[string]string{"program": "gpt", "corpus": f.Corpus, "vocab": fmt.Sprint(c.Vocab), "layers": fmt.Sprint(c.Layers),
		"heads": fmt.Sprint(c.Heads), "embd": fmt.Sprint(c.Embd), "block": fmt.Sprint(c.Block), "bias": fmt.Sprint(c.Bias),
		"dropout": fmt.Sprint(c.Dropout), "batch": fmt.Sprint(f.Batch), "iters": fmt.Sprint(f.Iters), "lr": fmt.Sprint(f.LR),
		"weight_decay": fmt.Sprint(f.WeightDecay), "warmup": fmt.Sprint(f.Warmup), "seed": fmt.Sprint(f.Seed),
		"amp": f.AMP.String(), "checkpoint": f.Checkpoint.String()}
	if ranks > 1 {
		m["ranks"] = fmt.Sprint(ranks)
	}
	if f.Accum > 1 { // likewise
		m["accum"] = fmt.Sprint(f.Accum)
	}
	return m
}

// settings are the flags every rank of a data-parallel run must share, by
// their names on the command line: runConfig's, whose vocabulary the
// corpus's fingerprint covers, and the memory budget (every rank plans it
// and takes rank 0's plan; a resumed run may change it, so it is not in
// runConfig).
func (f *flags) settings(c models.GPTConfig) map[string]string {
	s := map[string]string{"-mem-budget": f.MemBudget.Setting()}
	for k, v := range f.runConfig(c, 1) {
		if k != "program" && k != "vocab" {
			s["-"+strings.ReplaceAll(k, "_", "-")] = v
		}
	}
	return s
}
