package cudaops

import (
	"fmt"
	"time"

	"github.com/mixprec/mixprec/device"
)

var _ device.Timer = (*Device)(nil)

// NewSpan returns a pair of CUDA events on the device's stream, for
// timing the work queued between them (device.Timer). Recording an event
// does not wait for the GPU; only Elapsed does.
func (d *Device) NewSpan() (device.Span, error) {
	d.enter()
	defer d.leave()
	t, err := d.g.newTimer()
	if err != nil {
		return nil, fmt.Errorf("%s: timing: %w", d.Name(), err)
	}
	return &span{d: d, t: t}, nil
}

// span is a device.Span over a gpu timer (two events).
type span struct {
	d      *Device
	t      timer
	closed bool
}

func (s *span) call(what string, f func() error) error {
	s.d.enter()
	defer s.d.leave()
	if s.closed {
		panic("cudaops: Span." + what + " after Close")
	}
	if err := f(); err != nil {
		return fmt.Errorf("%s: timing: %w", s.d.Name(), err)
	}
	return nil
}

// Start records the start event on the stream.
func (s *span) Start() error { return s.call("Start", s.t.start) }

// Stop records the end event on the stream.
func (s *span) Stop() error { return s.call("Stop", s.t.stop) }

// Elapsed waits for the end event and returns the GPU time between the
// events (cuEventElapsedTime's resolution is about half a microsecond).
func (s *span) Elapsed() (time.Duration, error) {
	var ms float32
	err := s.call("Elapsed", func() (err error) {
		ms, err = s.t.elapsed()
		return err
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the events.
func (s *span) Close() {
	s.d.enter()
	defer s.d.leave()
	if !s.closed {
		s.t.close()
		s.closed = true
	}
}
