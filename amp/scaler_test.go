package amp_test

import (
	"errors"
	"github.com/mixprec/mixprec/internal/testdev"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// fakeOpt counts steps and holds parameters whose gradients the test sets.
type fakeOpt struct {
	params []*autograd.Var
	steps  int
}

func (o *fakeOpt) Params() []*autograd.Var { return o.params }
func (o *fakeOpt) Step()                   { o.steps++ }

func setGrad(dev device.Device, p *autograd.Var, vals ...float32) {
	p.FreeGrad()
	p.Grad = tensor.FromSlice(dev, dtype.F32, device.Grad, vals, len(vals))
}

// TestScalerTrajectory drives the scaler through sequences of clean and
// overflowing steps and checks the scale and growth tracker after each.
func TestScalerTrajectory(t *testing.T) {
	type point struct {
		scale   float32
		tracker int
	}
	cases := []struct {
		name     string
		opts     []amp.ScalerOption
		overflow []bool
		want     []point
	}{
		{"defaults: clean steps count up", nil, []bool{false, false, false},
			[]point{{65536, 1}, {65536, 2}, {65536, 3}}},
		{"overflow halves and resets the tracker", []amp.ScalerOption{amp.GrowthInterval(3)},
			[]bool{false, false, true, false},
			[]point{{65536, 1}, {65536, 2}, {32768, 0}, {32768, 1}}},
		{"growth after the interval", []amp.ScalerOption{amp.GrowthInterval(2)},
			[]bool{false, false, false, false, true, true},
			[]point{{65536, 1}, {131072, 0}, {131072, 1}, {262144, 0}, {131072, 0}, {65536, 0}}},
		{"custom factors", []amp.ScalerOption{amp.InitScale(8), amp.GrowthFactor(4), amp.BackoffFactor(0.25), amp.GrowthInterval(1)},
			[]bool{false, true, true, false},
			[]point{{32, 0}, {8, 0}, {2, 0}, {8, 0}}},
		{"never grows to infinity", []amp.ScalerOption{amp.InitScale(math.MaxFloat32 / 1.5), amp.GrowthInterval(1)},
			[]bool{false, false},
			[]point{{math.MaxFloat32 / 1.5, 0}, {math.MaxFloat32 / 1.5, 0}}},
		{"repeated overflow keeps halving", []amp.ScalerOption{amp.InitScale(1 << 24)},
			[]bool{true, true, true},
			[]point{{1 << 23, 0}, {1 << 22, 0}, {1 << 21, 0}}},
	}
	dev := cpu.New()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := amp.NewGradScaler(c.opts...)
			p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 2))
			opt := &fakeOpt{params: []*autograd.Var{p}}
			wantSteps := 0
			for i, inf := range c.overflow {
				v := float32(1)
				if inf {
					v = float32(math.Inf(1))
				} else {
					wantSteps++
				}
				setGrad(dev, p, v, 2)
				stepped, err := s.Step(opt)
				if err != nil || stepped == inf {
					t.Fatalf("step %d: Step = %v, %v; want stepped %v", i, stepped, err, !inf)
				}
				if err := s.Update(); err != nil {
					t.Fatal(err)
				}
				if got := (point{s.LossScale(), s.GrowthTracker()}); got != c.want[i] {
					t.Errorf("after step %d (overflow %v): scale %v tracker %d, want scale %v tracker %d",
						i, inf, got.scale, got.tracker, c.want[i].scale, c.want[i].tracker)
				}
			}
			if opt.steps != wantSteps {
				t.Errorf("optimizer stepped %d times, want %d", opt.steps, wantSteps)
			}
		})
	}
}

