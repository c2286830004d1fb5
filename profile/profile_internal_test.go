package profile

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t int64 }

func (c *fakeClock) at(t int64) { c.t = t }

func withClock(p *Profiler, c *fakeClock) *Profiler {
	p.clock = func() int64 { return c.t }
	return p
}

// rowsByKey is the profile's rows keyed "name phase", in nanoseconds.
func rowsByKey(p *Profiler) map[string]row {
	out := map[string]row{}
	for id, r := range p.rows {
		if r != (row{}) {
			op, ph := p.names(id)
			out[op+" "+ph] = r
		}
	}
	return out
}

// TestAttribution runs a step through every kind of event at known times
// and checks where each nanosecond went: forward ops take the time since
// the previous event, backward brackets lose what nests inside them (a
// checkpoint's recomputation and backward), a part loses an op run inside
// it, gaps between events are the host's, and the rows add up to the step.
func TestAttribution(t *testing.T) {
	c := &fakeClock{}
	p := withClock(New(cpu.New()), c)
	lin, relu, ckpt, mul := autograd.OpLinear, autograd.OpReLU, autograd.OpCheckpoint, autograd.OpMul
	// Events outside a step count for nothing.
	p.OpEnd(lin, autograd.Forward)
	p.Begin(Optim)
	p.End(Optim)

	c.at(100)
	p.StepStart()
	p.Begin(Data)
	c.at(105)
	p.End(Data)
	c.at(110)
	p.OpEnd(lin, autograd.Forward) // 105-110
	c.at(113)
	p.OpEnd(relu, autograd.Forward) // 110-113
	c.at(114)                       // 113-114 host
	p.OpStart(relu, autograd.Backward)
	c.at(116)
	p.OpEnd(relu, autograd.Backward) // 114-116
	c.at(117)                        // 116-117 host
	p.OpStart(ckpt, autograd.Backward)
	c.at(119)
	p.OpEnd(lin, autograd.Recompute) // 117-119
	c.at(120)                        // 119-120 the checkpoint's own
	p.OpStart(lin, autograd.Backward)
	c.at(123)
	p.OpEnd(lin, autograd.Backward) // 120-123
	c.at(125)
	p.OpEnd(ckpt, autograd.Backward) // 123-125 the checkpoint's own
	c.at(126)                        // 125-126 host
	p.Begin(Optim)
	c.at(127)
	p.OpEnd(mul, autograd.Forward) // 126-127: an op inside the optimiser's part
	c.at(130)
	p.End(Optim) // 127-130
	c.at(132)    // 130-132 host
	p.StepEnd()

	want := map[string]row{
		"data wait":           {ns: 5, calls: 1},
		"linear forward":      {ns: 5, calls: 1},
		"relu forward":        {ns: 3, calls: 1},
		"relu backward":       {ns: 2, calls: 1},
		"linear recompute":    {ns: 2, calls: 1},
		"checkpoint backward": {ns: 3, calls: 1},
		"linear backward":     {ns: 3, calls: 1},
		"mul forward":         {ns: 1, calls: 1},
		"optimizer step":      {ns: 3, calls: 1},
		"host overhead":       {ns: 5},
	}
	got := rowsByKey(p)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %+v, want %+v", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected row %s: %+v", k, got[k])
		}
	}
	if p.StepCount() != 1 || p.Elapsed() != 32 {
		t.Errorf("steps %d, elapsed %v; want 1 and 32ns", p.StepCount(), p.Elapsed())
	}
	s := p.Summary()
	// compute: 5+3+2+2+3+3+1+3 = 22 of 32; data 5; host 5.
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"compute", s.ComputePct, 100 * 22.0 / 32}, {"data", s.DataPct, 100 * 5.0 / 32}, {"overhead", s.OverheadPct, 100 * 5.0 / 32}} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("summary %s = %v%%, want %v%%", f.name, f.got, f.want)
		}
	}
}

