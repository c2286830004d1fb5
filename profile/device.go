package profile

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

// devTimer times each of a step's intervals on an asynchronous device: a
// span from each cut to the next, resolved (waiting for the device) when
// the step ends.
type devTimer struct {
	t       device.Timer
	free    []device.Span
	open    device.Span // the interval in progress
	pending []devSpan
	err     error // the first failure, after which nothing more is timed
}

// devSpan is an interval of a step, on the device.
type devSpan struct {
	s     device.Span
	id    int
	host0 int64 // when the host began the interval
}

func (d *devTimer) fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("profile: device timing stopped: %w", err)
	}
}

// get returns a span, started.
func (d *devTimer) get() device.Span {
	if d.err != nil {
		return nil
	}
	var s device.Span
	if n := len(d.free); n > 0 {
		s, d.free = d.free[n-1], d.free[:n-1]
	} else {
		var err error
		if s, err = d.t.NewSpan(); err != nil {
			d.fail(err)
			return nil
		}
	}
	if err := s.Start(); err != nil {
		d.fail(err)
		d.free = append(d.free, s)
		return nil
	}
	return s
}

func (d *devTimer) begin(now int64) {
	if d.open == nil {
		d.open = d.get()
	}
}

// cut ends the device's interval for row id (the host's from..now) and
// starts the next.
func (d *devTimer) cut(p *Profiler, id int, from, now int64) {
	if d.open == nil {
		return
	}
	if err := d.open.Stop(); err != nil {
		d.fail(err)
		d.free = append(d.free, d.open)
		d.open = nil
		return
	}
	d.pending = append(d.pending, devSpan{d.open, id, from})
	d.open = d.get()
}

// end waits for the step's intervals and gives their device time to the
// rows (and to the trace's device track).
func (d *devTimer) end(p *Profiler) {
	if d.open != nil {
		d.free = append(d.free, d.open) // started after the last cut: unused
		d.open = nil
	}
	var at int64 // where the device's previous interval ended, on the host's clock
	for _, s := range d.pending {
		if d.err == nil {
			el, err := s.s.Elapsed()
			if err != nil {
				d.fail(err)
			} else {
				ns := int64(el)
				p.addDevice(s.id, ns)
				// The device runs the stream in order: an interval begins
				// when the host queued it or when the one before ended.
				start := max(s.host0, at)
				at = start + ns
				// The stream's track shows the work: ops, unscale and the
				// optimiser, not the device's share of a data wait.
				if p.tr != nil && ns > 0 && p.computes(s.id) {
					p.tr.device(s.id, start, ns)
				}
			}
		}
		d.free = append(d.free, s.s)
	}
	d.pending = d.pending[:0]
}

func (d *devTimer) close() {
	if d.open != nil {
		d.free = append(d.free, d.open)
		d.open = nil
	}
	for _, s := range d.free {
		s.Close()
	}
	d.free = nil
}