// TestNonFiniteLeavesStateUnchanged injects an Inf and then a NaN gradient
// into a real SGD-with-momentum and Adam run and checks that parameters and
// optimizer state are bitwise unchanged and the scale halves.
func TestNonFiniteLeavesStateUnchanged(t *testing.T) {
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		for _, name := range []string{"sgd", "adam"} {
			t.Run(name, func(t *testing.T) {
				dev := cpu.New()
				rng := rand.New(rand.NewPCG(5, 5))
				p := autograd.ParamOf("p", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 6))
				q := autograd.ParamOf("q", tensor.Uniform(dev, dtype.F32, device.Param, rng, -1, 1, 3))
				params := []*autograd.Var{p, q}
				var opt optim.Optimizer
				var state func() [][]float32
				if name == "sgd" {
					o := optim.NewSGD(params, optim.LR(0.1), optim.Momentum(0.9))
					opt, state = o, func() [][]float32 { return hosts(o.State()) }
				} else {
					o := optim.NewAdam(params, optim.LR(0.1))
					opt, state = o, func() [][]float32 { m, v := o.State(); return append(hosts(m), hosts(v)...) }
				}
				s := amp.NewGradScaler()
				// One clean step so that optimizer state exists.
				setGrad(dev, p, 1, 2, 3, 4, 5, 6)
				setGrad(dev, q, 1, 1, 1)
				if _, err := s.Step(opt); err != nil {
					t.Fatal(err)
				}
				if err := s.Update(); err != nil {
					t.Fatal(err)
				}
				before := append([][]float32{p.Value.ToHost(), q.Value.ToHost()}, state()...)
				scale := s.LossScale()
				setGrad(dev, p, 1, 2, 3, 4, 5, 6)
				setGrad(dev, q, 1, bad, 1) // only one element of one parameter
				stepped, err := s.Step(opt)
				if err != nil || stepped {
					t.Fatalf("Step with a %v gradient = %v, %v; want skipped", bad, stepped, err)
				}
				if err := s.Update(); err != nil {
					t.Fatal(err)
				}
				after := append([][]float32{p.Value.ToHost(), q.Value.ToHost()}, state()...)
				for i := range before {
					if !bitsEqual(before[i], after[i]) {
						t.Errorf("tensor %d changed by a skipped step: %v -> %v", i, before[i], after[i])
					}
				}
				if got := s.LossScale(); got != scale/2 {
					t.Errorf("scale %v after overflow, want %v", got, scale/2)
				}
				if s.Skipped() != 1 {
					t.Errorf("Skipped() = %d, want 1", s.Skipped())
				}
			})
		}
	}
}

func hosts(ts []*tensor.Tensor) [][]float32 {
	var out [][]float32
	for _, x := range ts {
		out = append(out, x.ToHost())
	}
	return out
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestUnscaleMultipliesByReciprocal checks the unscaled values and that
// Step after Unscale does not unscale twice, so clipping can go between.
func TestUnscaleThenClipThenStep(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 2))
		opt := optim.NewSGD([]*autograd.Var{p}, optim.LR(1))
		s := amp.NewGradScaler(amp.InitScale(1024))
		setGrad(dev, p, 3*1024, 4*1024) // unscaled norm 5
		if err := s.Unscale(opt); err != nil {
			t.Fatal(err)
		}
		if got := p.Grad.ToHost(); got[0] != 3 || got[1] != 4 {
			t.Fatalf("unscaled gradient %v, want [3 4]", got)
		}
		if norm := optim.ClipGradNorm(opt.Params(), 1); math.Abs(norm-5) > 1e-6 {
			t.Errorf("norm before clipping %v, want 5", norm)
		}
		if stepped, err := s.Step(opt); err != nil || !stepped {
			t.Fatalf("Step = %v, %v", stepped, err)
		}
		if got := p.Value.ToHost(); math.Abs(float64(got[0]+0.6)) > 1e-6 || math.Abs(float64(got[1]+0.8)) > 1e-6 {
			t.Errorf("parameters after clipped step %v, want [-0.6 -0.8]", got)
		}
	})
}

// TestMisuse checks the errors PyTorch raises as RuntimeError.
func TestMisuse(t *testing.T) {
	dev := cpu.New()
	p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 2))
	opt := &fakeOpt{params: []*autograd.Var{p}}
	setGrad(dev, p, 1, 1)
	s := amp.NewGradScaler()
	if err := s.Update(); err == nil {
		t.Error("Update with no inf checks recorded: no error")
	}
	if err := s.Unscale(opt); err != nil {
		t.Fatal(err)
	}
	if err := s.Unscale(opt); !errors.Is(err, amp.ErrUnscaled) {
		t.Errorf("second Unscale before Update: err = %v, want ErrUnscaled", err)
	}
	if _, err := s.Step(opt); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(opt); !errors.Is(err, amp.ErrStepped) {
		t.Errorf("second Step before Update: err = %v, want ErrStepped", err)
	}
	if err := s.Unscale(opt); !errors.Is(err, amp.ErrStepped) {
		t.Errorf("Unscale after Step: err = %v, want ErrStepped", err)
	}
	if err := s.Load(s.State()); err == nil {
		t.Error("Load between Step and Update: no error")
	}
	if err := s.Update(); err != nil {
		t.Fatal(err)
	}
	// Half-precision gradients are refused.
	h := autograd.ParamOf("h", tensor.Zeros(dev, dtype.F16, device.Param, 2))
	h.Grad = tensor.Zeros(dev, dtype.F16, device.Grad, 2)
	if err := s.Unscale(&fakeOpt{params: []*autograd.Var{h}}); err == nil {
		t.Error("Unscale of f16 gradients: no error")
	}
}

