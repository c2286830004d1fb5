package amp_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/testdev"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// drive runs one Step and Update per entry of overflow on a one-parameter
// fake optimiser and returns the scale after each Update.
func drive(t *testing.T, s *amp.GradScaler, overflow []bool) []float32 {
	t.Helper()
	dev := cpu.New()
	p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 1))
	opt := &fakeOpt{params: []*autograd.Var{p}}
	var scales []float32
	for i, inf := range overflow {
		v := float32(1)
		if inf {
			v = float32(math.Inf(1))
		}
		setGrad(dev, p, v)
		if _, err := s.Step(opt); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if err := s.Update(); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		scales = append(scales, s.LossScale())
	}
	p.FreeGrad()
	return scales
}

// TestScalerFactorsAsPyTorch checks that growth and backoff multiply as
// PyTorch's _amp_update_scale_ kernels do: the scale is a float32, the
// factors are doubles, the product is formed in double and rounded once to
// float32. Multiplying in float32 instead parts from PyTorch after two
// backoffs by 0.9 (0.80999994 instead of 0.81) and at the 7th growth by 1.1.
//
// The expected scales were derived by that rule, independently of this
// package: in Python, s = struct.unpack('f', struct.pack('f', s*factor))[0]
// from s = 1.0 (or 65536.0), Python's float being a double, with the
// results written out as exact hexadecimal float32 literals.
func TestScalerFactorsAsPyTorch(t *testing.T) {
	rep := func(v bool, n int) []bool {
		out := make([]bool, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	cases := []struct {
		name     string
		opts     []amp.ScalerOption
		overflow []bool
		want     []float32
	}{
		{"growth 1.1 each step", []amp.ScalerOption{amp.InitScale(1), amp.GrowthFactor(1.1), amp.GrowthInterval(1)},
			rep(false, 10),
			[]float32{0x1.19999ap0, 0x1.35c29p0, 0x1.54bc6cp0, 0x1.76cf44p0, 0x1.9c4a64p0,
				0x1.c58508p0, 0x1.f2df22p0, 0x1.12612p1, 0x1.2dd13cp1, 0x1.4bffc2p1}},
		{"backoff 0.9 from 1", []amp.ScalerOption{amp.InitScale(1), amp.BackoffFactor(0.9)},
			rep(true, 10),
			[]float32{0x1.ccccccp-1, 0.81, 0x1.753f7cp-1, 0x1.4fec56p-1, 0x1.2e54b4p-1,
				0x1.101908p-1, 0x1.e9c6a8p-2, 0x1.b8cc64p-2, 0x1.8cb7f4p-2, 0x1.650bf6p-2}},
		{"backoff 0.9 from 2^16", []amp.ScalerOption{amp.BackoffFactor(0.9)},
			rep(true, 10),
			[]float32{0x1.ccccccp15, 0x1.9eb852p15, 0x1.753f7cp15, 0x1.4fec56p15, 0x1.2e54b4p15,
				0x1.101908p15, 0x1.e9c6a8p14, 0x1.b8cc64p14, 0x1.8cb7f4p14, 0x1.650bf6p14}},
		{"growth and backoff interleaved", []amp.ScalerOption{amp.InitScale(1), amp.GrowthFactor(1.1), amp.BackoffFactor(0.9), amp.GrowthInterval(1)},
			append(append(rep(false, 7), rep(true, 2)...), rep(false, 2)...),
			[]float32{0x1.19999ap0, 0x1.35c29p0, 0x1.54bc6cp0, 0x1.76cf44p0, 0x1.9c4a64p0, 0x1.c58508p0,
				0x1.f2df22p0, 0x1.c0fc04p0, 0x1.941604p0, 0x1.bc7e9ep0, 0x1.e8f1aep0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := drive(t, amp.NewGradScaler(c.opts...), c.overflow)
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("scale after update %d = %v (%x), want %v (%x)", i+1, got[i], got[i], c.want[i], c.want[i])
				}
			}
		})
	}
}

