package cli

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn/models"
)

// The typed values are flag.Values.
var (
	_ flag.Value = (*AMP)(nil)
	_ flag.Value = (*Checkpoint)(nil)
	_ flag.Value = (*Choice)(nil)
	_ flag.Value = (*IntValue)(nil)
	_ flag.Value = (*FloatValue)(nil)
	_ flag.Value = (*seedValue)(nil)
)

// AMP is the value of an -amp flag: off, or autocast to F16 or BF16. The
// zero value is off. *AMP is a flag.Value, so the flag is parsed once, when
// the command line is.
type AMP struct {
	dt dtype.DType // F32 means off
}

// AMPOff is training without autocast.
var AMPOff = AMP{}

// AMPTo is autocast to dt; AMPTo(dtype.F32) is AMPOff.
func AMPTo(dt dtype.DType) AMP { return AMP{dt} }

// On reports whether autocast is on.
func (a AMP) On() bool { return a.dt != dtype.F32 }

// DType is the dtype autocast computes in, F32 when off: what amp.For and
// train.Step take.
func (a AMP) DType() dtype.DType { return a.dt }

// String is "off", "f16" or "bf16".
func (a AMP) String() string {
	if !a.On() {
		return "off"
	}
	return a.dt.String()
}

// Set parses off, f16 or bf16 (and dtype.Parse's other spellings; f32
// means off).
func (a *AMP) Set(s string) error {
	if strings.EqualFold(s, "off") {
		*a = AMPOff
		return nil
	}
	dt, err := dtype.Parse(s)
	if err != nil {
		return errors.New("want off, f16 or bf16")
	}
	*a = AMPTo(dt)
	return nil
}

// Arg names the flag's values in help.
func (*AMP) Arg() string { return "off|f16|bf16" }

// Checkpoint is the value of a -checkpoint flag: off, auto, or a number of
// segments. The zero value is off. Auto stays auto until a program says what
// it means for its model (Segments), so that no number stands for it.
type Checkpoint struct {
	auto bool
	n    int // segments, when not auto; 0 when off
}

// CheckpointOff and CheckpointAuto are the named settings;
// CheckpointSegments(n) is a fixed number.
var (
	CheckpointOff  = Checkpoint{}
	CheckpointAuto = Checkpoint{auto: true}
)

// CheckpointSegments is checkpointing in n >= 1 segments.
func CheckpointSegments(n int) Checkpoint {
	if n < 1 {
		panic(fmt.Sprintf("cli.CheckpointSegments(%d): want n >= 1 (CheckpointOff for none)", n))
	}
	return Checkpoint{n: n}
}

// On reports whether checkpointing is on.
func (c Checkpoint) On() bool { return c.auto || c.n > 0 }

// Auto reports whether the flag said auto.
func (c Checkpoint) Auto() bool { return c.auto }

// Segments is how many segments to checkpoint in: auto when the flag said
// auto, its number otherwise, and 0 when checkpointing is off.
func (c Checkpoint) Segments(auto int) int {
	if c.auto {
		return auto
	}
	return c.n
}

// String is "off", "auto" or the number of segments.
func (c Checkpoint) String() string {
	switch {
	case c.auto:
		return "auto"
	case c.n == 0:
		return "off"
	}
	return strconv.Itoa(c.n)
}

// Set parses off, auto or a number of segments >= 1. Zero segments is
// refused rather than read as off or as a default: it has been read as both.
func (c *Checkpoint) Set(s string) error {
	switch strings.ToLower(s) {
	case "off":
		*c = CheckpointOff
		return nil
	case "auto":
		*c = CheckpointAuto
		return nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err == nil && n == 0:
		return errors.New("0 segments: use off for no checkpointing")
	case err != nil || n < 0:
		return errors.New("want off, auto or a number of segments >= 1")
	}
	*c = CheckpointSegments(n)
	return nil
}