// TestStepsWrapper checks Steps: the data wait before each batch, a step
// per batch the body works on, none for a body that breaks at once, none
// for the final wait that finds no batch, and the same batches as the
// loop without it.
func TestStepsWrapper(t *testing.T) {
	c := &fakeClock{}
	p := withClock(New(cpu.New()), c)
	d := datasets.Synthetic(10, []int{2}, 2, 1)
	var got []int
	for b := range p.Steps(datasets.Batches(d, 3, datasets.Prefetch(0))) {
		got = append(got, b.Index)
		if b.Index == 2 {
			break // at the top of the body: not a step
		}
		c.t += 10
		p.OpEnd(autograd.OpLinear, autograd.Forward)
	}
	if fmt.Sprint(got) != "[0 1 2]" {
		t.Errorf("batches %v, want [0 1 2]", got)
	}
	if p.StepCount() != 2 {
		t.Errorf("%d steps, want 2", p.StepCount())
	}
	if r := rowsByKey(p)["data wait"]; r.calls != 2 {
		t.Errorf("data wait counted %d times, want 2", r.calls)
	}
	// Ranging to the end: the last wait finds nothing and is no step.
	n := 0
	for range p.Steps(datasets.Batches(d, 5, datasets.Prefetch(0))) {
		p.OpEnd(autograd.OpLinear, autograd.Forward)
		n++
	}
	if n != 2 || p.StepCount() != 4 {
		t.Errorf("%d batches, %d steps; want 2 and 4", n, p.StepCount())
	}
}

// TestNilProfiler checks that a nil *Profiler, what a program holds when
// profiling is off, does nothing and lets everything through.
func TestNilProfiler(t *testing.T) {
	var p *Profiler
	dev := cpu.New()
	g := autograd.NewGraph(dev, p.Graph())
	defer g.Release()
	if g.Observer() != nil {
		t.Errorf("a nil profiler's Graph option installed an observer")
	}
	d := datasets.Synthetic(7, []int{2}, 2, 1)
	n := 0
	for range p.Steps(datasets.Batches(d, 2, p.Loader())) {
		p.StepStart()
		p.Begin(Optim)
		p.End(Optim)
		p.StepEnd()
		n++
	}
	ran := false
	if err := p.Phase(Unscale, func() error { ran = true; return fmt.Errorf("x") }); err == nil || !ran {
		t.Errorf("Phase on nil: ran %v, err %v; want the function run and its error", ran, err)
	}
	if n != 4 || p.StepCount() != 0 || p.Rows() != nil || p.Summary() != (Summary{}) || p.Err() != nil {
		t.Errorf("nil profiler: %d batches, %d steps, rows %v", n, p.StepCount(), p.Rows())
	}
	var b strings.Builder
	if err := p.Table(&b); err != nil || b.Len() != 0 {
		t.Errorf("Table on nil wrote %q, %v", b.String(), err)
	}
	if err := p.WriteTrace(&b); err == nil {
		t.Errorf("WriteTrace on nil: no error")
	}
	p.Close()
}

// TestEndWithoutBegin checks that ending a part that is not the innermost
// one open panics, naming it.
func TestEndWithoutBegin(t *testing.T) {
	p := New(cpu.New())
	p.StepStart()
	p.Begin(Optim)
	defer func() {
		if r := fmt.Sprint(recover()); !strings.Contains(r, "End(unscale)") {
			t.Errorf("panic %q, want one naming End(unscale)", r)
		}
	}()
	p.End(Unscale)
}

// slowDevice is a CPU device with a device.Timer whose spans take twice
// the host's time between Start and Stop, by the fake clock.
type slowDevice struct {
	device.Device
	c     *fakeClock
	spans int
	fail  bool
}

type slowSpan struct {
	d           *slowDevice
	start, stop int64
	closed      bool
}

func (d *slowDevice) NewSpan() (device.Span, error) {
	d.spans++
	return &slowSpan{d: d}, nil
}