// TestLoadRejectsInvalidState gives Load states the constructor would
// refuse, or that no run can reach: each must be an error and leave the
// scaler as it was.
func TestLoadRejectsInvalidState(t *testing.T) {
	valid := amp.State{Scale: 1024, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 10, GrowthTracker: 9}
	inf32 := float32(math.Inf(1))
	cases := []struct {
		name   string
		modify func(*amp.State)
	}{
		{"scale +Inf", func(s *amp.State) { s.Scale = inf32 }},
		{"scale NaN", func(s *amp.State) { s.Scale = float32(math.NaN()) }},
		{"scale 0", func(s *amp.State) { s.Scale = 0 }},
		{"scale negative", func(s *amp.State) { s.Scale = -1 }},
		{"tracker at the interval", func(s *amp.State) { s.GrowthTracker = 10 }},
		{"tracker above the interval", func(s *amp.State) { s.GrowthTracker = 11 }},
		{"tracker negative", func(s *amp.State) { s.GrowthTracker = -1 }},
		{"interval 0", func(s *amp.State) { s.GrowthInterval, s.GrowthTracker = 0, 0 }},
		{"growth factor 1", func(s *amp.State) { s.GrowthFactor = 1 }},
		{"growth factor NaN", func(s *amp.State) { s.GrowthFactor = math.NaN() }},
		{"backoff factor 1", func(s *amp.State) { s.BackoffFactor = 1 }},
		{"backoff factor 0", func(s *amp.State) { s.BackoffFactor = 0 }},
		{"growth factor +Inf", func(s *amp.State) { s.GrowthFactor = math.Inf(1) }},
		{"backoff factor NaN", func(s *amp.State) { s.BackoffFactor = math.NaN() }},
		{"scale below the floor", func(s *amp.State) { s.Scale, s.MinScale = 0.5, 1 }},
		{"scale below the scaler's floor", func(s *amp.State) { s.Scale = amp.DefaultMinScale / 2 }},
		{"floor below 2^-126", func(s *amp.State) { s.MinScale = 0x1p-127 }},
		{"floor negative", func(s *amp.State) { s.MinScale = -1 }},
		{"floor +Inf", func(s *amp.State) { s.MinScale = inf32 }},
		{"consecutive skips negative", func(s *amp.State) { s.ConsecutiveSkips = -1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := amp.NewGradScaler(amp.InitScale(4096), amp.GrowthInterval(3))
			before := s.State()
			st := valid
			c.modify(&st)
			if err := s.Load(st); err == nil {
				t.Errorf("Load(%+v) = nil; want an error", st)
			}
			if got := s.State(); got != before {
				t.Errorf("state after a refused Load %+v, want %+v unchanged", got, before)
			}
		})
	}
	s := amp.NewGradScaler()
	if err := s.Load(valid); err != nil {
		t.Errorf("Load(%+v) = %v; want it accepted (tracker one below the interval)", valid, err)
	}
}

// TestScaleHasFloor backs off 200 times in a row (an overflow storm): the
// scale must stop at a positive floor instead of reaching 0 (which PyTorch
// does after 165 halvings from 2^16, after which 1/scale is Inf and every
// step is skipped for ever), and the first clean step afterwards must run.
func TestScaleHasFloor(t *testing.T) {
	s := amp.NewGradScaler()
	storm := make([]bool, 200)
	for i := range storm {
		storm[i] = true
	}
	scales := drive(t, s, storm)
	for i, sc := range scales {
		if !(sc >= amp.DefaultMinScale) {
			t.Fatalf("scale %v after %d overflows; want it to stay at or above the floor %v", sc, i+1, amp.DefaultMinScale)
		}
	}
	// From 2^16, 30 halvings reach the floor 2^-14 exactly; it holds there.
	if got := scales[29]; got != amp.DefaultMinScale {
		t.Errorf("scale after 30 overflows %v, want the floor %v", got, amp.DefaultMinScale)
	}
	if got := scales[len(scales)-1]; got != amp.DefaultMinScale {
		t.Errorf("scale after 200 overflows %v, want the floor %v", got, amp.DefaultMinScale)
	}
	dev := cpu.New()
	p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, 1))
	defer p.FreeGrad()
	setGrad(dev, p, 1)
	opt := &fakeOpt{params: []*autograd.Var{p}}
	if stepped, err := s.Step(opt); !stepped || err != nil {
		t.Errorf("first clean step after the storm: Step = %v, %v; want it to run", stepped, err)
	}
}

