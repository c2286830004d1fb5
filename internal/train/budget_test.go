package train

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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

// budgetStep is an F32 step of a small MLP with dropout on dev, released
// when t ends, and a batch for it.
func budgetStep(t *testing.T, dev device.Device) (step *Step, opt optim.Stateful, x tensor.Host, y []int32) {
	rng := rand.New(rand.NewPCG(5, 5))
	net := models.DeepMLP(rng, 32, 64, 4, 10, 0.1)
	nn.To(net, dev)
	t.Cleanup(func() { nn.Release(net) })
	opt = optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
	t.Cleanup(func() { optim.Release(opt) })
	step = &Step{Dev: dev, Net: net, Opt: opt, Scaler: amp.NewGradScaler(amp.For(dtype.F32)), Low: dtype.F32}
	return step, opt, tensor.NormalHost(rng, 0, 1, 128, 32), make([]int32, 128)
}

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
			step, opt, x, y := budgetStep(t, dev)
			net, scaler := step.Net, step.Scaler
			var stderr bytes.Buffer
			var b cli.MemBudget
			if err := b.Set("0.8x"); err != nil {
				t.Fatal(err)
			}
			env := &Env{Prog: "test", Dev: dev, Stderr: &stderr, Ranks: 1}
			plan, err := env.PlanBudget(b, net, opt, false, func(g *autograd.Graph) *autograd.Var { return step.Loss(g, x, y) }, nil)
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
	pl, err := (&Env{Prog: "test", Ranks: 1}).PlanBudget(cli.MemBudget{}, nil, nil, false, nil, nil)
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

// peerComm is one rank of two, rank 0 unless rank says otherwise, whose
// all-reduces add the other rank's part, as peer gives it for the
// all-reduce numbered from 1.
type peerComm struct {
	dev      device.Device
	rank     int
	peer     func(v []float32, reduce int)
	reduces  int // all-reduces so far
	barriers int
}

// signalledPeer is a rank 0's other rank with the loss 3 at every step
// that received SIGTERM before all-reduce from (Saver.exchange's layout:
// the loss, then a slot for each of cli.StopSignals).
func signalledPeer(from int) func(v []float32, reduce int) {
	return func(v []float32, reduce int) {
		v[0] += 3
		if reduce >= from {
			v[2]++ // cli.StopSignals[1], SIGTERM
		}
	}
}

func (c *peerComm) Rank() int { return c.rank }
func (c *peerComm) Size() int { return 2 }
func (c *peerComm) AllReduce(b device.Buffer, op device.ReduceOp) error {
	c.reduces++
	v := make([]float32, b.Len())
	c.dev.CopyToHost(v, b)
	c.peer(v, c.reduces)
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
	comm := &peerComm{dev: dev, peer: signalledPeer(3)}
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

// TestPlanBudgetRankZero: under -dist a rank runs rank 0's choice of what
// to recompute, whatever its own dry steps chose: here rank 0 recomputes
// the first two units as one span and the fourth alone, which this rank's
// planner would not choose at a budget the unplanned step fits. And a
// rank other than 0 stopped over its budget writes no checkpoint but
// waits for rank 0's. Where another rank found no plan, every rank stops
// with a usage error, rank 0 alone saying so.
func TestPlanBudgetRankZero(t *testing.T) {
	t.Chdir(t.TempDir())
	dev := cpu.New()
	step, opt, x, y := budgetStep(t, dev)
	net := step.Net
	n := len(net.Units())
	zero := make([]float32, 2+n) // rankZerosPlan's layout: no-plan count, chunk cap, span ends
	zero[2+0], zero[2+3] = 2, 4  // spans [0, 2) and [3, 4)
	comm := &peerComm{dev: dev, rank: 1, peer: func(v []float32, _ int) {
		for i := range v {
			v[i] += zero[i]
		}
	}}
	var stderr bytes.Buffer
	env := &Env{Prog: "test", Dev: dev, Stderr: &stderr, Comm: comm, Rank: 1, Ranks: 2}
	var b cli.MemBudget
	if err := b.Set("1GiB"); err != nil {
		t.Fatal(err)
	}
	pl, err := env.PlanBudget(b, net, opt, false, func(g *autograd.Graph) *autograd.Var { return step.Loss(g, x, y) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []nn.Span{{Lo: 0, Hi: 2}, {Lo: 3, Hi: 4}}; !slices.Equal(pl.Spans, want) || pl.Peak > pl.Budget {
		t.Errorf("rank 1's plan %v, peak %d of %d; want rank 0's %v", pl.Spans, pl.Peak, pl.Budget, want)
	}
	noPlan := func(v []float32, _ int) { v[0]++ }
	for rank := range 2 {
		env := &Env{Prog: "test", Dev: dev, Stderr: &stderr, Comm: &peerComm{dev: dev, rank: rank, peer: noPlan}, Rank: rank, Ranks: 2}
		_, err := env.PlanBudget(b, net, opt, false, func(g *autograd.Graph) *autograd.Var { return step.Loss(g, x, y) }, nil)
		var u *cli.UsageError
		var q *cli.Quiet
		if !errors.As(err, &u) || errors.As(err, &q) != (rank != 0) || !strings.Contains(err.Error(), "1 of the 2 ranks found no plan") {
			t.Errorf("rank %d, the other rank without a plan: %v; want a usage error naming it, quiet on rank 1", rank, err)
		}
	}
	run := runstate.Run{Model: net, Optimizer: opt, Scaler: step.Scaler, Config: map[string]string{"program": "test"}, Extent: runstate.Extent{Steps: 10}}
	saver, err := NewSaver("test", cli.StateFlags{}, run, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer saver.Close()
	saver.Together(comm, dev)
	dir, err := saver.SaveNow(runstate.Position{Step: 1, Batch: 1})
	if entries, _ := os.ReadDir("."); dir != "" || err != nil || len(entries) != 0 || comm.barriers != 1 {
		t.Errorf("rank 1 stopped: saved %q (%v), %d entries in the working directory, %d barriers; want nothing written and 1 barrier", dir, err, len(entries), comm.barriers)
	}
}