// Arg names the flag's values in help.
func (*Checkpoint) Arg() string { return "off|auto|N" }

// Choice is a string flag that takes one of a fixed list of values.
type Choice struct {
	p       *string
	choices []string
}

// NewChoice makes a Choice that stores into p.
func NewChoice(p *string, choices ...string) *Choice {
	return &Choice{p: p, choices: choices}
}

// String is the current value.
func (c *Choice) String() string {
	if c == nil || c.p == nil {
		return ""
	}
	return *c.p
}

// Set accepts one of the choices, exactly.
func (c *Choice) Set(s string) error {
	if !slices.Contains(c.choices, s) {
		return fmt.Errorf("want %s", orList(c.choices))
	}
	*c.p = s
	return nil
}

// Arg lists the choices in help.
func (c *Choice) Arg() string { return strings.Join(c.choices, "|") }

// orList spells a list as "a, b or c".
func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// IntValue is an int flag with bounds, checked when the flag is parsed.
type IntValue struct {
	p        *int
	min, max int
}

// IntVar defines an int flag on fs that accepts value >= min (and <= max
// when max > min).
func IntVar(fs *flag.FlagSet, p *int, name string, value, min, max int, usage string) {
	*p = value
	fs.Var(&IntValue{p: p, min: min, max: max}, name, usage)
}

// String is the current value.
func (v *IntValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

// Set accepts a decimal integer within the bounds.
func (v *IntValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < v.min || (v.max > v.min && n > v.max) {
		if v.max > v.min {
			return fmt.Errorf("want an integer from %d to %d", v.min, v.max)
		}
		return fmt.Errorf("want an integer >= %d", v.min)
	}
	*v.p = n
	return nil
}

// Arg names the flag's value in help.
func (*IntValue) Arg() string { return "n" }

// seedValue is -seed: any whole number that fits in 64 bits without a
// sign, refused in plain words otherwise (package flag says "parse error"
// for -1).
type seedValue struct{ p *uint64 }

// SeedVar defines a -seed flag on fs: value is the default, and any whole
// number from 0 to 2^64-1 is taken; -1 or 1.5 is refused in plain words.
func SeedVar(fs *flag.FlagSet, p *uint64, value uint64, usage string) {
	*p = value
	fs.Var(&seedValue{p}, "seed", usage)
}

func (v *seedValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p, 10)
}

func (v *seedValue) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number from 0 to %d (a seed has no sign; the same seed gives the same run)", uint64(math.MaxUint64))
	}
	*v.p = n
	return nil
}

// Arg names the flag's value in help.
func (*seedValue) Arg() string { return "n" }

// OptimizerName is the name of the optimiser a recipe trains with, as
// -optim takes it and the JSON summary reports it: the recipe's, and
// "sgd-nesterov" for SGD with Nesterov momentum.
func OptimizerName(r models.Recipe) string {
	if r.Optimizer == "sgd" && r.Nesterov {
		return "sgd-nesterov"
	}
	return r.Optimizer
}

// FloatValue is a float64 flag for a quantity the optimisers hold as a float32
// (a learning rate, a weight decay): it must be finite, positive (or, when
// zero is allowed, zero), and survive conversion to float32.
type FloatValue struct {
	p         *float64
	what      string // "learning rate"
	allowZero bool
}

// FloatVar defines a FloatValue flag on fs; what names the quantity in errors.
func FloatVar(fs *flag.FlagSet, p *float64, name string, value float64, what string, allowZero bool, usage string) {
	*p = value
	fs.Var(&FloatValue{p: p, what: what, allowZero: allowZero}, name, usage)
}

// String is the current value.
func (v *FloatValue) String() string {
	if v == nil || v.p == nil {
		return "0"
	}
	return strconv.FormatFloat(*v.p, 'g', -1, 64)
}