// TestOverflowStorm trains a small F16 MLP whose inputs are multiplied by
// 1e6 for 200 steps (the forward pass overflows F16, whatever the scale),
// then on clean inputs: the skipped steps must not drive the scale to 0,
// and training must resume once the inputs are clean.
func TestOverflowStorm(t *testing.T) {
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		rng := rand.New(rand.NewPCG(3, 4))
		const n, in, classes = 64, 8, 2
		x := tensor.NormalHost(rng, 0, 1, n, in)
		big := tensor.NewHost(n, in)
		for i, v := range x.Data {
			big.Data[i] = v * 1e6
		}
		y := make([]int32, n)
		for i := range y {
			if x.Data[i*in] > 0 {
				y[i] = 1
			}
		}
		w1 := autograd.NewParam("w1", tensor.UniformHost(rng, -0.3, 0.3, 16, in))
		w2 := autograd.NewParam("w2", tensor.UniformHost(rng, -0.25, 0.25, classes, 16))
		params := []*autograd.Var{w1, w2}
		for _, p := range params {
			p.To(dev)
		}
		opt := optim.NewSGD(params, optim.LR(0.1))
		defer optim.Release(opt)
		s := amp.NewGradScaler(amp.For(dtype.F16))
		step := func(h tensor.Host) (bool, float32) {
			g := autograd.NewGraph(dev)
			defer g.Release()
			amp.Autocast(g, dtype.F16)
			loss := g.CrossEntropy(g.Linear(g.ReLU(g.Linear(g.Input(h), w1, nil)), w2, nil), y)
			g.Backward(s.Scale(g, loss))
			stepped, err := s.Step(opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Update(); err != nil {
				t.Fatal(err)
			}
			opt.ZeroGrad()
			return stepped, loss.Value.Item()
		}
		var warnings []amp.Warning
		for i := range 200 {
			if stepped, _ := step(big); stepped {
				t.Fatalf("storm step %d ran; want it skipped (the forward pass overflows F16)", i)
			}
			if sc := s.LossScale(); !(sc >= s.MinScale()) {
				t.Fatalf("scale %v after storm step %d; want it at or above the floor %v", sc, i, s.MinScale())
			}
			warnings = append(warnings, s.Warnings()...)
		}
		if got := s.ConsecutiveSkips(); got != 200 {
			t.Errorf("ConsecutiveSkips() = %d after the storm, want 200", got)
		}
		// Each condition is reported once, when it arises: the 16th skip in
		// a row, and the 17th halving from 2^16 (to 0.5).
		want := []amp.Warning{
			{Kind: amp.SkipRun, Update: 16, Scale: 1, Skips: 16, MinScale: amp.DefaultMinScale},
			{Kind: amp.LowScale, Update: 17, Scale: 0.5, Skips: 17, MinScale: amp.DefaultMinScale},
		}
		if !slices.Equal(warnings, want) {
			t.Errorf("warnings during the storm %+v, want %+v", warnings, want)
		}
		ran := 0
		var first, last float32
		for i := range 100 {
			stepped, loss := step(x)
			if stepped {
				ran++
			}
			if i == 0 {
				first = loss
			}
			last = loss
		}
		if ran != 100 {
			t.Errorf("%d of 100 clean steps after the storm ran; want all", ran)
		}
		if w := s.Warnings(); len(w) != 0 {
			t.Errorf("warnings during the clean steps %v; want none (the scale is still below 1, already reported)", w)
		}
		if !(last < first) {
			t.Errorf("loss %v -> %v over the clean steps; want it to fall", first, last)
		}
		t.Logf("after the storm: scale %v, loss %.4f -> %.4f", s.LossScale(), first, last)
	})
}

