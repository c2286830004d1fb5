// Package peer is what mixprec's Go benchmark peers share
// (tools/gopeers/gorgonia, tools/gopeers/gomlx): the MNIST MLP workload of
// examples/mnist (784-256-128-10 with ReLU, SGD with momentum 0.9, lr
// 0.05, batch 128, PyTorch's default initialisation, a fresh shuffle each
// epoch) as flags, data, the epoch loop and the JSON summary, so that a
// peer writes only what its framework does: a training step and an
// evaluation. Each peer is a module of its own, so that mixprec's module
// depends on neither framework; this module depends on nothing.
package peer

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"
)

// Main runs a peer's run with the command line and exits: 1, with one line
// naming the peer, when it fails; 0 when it succeeds or prints its help.
func Main(name string, run func(args []string, stdout, stderr io.Writer) error) {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
		os.Exit(1)
	}
}

// Flags are a peer's options, the recipe's by default.
type Flags struct {
	Data         string // holds mnist/ (the four IDX .gz files)
	Epochs       int
	Batch        int
	LR, Momentum float64
	Seed         uint64
	MaxSteps     int // 0: whole epochs
	JSON         bool
}

// ParseFlags parses args for the peer name, with help and errors on
// stderr.
func ParseFlags(name string, args []string, stderr io.Writer) (Flags, error) {
	var f Flags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.Data, "data", os.Getenv("MIXPREC_DATA"), "data directory holding mnist/ (the four IDX .gz files)")
	fs.IntVar(&f.Epochs, "epochs", 1, "epochs")
	fs.IntVar(&f.Batch, "batch", 128, "batch size")
	fs.Float64Var(&f.LR, "lr", 0.05, "learning rate")
	fs.Float64Var(&f.Momentum, "momentum", 0.9, "SGD momentum")
	fs.Uint64Var(&f.Seed, "seed", 1, "random seed (initialisation and shuffling)")
	fs.IntVar(&f.MaxSteps, "max-steps", 0, "stop after this many steps (0: whole epochs)")
	fs.BoolVar(&f.JSON, "json", false, "print one JSON summary line")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.Data == "" {
		f.Data = "data"
	}
	if f.Batch < 1 || f.Epochs < 1 || f.MaxSteps < 0 {
		return f, fmt.Errorf("-batch %d, -epochs %d, -max-steps %d: want batch and epochs >= 1, max-steps >= 0", f.Batch, f.Epochs, f.MaxSteps)
	}
	return f, nil
}

// Load reads MNIST's training and test sets from the data directory.
func (f Flags) Load() (train, test *MNIST, err error) {
	dir := filepath.Join(f.Data, "mnist")
	if train, err = LoadMNIST(dir, "train"); err != nil {
		return nil, nil, err
	}
	if test, err = LoadMNIST(dir, "t10k"); err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// Logger prints a line on stdout unless -json asked for the summary alone.
func (f Flags) Logger(stdout io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if !f.JSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
}

// Init draws an MLP's initial values as PyTorch's nn.Linear does: for each
// layer from sizes[i] to sizes[i+1], its weight ws[i] (in, out), so that
// a layer is x·W + b, then its bias bs[i], uniform in ±1/√fan_in.
func Init(rng *rand.Rand, sizes ...int) (ws, bs [][]float32) {
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		bound := float32(1 / math.Sqrt(float64(in)))
		uniform := func(n int) []float32 {
			v := make([]float32, n)
			for j := range v {
				v[j] = bound * (2*rng.Float32() - 1)
			}
			return v
		}
		ws = append(ws, uniform(in*out))
		bs = append(bs, uniform(out))
	}
	return ws, bs
}

// Summary is the JSON line mixprec's examples print, less what a peer
// cannot measure (peak bytes per category).
type Summary struct {
	Model         string  `json:"model"`
	Device        string  `json:"device"`
	AMP           string  `json:"amp"`
	Framework     string  `json:"framework"`
	Epochs        int     `json:"epochs"`
	Steps         int     `json:"steps"`
	Batch         int     `json:"batch"`
	LR            float64 `json:"lr"`
	TrainLoss     float64 `json:"train_loss"`
	TestAccuracy  float64 `json:"test_accuracy"`
	SamplesPerSec float64 `json:"samples_per_sec"`
	MsPerStep     float64 `json:"ms_per_step"`
	WallSeconds   float64 `json:"wall_seconds"`
}

// Train runs the recipe's epochs over train, shuffled by rng at the start
// of each, until -max-steps: step trains on the samples idx and returns
// their loss, and accuracy evaluates the test set after each epoch. The
// timed part is the steps alone, as in mixprec's examples. It returns the
// summary of the run, for framework.
func Train(f Flags, framework string, train *MNIST, rng *rand.Rand, step func(idx []int) (float64, error),
	accuracy func() (float64, error), log func(format string, a ...any)) (Summary, error) {
	s := Summary{Model: "mlp", Device: "cpu", AMP: "off", Framework: framework, Epochs: f.Epochs, Batch: f.Batch, LR: f.LR}
	samples, trainTime := 0, 0.0
	wall := time.Now()
	order := make([]int, train.N)
	for i := range order {
		order[i] = i
	}
	done := func() bool { return f.MaxSteps > 0 && s.Steps >= f.MaxSteps }
	for epoch := range f.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		start := time.Now()
		sum, nb := 0.0, 0
		for lo := 0; lo < train.N && !done(); lo += f.Batch {
			idx := order[lo:min(lo+f.Batch, train.N)]
			loss, err := step(idx)
			if err != nil {
				return s, err
			}
			sum, nb = sum+loss, nb+1
			s.Steps++
			samples += len(idx)
		}
		trainTime += time.Since(start).Seconds()
		s.TrainLoss = sum / float64(max(nb, 1))
		var err error
		if s.TestAccuracy, err = accuracy(); err != nil {
			return s, err
		}
		log("epoch %d: train loss %.4f, test accuracy %.2f%%, %.0f samples/s", epoch+1, s.TrainLoss, 100*s.TestAccuracy, float64(samples)/trainTime)
		if done() {
			break
		}
	}
	s.SamplesPerSec, s.MsPerStep = float64(samples)/trainTime, 1000*trainTime/float64(max(s.Steps, 1))
	s.WallSeconds = time.Since(wall).Seconds()
	return s, nil
}

// Report prints s as the last line of stdout with -json.
func (f Flags) Report(stdout io.Writer, s Summary) error {
	if !f.JSON {
		return nil
	}
	return json.NewEncoder(stdout).Encode(s)
}

// Version is the version of module path linked into this binary.
func Version(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "(unknown version)"
}
