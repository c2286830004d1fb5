package autograd

// slab hands out pointers to consecutive elements of chunks it takes from
// Go, so that a graph's many small structs (Vars, tape nodes) cost one Go
// allocation per chunk. An element is never handed out twice: a Var kept
// past its graph's Release is still that graph's Var, and a chunk lives as
// long as anything in it is reachable. The zero value is ready to use; the
// graph's busy flag serialises access.
type slab[T any] struct {
	free []T
	last int // the length of the last chunk
}

// Chunks double from slabFirst to slabMax elements: tests and evaluation
// make many small graphs, a training step a few hundred nodes.
const (
	slabFirst = 16
	slabMax   = 256
)

// get returns a pointer to a zero T.
func (s *slab[T]) get() *T {
	if len(s.free) == 0 {
		s.last = min(max(2*s.last, slabFirst), slabMax)
		s.free = make([]T, s.last)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}