// TestCheckIsOnUnscaledValues pins down where the Inf/NaN check happens:
// on each gradient after it is multiplied by 1/scale. Below a scale of 1
// that product can overflow although the scaled gradient was finite; the
// step is then skipped (PyTorch, checking before it multiplies, would step
// with an infinite gradient). At or above 1 the verdicts agree.
func TestCheckIsOnUnscaledValues(t *testing.T) {
	const big = math.MaxFloat32 / 2 // finite; twice it is not
	cases := []struct {
		name    string
		scale   float32
		grad    float32
		stepped bool
	}{
		{"scale 1, largest finite gradient", 1, math.MaxFloat32, true},
		{"scale 2, large finite gradient", 2, big, true},
		{"scale 1/4, finite gradient that unscales to Inf", 0.25, big, false},
		{"scale 1/4, small gradient", 0.25, 3, true},
		{"scale 1, Inf gradient", 1, float32(math.Inf(-1)), false},
		{"scale 1/4, NaN gradient", 0.25, float32(math.NaN()), false},
	}
	// 40 elements: the value under test sits in a 16-wide vector block
	// (element 5) or in the scalar tail (element 37) of a SIMD loop.
	const n = 40
	testdev.Each(t, func(t *testing.T, dev device.Device) {
		for _, c := range cases {
			for _, at := range []int{5, 37} {
				t.Run(fmt.Sprintf("%s/element %d", c.name, at), func(t *testing.T) {
					p := autograd.ParamOf("p", tensor.Zeros(dev, dtype.F32, device.Param, n))
					defer p.Value.Release()
					defer p.FreeGrad()
					opt := &fakeOpt{params: []*autograd.Var{p}}
					s := amp.NewGradScaler(amp.InitScale(c.scale))
					g := make([]float32, n)
					for i := range g {
						g[i] = 1
					}
					g[at] = c.grad
					setGrad(dev, p, g...)
					if stepped, err := s.Step(opt); err != nil || stepped != c.stepped {
						t.Errorf("Step with gradient %v at scale %v = %v, %v; want stepped %v", c.grad, c.scale, stepped, err, c.stepped)
					}
					// The gradient is left unscaled whether or not the step ran.
					want := c.grad * (1 / c.scale)
					if got := p.Grad.ToHost()[at]; math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
						t.Errorf("gradient after Step %v, want %v", got, want)
					}
				})
			}
		}
	})
}

