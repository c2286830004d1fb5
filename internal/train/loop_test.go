package train

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
	"github.com/mixprec/mixprec/runstate"
)

// newStep is a small MLP's training step on dev, with SGD at lr; release
// frees it.
func newStep(dev device.Device, low dtype.DType, lr float32) (step *Step, release func()) {
	net := models.MLP(rand.New(rand.NewPCG(1, 2)), 12, 16, 5)
	nn.To(net, dev)
	opt := optim.NewSGD(net.Params(), optim.LR(lr), optim.Momentum(0.9))
	step = &Step{Dev: dev, Net: net, Opt: opt, Scaler: amp.NewGradScaler(amp.For(low)), Low: low}
	return step, func() { optim.Release(opt); nn.Release(net) }
}

// TestRunBatchMatchesRun: a step on the bits the loader rounded a batch to
// (datasets.Bits with the step's InputDType) trains bit for bit as a step
// on the F32 batch, which the step casts itself.
func TestRunBatchMatchesRun(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, low := range dtype.All {
			t.Run(low.String(), func(t *testing.T) {
				a, releaseA := newStep(dev, low, 0.1)
				defer releaseA()
				b, releaseB := newStep(dev, low, 0.1)
				defer releaseB()
				data := datasets.Synthetic(32, []int{12}, 5, 7)
				plain := datasets.Batches(data, 8, datasets.Shuffle(3))
				rounded := datasets.Batches(data, 8, datasets.Shuffle(3), datasets.Bits(b.InputDType()))
				next, stop := iter.Pull(rounded)
				defer stop()
				i := 0
				for x := range plain {
					rb, ok := next()
					if !ok {
						t.Fatal("the rounded batches ended first")
					}
					want, err := a.Run(x.X, x.Y)
					if err != nil {
						t.Fatal(err)
					}
					got, err := b.RunBatch(rb)
					if err != nil {
						t.Fatal(err)
					}
					if math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("step %d: loss %v on the loader's bits, %v on the F32 batch", i, got, want)
					}
					i++
				}
				if i != 4 {
					t.Fatalf("%d steps, want 4", i)
				}
			})
		}
	})
}

// TestAccum: a step whose batch is split into parts (Step.Accum), F32 or
// 16-bit, uneven parts included, trains as the step on the whole batch to
// float rounding: the same loss, the same weights after 4 steps. The parts'
// inputs are the loader's bits under autocast, as RunBatch takes them.
func TestAccum(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, low := range dtype.All {
			for _, parts := range []int{2, 3} {
				t.Run(fmt.Sprintf("%v/%d", low, parts), func(t *testing.T) {
					whole, releaseW := newStep(dev, low, 0.1)
					defer releaseW()
					split, releaseS := newStep(dev, low, 0.1)
					defer releaseS()
					split.Accum = parts
					tol := 1e-5
					if low != dtype.F32 {
						tol = 2e-3 // the parts' weight gradients are rounded to low apart
					}
					data := datasets.Synthetic(32, []int{12}, 5, 7)
					for b := range datasets.Batches(data, 8, datasets.Shuffle(3), datasets.Bits(whole.InputDType())) {
						want, err := whole.RunBatch(b)
						if err != nil {
							t.Fatal(err)
						}
						got, err := split.RunBatch(b)
						if err != nil {
							t.Fatal(err)
						}
						if math.Abs(got-want) > tol*math.Abs(want) {
							t.Fatalf("batch %d: loss %v in %d parts, %v whole", b.Index, got, parts, want)
						}
					}
					pw, ps := whole.Net.Params(), split.Net.Params()
					for i := range pw {
						a, b := pw[i].Value.ToHost(), ps[i].Value.ToHost()
						for j := range a {
							if math.Abs(float64(a[j]-b[j])) > tol*(1+math.Abs(float64(a[j]))) {
								t.Fatalf("parameter %d[%d]: %v after 4 steps in %d parts, %v whole", i, j, b[j], parts, a[j])
							}
						}
					}
				})
			}
		}
	})
}