// Set accepts a number in range.
func (v *FloatValue) Set(s string) error {
	bound := "> 0"
	if v.allowZero {
		bound = ">= 0"
	}
	x, err := strconv.ParseFloat(s, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || (x == 0 && !v.allowZero) {
		return fmt.Errorf("want a finite %s %s", v.what, bound)
	}
	if f := float32(x); math.IsInf(float64(f), 0) || (x > 0 && f == 0) {
		return fmt.Errorf("want a finite %s %s within float32's range, which the optimisers compute in", v.what, bound)
	}
	*v.p = x
	return nil
}

// Arg names the flag's value in help.
func (*FloatValue) Arg() string { return "x" }

// WithDefaultText wraps a flag value so that help shows text as its default:
// for a flag whose default depends on another flag (the model's batch
// size), which a single value would misstate.
func WithDefaultText(v flag.Value, text string) flag.Value { return defaultText{v, text} }

type defaultText struct {
	flag.Value
	text string
}

func (d defaultText) DefaultText() string { return d.text }
func (d defaultText) Arg() string         { return argName(d.Value) }

// Flags are the options every training program takes (docs/design.md §5).
// Register defines them; after parsing, Resolve fills those the command
// line left out from the chosen model's recipe.
type Flags struct {
	Model      string
	Epochs     int
	Batch      int
	Accum      int // parts of each batch whose gradients add up before a step; 1: none
	LR         float64
	Seed       uint64
	AMP        AMP
	Checkpoint Checkpoint
	MemBudget  MemBudget
	Device     string
	Data       string
	MaxSteps   int
	JSON       bool
	Optimizer  string

	specs []models.Spec
}

// MaxBatch bounds -batch: larger batches than any data set here holds only
// exhaust memory.
const MaxBatch = 1 << 16

// Register defines the flags on fs. -model takes one of specs' names (the
// first is the default) and -optim one of optims (which must hold each
// model's OptimizerName); -epochs, -batch, -lr and
// -optim default to the chosen model's recipe, and help lists each model's
// value where the models differ. autoText says what -checkpoint auto means.
func (f *Flags) Register(fs *flag.FlagSet, specs []models.Spec, optims []string, autoText string) {
	if len(specs) == 0 || len(optims) == 0 {
		panic("cli.Flags.Register: need at least one model and one optimiser")
	}
	f.specs = specs
	var names []string
	for _, s := range specs {
		if !slices.Contains(optims, OptimizerName(s.Train)) {
			panic(fmt.Sprintf("cli.Flags.Register: model %s trains with %s, not among %v", s.Name, OptimizerName(s.Train), optims))
		}
		names = append(names, s.Name)
	}
	f.Model = specs[0].Name
	fs.Var(NewChoice(&f.Model, names...), "model", "the network to train")

	epochs := perModel(specs, func(s models.Spec) int { return s.Train.Epochs })
	f.Epochs = epochs.value
	fs.Var(epochs.wrap(&IntValue{p: &f.Epochs, min: 1}), "epochs", "passes over the training set")

	batch := perModel(specs, func(s models.Spec) int { return s.Batch })
	f.Batch = batch.value
	fs.Var(batch.wrap(&IntValue{p: &f.Batch, min: 1, max: MaxBatch}), "batch", "mini-batch size")
	f.Accum = 1
	fs.Var(&IntValue{p: &f.Accum, min: 1, max: MaxBatch}, "accum", "split each batch into this many parts whose gradients add up before the step\n"+
		"(gradient accumulation): the step of -batch samples in the memory of -batch/-accum")

	lr := perModel(specs, func(s models.Spec) float64 { return s.Train.LR })
	f.LR = lr.value
	fs.Var(lr.wrap(&FloatValue{p: &f.LR, what: "learning rate"}), "lr", "learning rate (the peak of the model's schedule)")

	opt := perModel(specs, func(s models.Spec) string { return OptimizerName(s.Train) })
	f.Optimizer = opt.value
	fs.Var(opt.wrap(NewChoice(&f.Optimizer, optims...)), "optim", "optimiser")

	SeedVar(fs, &f.Seed, 0, "random seed for initialisation, shuffling and dropout")
	fs.Var(&f.AMP, "amp", "mixed precision: autocast to f16 (with loss scaling) or bf16")
	fs.Var(&f.Checkpoint, "checkpoint", "gradient checkpointing: off, N segments, or auto ("+autoText+")")
	MemBudgetVar(fs, &f.MemBudget)
	f.Device = "auto"
	fs.Var(NewChoice(&f.Device, "auto", "cpu", "cuda"), "device", "backend: auto takes CUDA when a GPU opens, else the CPU")
	fs.StringVar(&f.Data, "data", "", "data `directory` (default $MIXPREC_DATA, else ./data)")
	fs.Var(&IntValue{p: &f.MaxSteps, min: 0}, "max-steps", "stop after this many training steps (0: no limit)")
	fs.BoolVar(&f.JSON, "json", false, "print a JSON summary as the last line of output")
}

// BatchText is -batch as a run's first line says it: "128", or "128 in 4
// parts" under -accum.
func (f *Flags) BatchText() string {
	if f.Accum > 1 {
		return fmt.Sprintf("%d in %d parts", f.Batch, f.Accum)
	}
	return fmt.Sprint(f.Batch)
}

// Settings are the flags' values by flag name ("-batch": "64"), as every
// rank of a data-parallel job must share them (distributed.AgreeSettings):
// the model, the schedule's inputs, the precision, the seed, the memory
// budget (every rank plans it, and takes rank 0's plan). -device, -data
// and -json may differ between ranks, and are not among them.
func (f *Flags) Settings() map[string]string {
	return map[string]string{"-model": f.Model, "-epochs": fmt.Sprint(f.Epochs), "-batch": fmt.Sprint(f.Batch),
		"-lr": fmt.Sprint(f.LR), "-optim": f.Optimizer, "-seed": fmt.Sprint(f.Seed), "-amp": f.AMP.String(),
		"-checkpoint": f.Checkpoint.String(), "-max-steps": fmt.Sprint(f.MaxSteps), "-accum": fmt.Sprint(f.Accum),
		"-mem-budget": f.MemBudget.Setting()}
}

// modelDefault is a flag's default over several models: the common value
// when they agree, else the zero value and a text listing them.
type modelDefault[T comparable] struct {
	value T
	text  string // "" when the models agree
}

func perModel[T comparable](specs []models.Spec, get func(models.Spec) T) modelDefault[T] {
	d := modelDefault[T]{value: get(specs[0])}
	var each []string
	same := true
	for _, s := range specs {
		v := get(s)
		same = same && v == d.value
		each = append(each, fmt.Sprintf("%s %v", s.Name, v))
	}
	if !same {
		var zero T
		d.value, d.text = zero, "per model: "+strings.Join(each, ", ")
	}
	return d
}

func (d modelDefault[T]) wrap(v flag.Value) flag.Value {
	if d.text == "" {
		return v
	}
	return WithDefaultText(v, d.text)
}

// Resolve fills the flags the command line did not give from the chosen
// model's recipe and returns the model's spec. fs.Visit tells which flags
// were given, so that no value has to stand for "unset".
func (f *Flags) Resolve(fs *flag.FlagSet) models.Spec {
	i := slices.IndexFunc(f.specs, func(s models.Spec) bool { return s.Name == f.Model })
	if i < 0 {
		panic(fmt.Sprintf("cli.Flags.Resolve: model %q is not registered", f.Model))
	}
	spec := f.specs[i]
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["epochs"] {
		f.Epochs = spec.Train.Epochs
	}
	if !set["batch"] {
		f.Batch = spec.Batch
	}
	if !set["lr"] {
		f.LR = spec.Train.LR
	}
	if !set["optim"] {
		f.Optimizer = OptimizerName(spec.Train)
	}
	return spec
}