// TestConstructorRejects checks the options the constructor refuses, each
// with a panic naming it.
func TestConstructorRejects(t *testing.T) {
	cases := []struct {
		name string
		opts []amp.ScalerOption
		want string
	}{
		{"scale +Inf", []amp.ScalerOption{amp.InitScale(float32(math.Inf(1)))}, "scale"},
		{"growth factor +Inf", []amp.ScalerOption{amp.GrowthFactor(math.Inf(1))}, "growth factor"},
		{"backoff factor 1", []amp.ScalerOption{amp.BackoffFactor(1)}, "backoff factor"},
		{"floor negative", []amp.ScalerOption{amp.MinScale(-1)}, "minimum scale"},
		{"recovery interval 0", []amp.ScalerOption{amp.RecoveryInterval(0)}, "recovery interval"},
		{"floor NaN", []amp.ScalerOption{amp.MinScale(float32(math.NaN()))}, "minimum scale"},
		{"floor subnormal", []amp.ScalerOption{amp.MinScale(0x1p-127)}, "minimum scale"},
		{"floor above the initial scale", []amp.ScalerOption{amp.InitScale(4), amp.MinScale(8)}, "below the minimum scale"},
		{"initial scale below the default floor", []amp.ScalerOption{amp.InitScale(0x1p-20)}, "below the minimum scale"},
		{"warning threshold 0", []amp.ScalerOption{amp.WarnAfterSkips(0)}, "WarnAfterSkips"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg := fmt.Sprint(r); r == nil || !strings.Contains(msg, "amp.NewGradScaler") || !strings.Contains(msg, c.want) {
					t.Errorf("panic %v; want one from amp.NewGradScaler naming %q", r, c.want)
				}
			}()
			amp.NewGradScaler(c.opts...)
		})
	}
	// The smallest allowed floor works: 1/2^-126 is finite.
	s := amp.NewGradScaler(amp.InitScale(1), amp.MinScale(0x1p-126))
	storm := make([]bool, 130)
	for i := range storm {
		storm[i] = true
	}
	if got := drive(t, s, storm)[129]; got != 0x1p-126 {
		t.Errorf("scale after 130 halvings from 1 with floor 2^-126: %v, want 2^-126", got)
	}
}

// TestWarningsEdgeTriggered checks that each condition is reported once
// when it arises, again only after it has ended and arisen anew, and that
// Warnings forgets what it returned.
func TestWarningsEdgeTriggered(t *testing.T) {
	s := amp.NewGradScaler(amp.InitScale(4), amp.GrowthInterval(2), amp.WarnAfterSkips(3), amp.MinScale(0.25))
	type want struct {
		overflow bool
		scale    float32
		kinds    []amp.WarningKind
	}
	steps := []want{
		{true, 2, nil},
		{true, 1, nil},
		{true, 0.5, []amp.WarningKind{amp.SkipRun, amp.LowScale}}, // third skip in a row; below 1
		{true, 0.25, nil},  // the same run, still below 1
		{true, 0.25, nil},  // at the floor
		{false, 0.25, nil}, // a clean step ends the run of skips
		{false, 0.5, nil},  // growth, still below 1: not reported again
		{true, 0.25, nil},
		{true, 0.25, nil},
		{true, 0.25, []amp.WarningKind{amp.SkipRun}}, // a new run of three
		{false, 0.25, nil},
		{false, 0.5, nil},
		{false, 0.5, nil},
		{false, 1, nil}, // back to 1: the low-scale stretch ends
		{true, 0.5, []amp.WarningKind{amp.LowScale}},
	}
	overflow := make([]bool, len(steps))
	for i, w := range steps {
		overflow[i] = w.overflow
	}
	for i, w := range steps {
		got := drive(t, s, overflow[i:i+1])[0]
		if got != w.scale {
			t.Errorf("update %d: scale %v, want %v", i+1, got, w.scale)
		}
		var kinds []amp.WarningKind
		for _, x := range s.Warnings() {
			kinds = append(kinds, x.Kind)
			if x.Update != i+1 || x.Scale != got || x.String() == "" {
				t.Errorf("update %d: warning %+v; want it stamped with this update and scale %v", i+1, x, got)
			}
		}
		if !slices.Equal(kinds, w.kinds) {
			t.Errorf("update %d: warnings %v, want %v", i+1, kinds, w.kinds)
		}
		if again := s.Warnings(); again != nil {
			t.Errorf("update %d: second Warnings() = %v, want nil", i+1, again)
		}
	}
}