// loopFor is a Loop over 40 random samples of 12 values (5 batches of 8
// an epoch) with the flags f, printing on stdout.
func loopFor(t *testing.T, dev device.Device, f *cli.Flags, stdout io.Writer) (*Loop, func()) {
	t.Helper()
	step, release := newStep(dev, f.AMP.DType(), float32(f.LR))
	env := &Env{Prog: "test", Dev: dev, Ranks: 1, Stdout: stdout, Stderr: io.Discard}
	saver, err := NewSaver("test", cli.StateFlags{}, runstate.Run{Model: step.Net, Optimizer: step.Opt.(optim.Stateful), Scaler: step.Scaler}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := NewRecorder(cli.ProfileFlags{}, dev, profile.RunInfo{})
	if err != nil {
		t.Fatal(err)
	}
	l := &Loop{Env: env, Flags: f, Step: step, Train: datasets.Synthetic(40, []int{12}, 5, 1), Test: datasets.Synthetic(10, []int{12}, 5, 2),
		Load: []datasets.Option{datasets.Shuffle(f.Seed)}, EvalBatch: 4, Data: "synthetic", Saver: saver, Rec: rec}
	return l, func() { rec.Close(); saver.Close(); release() }
}

// TestLoop: the loop stops at -max-steps within an epoch, evaluates after
// each epoch it trained in, and counts what the summary reports; a loss
// that becomes infinite stops it at that step, with no accuracy, and the
// program's error is the divergence.
func TestLoop(t *testing.T) {
	dev := testdev.Devices()[0]
	for _, c := range []struct {
		name               string
		lr                 float64
		maxSteps           int
		wantSteps, wantOut int // steps, and epoch lines printed
		diverges           bool
	}{
		{"max-steps", 0.05, 7, 7, 2, false},
		{"epochs", 0.05, 0, 15, 3, false},
		{"diverges", 1e30, 0, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			f := &cli.Flags{Model: "mlp", Epochs: 3, Batch: 8, LR: c.lr, MaxSteps: c.maxSteps, Seed: 4}
			l, release := loopFor(t, dev, f, &out)
			defer release()
			if ext := l.Extent(); ext.PerEpoch != 5 || ext.Epochs != 3 {
				t.Fatalf("extent %+v; want 5 batches an epoch, 3 epochs", ext)
			}
			res, err := l.Run(runstate.Position{})
			if err != nil {
				t.Fatal(err)
			}
			if c.diverges {
				var d *cli.Diverged
				if !errors.As(res.Err(), &d) || res.Steps != d.Step || !math.IsNaN(res.Accuracy) || strings.Contains(out.String(), "epoch") {
					t.Fatalf("result %+v, error %v, output %q; want a divergence at the last step, no accuracy and no epoch line", res, res.Err(), out.String())
				}
				return
			}
			if res.Steps != c.wantSteps || res.Done != c.wantSteps || res.Samples != 8*c.wantSteps || res.Err() != nil {
				t.Errorf("steps %d, done %d, samples %d, error %v; want %d steps of 8 samples, no error", res.Steps, res.Done, res.Samples, res.Err(), c.wantSteps)
			}
			if !(res.Accuracy >= 0 && res.Accuracy <= 1) || math.IsNaN(res.Loss) || res.Peak.Peak.Total == 0 {
				t.Errorf("accuracy %v, loss %v, peak %d; want a measured accuracy, loss and peak", res.Accuracy, res.Loss, res.Peak.Peak.Total)
			}
			if got := strings.Count(out.String(), "test accuracy"); got != c.wantOut {
				t.Errorf("%d epoch lines, want %d:\n%s", got, c.wantOut, out.String())
			}
			for i := 1; i <= c.wantOut; i++ {
				if !strings.Contains(out.String(), fmt.Sprintf("epoch %d: train loss", i)) {
					t.Errorf("no line for epoch %d:\n%s", i, out.String())
				}
			}
		})
	}
}