func TestStateRoundTrip(t *testing.T) {
	s := amp.NewGradScaler(amp.InitScale(512), amp.GrowthInterval(7))
	dev := cpu.New()
	p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 1))
	opt := &fakeOpt{params: []*autograd.Var{p}}
	for range 3 {
		setGrad(dev, p, 1)
		s.Step(opt)
		s.Update()
	}
	st := s.State()
	want := amp.State{Scale: 512, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 7, GrowthTracker: 3, MinScale: amp.DefaultMinScale,
		RecoveryInterval: amp.DefaultRecoveryInterval, Steps: 3}
	if st != want {
		t.Fatalf("State() = %+v, want %+v", st, want)
	}
	r := amp.NewGradScaler()
	if err := r.Load(st); err != nil {
		t.Fatal(err)
	}
	if r.State() != st {
		t.Errorf("restored state %+v, want %+v", r.State(), st)
	}
	if err := r.Load(amp.State{Scale: -1, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1}); err == nil {
		t.Error("Load of a negative scale: no error")
	}
}

func TestBF16ScalerDisabled(t *testing.T) {
	s := amp.NewGradScaler(amp.For(dtype.BF16))
	if s.IsEnabled() || s.Note() == "" || s.LossScale() != 1 {
		t.Errorf("bf16 scaler: enabled %v, note %q, scale %v; want disabled with a note and scale 1", s.IsEnabled(), s.Note(), s.LossScale())
	}
	dev := cpu.New()
	p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 1))
	setGrad(dev, p, float32(math.Inf(1)))
	opt := &fakeOpt{params: []*autograd.Var{p}}
	if stepped, err := s.Step(opt); !stepped || err != nil || opt.steps != 1 {
		t.Errorf("disabled scaler: Step = %v, %v; want a plain step", stepped, err)
	}
	if !amp.NewGradScaler(amp.For(dtype.F16)).IsEnabled() {
		t.Error("f16 scaler is disabled")
	}
}

// TestRecoversFromHugeScale trains a small F16 MLP on a separable problem
// starting from a loss scale of 2^24, whose first gradients overflow F16:
// the scaler must back off, skip those steps, and training must converge.
func TestRecoversFromHugeScale(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(11, 12))
		const n, in, classes = 512, 16, 4
		centers := tensor.NormalHost(rng, 0, 3, classes, in)
		x := tensor.NewHost(n, in)
		y := make([]int32, n)
		for i := range n {
			y[i] = int32(i % classes)
			for j := range in {
				x.Data[i*in+j] = centers.Data[int(y[i])*in+j] + float32(rng.NormFloat64())
			}
		}
		w1 := autograd.NewParam("w1", tensor.UniformHost(rng, -0.25, 0.25, 32, in))
		w2 := autograd.NewParam("w2", tensor.UniformHost(rng, -0.18, 0.18, classes, 32))
		params := []*autograd.Var{w1, w2}
		for _, p := range params {
			p.To(dev)
		}
		opt := optim.NewSGD(params, optim.LR(0.1), optim.Momentum(0.9))
		s := amp.NewGradScaler(amp.InitScale(1 << 24))
		var first, last float32
		for step := range 150 {
			g := autograd.NewGraph(dev)
			amp.Autocast(g, dtype.F16)
			logits := g.Linear(g.ReLU(g.Linear(g.Input(x), w1, nil)), w2, nil)
			loss := g.CrossEntropy(logits, y)
			g.Backward(s.Scale(g, loss))
			if _, err := s.Step(opt); err != nil {
				t.Fatal(err)
			}
			if err := s.Update(); err != nil {
				t.Fatal(err)
			}
			opt.ZeroGrad()
			if step == 0 {
				first = loss.Value.Item()
			}
			last = loss.Value.Item()
			g.Release()
		}
		if s.Skipped() == 0 || s.Skipped() > 20 {
			t.Errorf("skipped %d steps; want a few while the scale backs off from 2^24", s.Skipped())
		}
		if s.LossScale() >= 1<<24 {
			t.Errorf("scale %v did not back off from 2^24", s.LossScale())
		}
		if !(last < 0.1 && last < first/10) {
			t.Errorf("loss %v -> %v; want convergence below 0.1", first, last)
		}
		t.Logf("loss %.4f -> %.4f, %d skipped, final scale %v", first, last, s.Skipped(), s.LossScale())
	})
}
