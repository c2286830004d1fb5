package cudaops

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// markingGPU is a fakeGPU whose timers log where their events fall among
// the launches, and report as elapsed the number of kernels launched
// between them in milliseconds: a clock that ticks once per kernel.
type markingGPU struct {
	*fakeGPU
	log *[]string
}

func (g markingGPU) launched() int {
	n := g.gemms
	for _, c := range g.launches {
		n += c
	}
	return n
}

type markingTimer struct {
	g   markingGPU
	at0 int // launches before the start event; -1 until recorded
	at1 int // and before the end event
}

func (g markingGPU) newTimer() (timer, error) {
	*g.log = append(*g.log, "new")
	return &markingTimer{g: g, at0: -1, at1: -1}, nil
}

func (t *markingTimer) start() error { t.at0 = t.g.launched(); return nil }
func (t *markingTimer) stop() error  { t.at1 = t.g.launched(); return nil }

func (t *markingTimer) elapsed() (float32, error) {
	if t.at0 < 0 || t.at1 < 0 {
		return 0, fmt.Errorf("elapsed of an event not recorded")
	}
	return float32(t.at1 - t.at0), nil
}

func (t *markingTimer) close() { *t.g.log = append(*t.g.log, "close") }

// TestSpanTimesQueuedWork checks device.Timer on the CUDA backend (over
// the fake GPU): a span's events are recorded on the stream between the
// kernels queued before and after Start and Stop, Elapsed converts the
// events' milliseconds, a span is reusable, and Close frees its events
// once.
func TestSpanTimesQueuedWork(t *testing.T) {
	var log []string
	fg := newFakeGPU()
	g := markingGPU{fg, &log}
	ks, err := newKernelSet(ptxSM80)
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDevice(g, ks, Info{Name: "fake", Major: 8, PTX: "compute_80"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var timer device.Device = d
	tm, ok := timer.(device.Timer)
	if !ok {
		t.Fatal("the CUDA device does not implement device.Timer")
	}
	sp, err := tm.NewSpan()
	if err != nil {
		t.Fatal(err)
	}
	a := d.Alloc(dtype.F32, 1000, device.Temp)
	defer d.Free(a)
	for _, kernels := range []int{3, 0, 5} { // reused: each Start begins afresh
		d.Fill(a, 1) // before Start: not counted
		if err := sp.Start(); err != nil {
			t.Fatal(err)
		}
		for range kernels {
			d.Unary(device.Scale, a, a, 2)
		}
		if err := sp.Stop(); err != nil {
			t.Fatal(err)
		}
		d.Fill(a, 0) // after Stop: not counted
		got, err := sp.Elapsed()
		if err != nil {
			t.Fatal(err)
		}
		if want := time.Duration(kernels) * time.Millisecond; got != want {
			t.Errorf("%d kernels between the events: Elapsed %v, want %v", kernels, got, want)
		}
	}
	sp.Close()
	sp.Close() // a second Close does nothing
	if want := []string{"new", "close"}; !slices.Equal(log, want) {
		t.Errorf("timer calls %q, want %q", log, want)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "after Close") {
				t.Errorf("Start after Close: panic %v, want one saying so", r)
			}
		}()
		sp.Start()
	}()
}
