package autograd

import "fmt"

// Phase is the pass of a training step that an operation's work belongs
// to, as an Observer is told it.
type Phase uint8

const (
	// Forward is an operation's forward computation as first recorded.
	Forward Phase = iota
	// Backward is an operation's backward function.
	Backward
	// Recompute is the forward computation of a checkpointed segment run
	// again during backward.
	Recompute

	// NumPhases is the number of phases.
	NumPhases = iota
)

var phaseNames = [NumPhases]string{"forward", "backward", "recompute"}

// String returns the lower-case name used in reports.
func (ph Phase) String() string {
	if int(ph) < len(phaseNames) {
		return phaseNames[ph]
	}
	return fmt.Sprintf("Phase(%d)", uint8(ph))
}

// Observer is told when a graph's operations do their work, so that a
// profiler can attribute a step's time to them. autograd defines the hook
// and calls it; package profile implements it, as amp implements
// CastPolicy.
//
// A backward function is bracketed: OpStart(op, Backward) before it runs,
// OpEnd(op, Backward) after. Work it does on the graph in between (a
// checkpointed segment's recomputation and the backward pass through it)
// is reported inside the bracket, so an observer that keeps a stack can
// subtract it.
//
// A forward operation is seen only when it records itself on the tape,
// which it does after its kernels have run: OpEnd(op, Forward), or
// OpEnd(op, Recompute) while a checkpointed segment is recomputed, comes
// without an OpStart, and the operation's work is whatever ran since the
// observer's previous call. Operations that record nothing (under NoGrad,
// on inputs that need no gradient, inside the first run of a checkpointed
// segment) are not reported; their time falls to the next operation that
// is, or to the observer's next event.
//
// The calls come on the goroutine using the graph, one at a time. A graph
// without an observer pays one nil check per operation.
type Observer interface {
	OpStart(op Op, ph Phase)
	OpEnd(op Op, ph Phase)
}

// WithObserver installs o at creation; see Observe.
func WithObserver(o Observer) Option { return func(g *Graph) { g.obs = o } }

// Observe installs o as the graph's observer (nil removes it).
func (g *Graph) Observe(o Observer) { g.obs = o }

// Observer is the installed observer, or nil.
func (g *Graph) Observer() Observer { return g.obs }

// phase is the phase of an operation recorded now.
func (g *Graph) phase() Phase {
	if g.replay {
		return Recompute
	}
	return Forward
}
