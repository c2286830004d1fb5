package train

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/runstate"
	"github.com/mixprec/mixprec/tensor"
)

// TestGuardStopsOverBudget plans a step, takes it within the plan, then
// takes one that allocates more than the plan allowed: the guard lets the
// first pass and stops the second with a *cli.OverBudget whose checkpoint
// resumes, in -save's directory or, without -save, in a new directory in
// the working directory.
func TestGuardStopsOverBudget(t *testing.T) {
	for _, withSave := range []bool{true, false} {
		t.Run(map[bool]string{true: "save", false: "no save"}[withSave], func(t *testing.T) {
			t.Chdir(t.TempDir())
			dev := cpu.New()
			rng := rand.New(rand.NewPCG(5, 5))
			net := models.DeepMLP(rng, 32, 64, 4, 10, 0.1)
			nn.To(net, dev)
			defer nn.Release(net)
			opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
			defer optim.Release(opt)
			scaler := amp.NewGradScaler(amp.For(dtype.F32))
			x := tensor.NormalHost(rng, 0, 1, 128, 32)
			y := make([]int32, 128)
			step := Step{Dev: dev, Net: net, Opt: opt, Scaler: scaler, Low: dtype.F32}
			var stderr bytes.Buffer
			var b cli.MemBudget
			if err := b.Set("0.8x"); err != nil {
				t.Fatal(err)
			}
			plan, err := PlanBudget("test", &stderr, b, dev, net, opt, false, func(g *autograd.Graph) *autograd.Var { return step.Loss(g, x, y) })
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stderr.String(), "memory plan for a budget of") {
				t.Errorf("the plan was not printed: %q", stderr.String())
			}
			var flags cli.StateFlags
			if withSave {
				flags.Save = "runs"
			}
			run := runstate.Run{Model: net, Optimizer: opt, Scaler: scaler, Config: map[string]string{"program": "test"}, Extent: runstate.Extent{Steps: 10}}
			saver, err := NewSaver("test", flags, run, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			defer saver.Close()
			guard := NewGuard(dev, plan, saver)
			if _, err := step.Run(x, y); err != nil {
				t.Fatal(err)
			}
			if err := guard.AfterStep(runstate.Position{Step: 1, Batch: 1}); err != nil {
				t.Fatalf("a planned step: %v", err)
			}
			if _, err := step.Run(x, y); err != nil {
				t.Fatal(err)
			}
			extra := tensor.New(dev, dtype.F32, device.Temp, int(plan.Budget/4)) // as if the step had held it
			extra.Release()
			err = guard.AfterStep(runstate.Position{Step: 2, Batch: 2})
			var over *cli.OverBudget
			if !errors.As(err, &over) || over.Step != 2 || over.Peak <= plan.Budget || over.Budget != plan.Budget {
				t.Fatalf("a step over the budget: %v; want a *cli.OverBudget for step 2", err)
			}
			if withSave && over.Saved != "runs" {
				t.Errorf("saved in %s; want -save's runs", over.Saved)
			}
			if !withSave && !strings.HasPrefix(filepath.Base(over.Saved), "test-stopped-") {
				t.Errorf("saved in %s; want a new test-stopped-* directory", over.Saved)
			}
			if _, err := os.Stat(over.Saved); err != nil {
				t.Fatal(err)
			}
			_, pos, _, err := runstate.LoadNewest(over.Saved, run)
			if err != nil || pos.Step != 2 {
				t.Errorf("resuming from %s: step %d, %v; want step 2", over.Saved, pos.Step, err)
			}
		})
	}
}

// TestGuardNil: without a budget there is no plan and no guard, and the
// guard's methods do nothing.
func TestGuardNil(t *testing.T) {
	pl, err := PlanBudget("test", nil, cli.MemBudget{}, nil, nil, nil, false, nil)
	if pl != nil || err != nil {
		t.Fatalf("PlanBudget without a budget = %v, %v", pl, err)
	}
	g := NewGuard(nil, nil, nil)
	if g != nil || g.AfterStep(runstate.Position{Step: 1}) != nil || g.Peak() != 0 {
		t.Errorf("a nil guard did something")
	}
}