func (s *slowSpan) Start() error { s.start = s.d.c.t; return nil }
func (s *slowSpan) Stop() error {
	if s.d.fail {
		return fmt.Errorf("device lost")
	}
	s.stop = s.d.c.t
	return nil
}
func (s *slowSpan) Elapsed() (time.Duration, error) {
	return time.Duration(2 * (s.stop - s.start)), nil
}
func (s *slowSpan) Close() { s.closed = true }

// TestDeviceTime checks the device path: each interval's device time goes
// to the row the host gave it, the summary's compute share is the
// device's, markers are reused across steps rather than made anew, and a
// device error stops device timing and says so.
func TestDeviceTime(t *testing.T) {
	c := &fakeClock{}
	dev := &slowDevice{Device: cpu.New(), c: c}
	p := withClock(New(dev, Trace(0)), c)
	for step := range 3 {
		base := int64(100 * step)
		c.at(base)
		p.StepStart()
		p.Begin(Data)
		c.at(base + 4)
		p.End(Data)
		c.at(base + 10)
		p.OpEnd(autograd.OpLinear, autograd.Forward) // 6 host, 12 device
		c.at(base + 12)
		p.StepEnd() // 2 host
	}
	got := rowsByKey(p)
	if r := got["linear forward"]; r.ns != 18 || r.devNs != 36 || r.calls != 3 {
		t.Errorf("linear forward %+v, want 18ns on the host, 36 on the device, 3 calls", r)
	}
	s := p.Summary()
	if !s.DeviceTime || math.Abs(s.ComputePct-100*36.0/36) > 1e-9 {
		t.Errorf("summary %+v: want device time, compute 100%% (36ns of device time in 36ns of steps)", s)
	}
	// A step here has four intervals (one empty, before the wait) and
	// opens a fifth span at its last cut: the first step's five serve
	// the others.
	if dev.spans != 5 {
		t.Errorf("%d spans made for 3 steps of 4 intervals; want 5, reused", dev.spans)
	}
	var b strings.Builder
	p.Table(&b)
	if !strings.Contains(b.String(), "device ms") {
		t.Errorf("table on a timed device has no device column:\n%s", b.String())
	}
	// The trace has the device's stream as a track of its own with the
	// ops' intervals in stream order: each step's linear takes 12ns from
	// when the device finished the 8ns interval of the data wait before
	// it (which is not drawn: the device loads no data).
	b.Reset()
	if err := p.WriteTrace(&b); err != nil {
		t.Fatal(err)
	}
	tr := b.String()
	if !strings.Contains(tr, `"tid":2,"args":{"name":"cpu stream"}`) ||
		!strings.Contains(tr, `{"name":"linear","cat":"forward","ph":"X","pid":1,"tid":2,"ts":0.008,"dur":0.012,`) ||
		!strings.Contains(tr, `{"name":"linear","cat":"forward","ph":"X","pid":1,"tid":2,"ts":0.108,"dur":0.012,`) ||
		strings.Contains(tr, `"tid":2,"ts":0.000,`) || strings.Contains(tr, `"name":"host","cat":"part"`) {
		t.Errorf("trace lacks the stream's track or the linear's device intervals:\n%s", tr)
	}
	dev.fail = true
	c.at(1000)
	p.StepStart()
	c.at(1001)
	p.OpEnd(autograd.OpLinear, autograd.Forward)
	p.StepEnd()
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "device lost") {
		t.Errorf("Err() = %v, want the device's error", err)
	}
	if p.Summary().DeviceTime {
		t.Errorf("after a device error the summary still claims device time")
	}
	p.Close()
}

// TestUnknownOp checks that an op autograd does not list panics, naming it.
func TestUnknownOp(t *testing.T) {
	p := New(cpu.New())
	p.StepStart()
	defer func() {
		if r := fmt.Sprint(recover()); !strings.Contains(r, "Op(") {
			t.Errorf("panic %q, want one naming the op", r)
		}
	}()
	p.OpEnd(autograd.Op(200), autograd.Forward)
}