// TestStateCarriesFloorAndSkips checks that a saved state carries the floor
// and the current run of skips through JSON, that a state saved before they
// existed (or PyTorch's five keys) still loads and keeps the scaler's own
// floor, and that PyTorch's double factors survive exactly.
func TestStateCarriesFloorAndSkips(t *testing.T) {
	s := amp.NewGradScaler(amp.InitScale(8), amp.MinScale(0.5), amp.GrowthFactor(1.1), amp.WarnAfterSkips(4))
	drive(t, s, []bool{true, true, true})
	st := s.State()
	want := amp.State{Scale: 1, GrowthFactor: 1.1, BackoffFactor: 0.5, GrowthInterval: 2000, MinScale: 0.5,
		RecoveryInterval: amp.DefaultRecoveryInterval, ConsecutiveSkips: 3, Steps: 3, Skipped: 3}
	if st != want {
		t.Fatalf("State() = %+v, want %+v", st, want)
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back amp.State
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	r := amp.NewGradScaler(amp.WarnAfterSkips(4))
	if err := r.Load(back); err != nil {
		t.Fatal(err)
	}
	if r.State() != want {
		t.Errorf("state after a JSON round trip %+v, want %+v", r.State(), want)
	}
	// The resumed run counts on: the fourth skip in a row is reported, and
	// the scale stops at the restored floor.
	drive(t, r, []bool{true})
	if got := r.ConsecutiveSkips(); got != 4 {
		t.Errorf("ConsecutiveSkips() after one more overflow = %d, want 4", got)
	}
	if got := r.LossScale(); got != 0.5 {
		t.Errorf("scale %v, want the restored floor 0.5", got)
	}
	var kinds []amp.WarningKind
	for _, w := range r.Warnings() {
		kinds = append(kinds, w.Kind)
	}
	if !slices.Equal(kinds, []amp.WarningKind{amp.SkipRun, amp.LowScale}) {
		t.Errorf("warnings after resuming %v, want [SkipRun LowScale]", kinds)
	}

	// PyTorch's state_dict keys only, as an older save has them.
	old := []byte(`{"scale": 1024.0, "growth_factor": 1.1, "backoff_factor": 0.9, "growth_interval": 100, "_growth_tracker": 42}`)
	var ost amp.State
	if err := json.Unmarshal(old, &ost); err != nil {
		t.Fatal(err)
	}
	o := amp.NewGradScaler(amp.MinScale(2))
	if err := o.Load(ost); err != nil {
		t.Fatalf("Load of a state without the new fields: %v", err)
	}
	wantOld := amp.State{Scale: 1024, GrowthFactor: 1.1, BackoffFactor: 0.9, GrowthInterval: 100, GrowthTracker: 42, MinScale: 2,
		RecoveryInterval: amp.DefaultRecoveryInterval}
	if got := o.State(); got != wantOld {
		t.Errorf("state loaded from PyTorch's keys %+v, want %+v", got, wantOld)
	}
}

// ExampleGradScaler_Warnings shows a training loop printing the scaler's
// warnings, each once, during a run of overflowing steps.
func ExampleGradScaler_Warnings() {
	dev := cpu.New()
	w := autograd.ParamOf("w", tensor.Zeros(dev, dtype.F32, device.Param, 1))
	opt := optim.NewSGD([]*autograd.Var{w}, optim.LR(0.1))
	scaler := amp.NewGradScaler(amp.InitScale(8), amp.WarnAfterSkips(3))
	for range 5 {
		// Stands for g.Backward(scaler.Scale(g, loss)) with a loss whose
		// gradient overflows every time.
		w.FreeGrad()
		w.Grad = tensor.FromSlice(dev, dtype.F32, device.Grad, []float32{float32(math.Inf(1))}, 1)
		if _, err := scaler.Step(opt); err != nil {
			panic(err)
		}
		if err := scaler.Update(); err != nil {
			panic(err)
		}
		for _, warning := range scaler.Warnings() {
			fmt.Println(warning) // a program prints these on standard error
		}
	}
	// Output:
	// amp: 3 consecutive steps skipped for Inf/NaN gradients (update 3, loss scale 1): the overflow does not go away as the scale falls; look for Inf or NaN in the loss, the inputs or the weights
	// amp: loss scale fell below 1 (update 4, scale 0.5, floor 6.1035156e-05): steps overflowed even unscaled, so gradients are now scaled down and small ones flush to zero in F16
}
