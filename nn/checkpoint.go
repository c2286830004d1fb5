package nn

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/autograd"
)

// Checkpointed wraps a module so that its forward pass is a checkpointed
// segment: its intermediate activations are recomputed during backward
// instead of kept.
type Checkpointed struct {
	M Module
}

// Checkpoint wraps m in a Checkpointed.
func Checkpoint(m Module) *Checkpointed { return &Checkpointed{M: m} }

// Forward runs M as a checkpointed segment.
func (c *Checkpointed) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return g.Checkpoint(func(g *autograd.Graph, in []*autograd.Var) []*autograd.Var {
		return []*autograd.Var{c.M.Forward(g, in[0])}
	}, x)[0]
}

// Params are M's parameters.
func (c *Checkpointed) Params() []*autograd.Var { return c.M.Params() }

// Children is M, so that To, State and SetTraining reach it.
func (c *Checkpointed) Children() []Module { return []Module{c.M} }

func (c *Checkpointed) String() string { return fmt.Sprintf("Checkpointed(%v)", c.M) }

// DefaultSegments is the segment count CheckpointSequential uses for n layers
// when asked for 0: √n rounded, which minimises kept activations plus one
// segment's recomputation for equal-sized layers.
func DefaultSegments(n int) int {
	return max(1, int(math.Round(math.Sqrt(float64(n)))))
}

// Split divides n layers into the given number of contiguous segments, as
// evenly as possible, and returns the boundaries: segment i is layers
// [b[i], b[i+1]).
func Split(n, segments int) []int {
	if segments <= 0 {
		segments = DefaultSegments(n)
	}
	segments = min(segments, n)
	b := make([]int, segments+1)
	for i := range b {
		b[i] = i * n / segments
	}
	return b
}

// CheckpointSequential applies layers to x in order, each of the given number
// of segments checkpointed (0 means DefaultSegments). Unlike PyTorch's
// checkpoint_sequential, the last segment is checkpointed too, so that one
// segment means the whole stack. A segment's output between two segments,
// which the next keeps as its input, goes once the backward pass has
// recomputed that segment (autograd.Graph.Free).
func CheckpointSequential(g *autograd.Graph, layers []Module, segments int, x *autograd.Var) *autograd.Var {
	return RunChain(g, layers, &Recompute{Spans: EvenSpans(len(layers), segments)}, x, false)
}
