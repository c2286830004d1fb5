package device

import "time"

// Timer is an optional interface of a backend whose kernels run
// asynchronously to the host (a GPU), found by type assertion: it times
// the work queued on the device between two markers (CUDA events), which
// the host's clock cannot see. A synchronous backend (the CPU) does not
// implement it: there, the wall clock around a kernel is its time.
type Timer interface {
	// NewSpan returns a pair of markers on the device's queue, reusable
	// from one Start to the next until Close.
	NewSpan() (Span, error)
}

// Span times the device work queued between its Start and its Stop.
type Span interface {
	// Start queues the start marker after the work queued so far.
	Start() error
	// Stop queues the end marker after the work queued so far.
	Stop() error
	// Elapsed waits until the device has passed the end marker and
	// returns the device time between the two markers: the work queued
	// between them and any time the device sat idle waiting for it.
	Elapsed() (time.Duration, error)
	// Close frees the markers.
	Close()
}