// TestMaxPeakAtPeak checks that MaxPeak keeps the breakdown of the larger
// total peak, the earlier one on a tie.
func TestMaxPeakAtPeak(t *testing.T) {
	stretch := func(total, param int64) device.MemStats {
		var s device.MemStats
		s.Peak.Total, s.AtPeak.Total = total, total
		s.Peak.ByCategory[device.Param], s.AtPeak.ByCategory[device.Param] = param, param
		s.AtPeak.ByCategory[device.Temp] = total - param
		return s
	}
	a, b := stretch(100, 60), stretch(150, 20)
	if got := MaxPeak(a, b); got.Peak.Total != 150 || got.AtPeak != b.AtPeak || got.Peak.ByCategory[device.Param] != 60 {
		t.Errorf("MaxPeak(100, 150) = peak %+v at %+v; want total 150 made of b's, param's own peak 60", got.Peak, got.AtPeak)
	}
	if got := MaxPeak(b, a); got.AtPeak != b.AtPeak {
		t.Errorf("MaxPeak(150, 100) at %+v; want b's", got.AtPeak)
	}
	if got := MaxPeak(a, stretch(100, 10)); got.AtPeak != a.AtPeak {
		t.Errorf("MaxPeak on a tie at %+v; want the first's", got.AtPeak)
	}
}

// peerComm is rank 0 of two whose other rank has the loss 3 at every step
// and received SIGTERM before the collective in which received says so:
// its all-reduce adds that rank's part (Saver.exchange's layout: the loss,
// then a slot for each of cli.StopSignals).
type peerComm struct {
	dev        device.Device
	reduces    int // all-reduces so far
	signalFrom int // the all-reduce from which the peer has its signal
	barriers   int
}

func (c *peerComm) Rank() int { return 0 }
func (c *peerComm) Size() int { return 2 }
func (c *peerComm) AllReduce(b device.Buffer, op device.ReduceOp) error {
	c.reduces++
	v := make([]float32, b.Len())
	c.dev.CopyToHost(v, b)
	v[0] += 3
	if c.reduces >= c.signalFrom {
		v[2]++ // cli.StopSignals[1], SIGTERM
	}
	c.dev.CopyFromHost(b, v)
	return nil
}
func (c *peerComm) Broadcast(device.Buffer, int) error { return nil }
func (c *peerComm) Barrier() error                     { c.barriers++; return nil }
func (c *peerComm) Abort(reason error)                 { panic(reason) }
func (c *peerComm) Close() error                       { return nil }

// TestSaverStopsTogether: under Together, StepLoss gives the ranks' mean
// loss, and a rank that received no signal stops, saves and returns the
// *cli.Interrupted of the signal another rank received, at the step at
// which that rank learned of it, and waits for every rank before it
// returns; the step before goes on. StepLoss and AfterStep share one
// collective a step; AfterStep alone makes its own.
func TestSaverStopsTogether(t *testing.T) {
	dev := cpu.New()
	dir := filepath.Join(t.TempDir(), "run")
	net := models.MLP(rand.New(rand.NewPCG(1, 1)), 4, 3)
	nn.To(net, dev)
	defer nn.Release(net)
	opt := optim.NewSGD(net.Params(), optim.LR(0.1))
	defer optim.Release(opt)
	run := runstate.Run{Model: net, Optimizer: opt, Scaler: amp.NewGradScaler(amp.For(dtype.F32)), Config: map[string]string{"program": "test"}, Extent: runstate.Extent{Steps: 10}}
	var stderr bytes.Buffer
	saver, err := NewSaver("test", cli.StateFlags{Save: dir}, run, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer saver.Close()
	comm := &peerComm{dev: dev, signalFrom: 3}
	saver.Together(comm, dev)
	if mean, err := saver.StepLoss(1); err != nil || mean != 2 {
		t.Fatalf("step 1: StepLoss(1) with the other rank at 3 = %v, %v; want 2", mean, err)
	}
	if err := saver.AfterStep(runstate.Position{Step: 1, Batch: 1}); err != nil || comm.barriers != 0 || comm.reduces != 1 {
		t.Fatalf("step 1, no rank signalled: %v, %d barriers, %d all-reduces; want nil, 0, 1", err, comm.barriers, comm.reduces)
	}
	if err := saver.AfterStep(runstate.Position{Step: 2, Batch: 2}); err != nil || comm.reduces != 2 {
		t.Fatalf("step 2, no rank signalled yet: %v after %d all-reduces; want nil after 2", err, comm.reduces)
	}
	err = saver.AfterStep(runstate.Position{Step: 3, Batch: 3})
	var in *cli.Interrupted
	if !errors.As(err, &in) || in.Signal != cli.StopSignals[1] || in.Step != 3 || in.Saved == "" {
		t.Fatalf("step 3, the other rank signalled: %v; want a *cli.Interrupted by SIGTERM after step 3 with a checkpoint", err)
	}
	if comm.barriers != 1 {
		t.Errorf("%d barriers after stopping; want 1, so that no rank ends before the checkpoint is written", comm.barriers)
	}
	if _, pos, _, err := runstate.LoadNewest(dir, run); err != nil || pos.Step != 3 {
		t.Errorf("resuming: step %d, %v; want step 3", pos.Step, err)
	}
}
