package device

// ReduceOp says how [Comm.AllReduce] combines the ranks' values.
type ReduceOp uint8

// The reductions of AllReduce.
const (
	Sum ReduceOp = iota // the elementwise sum over ranks
	Avg                 // the sum times 1/size, the same float32 product on every rank
)

func (o ReduceOp) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	}
	return "ReduceOp(?)"
}

// Comm is a group of processes (ranks) that exchange device buffers: the
// small contract data-parallel training is written against, so that it
// never names the library underneath (MPI across processes and machines,
// NCCL across GPUs). Every rank calls the collectives in the same order
// with buffers of the same dtype and length. A collective that cannot
// complete (a rank died or stalled past the implementation's timeout)
// returns an error naming the operation; after it the Comm is broken and
// every later call fails at once.
type Comm interface {
	// Rank is this process's index, 0 to Size()-1.
	Rank() int
	// Size is the number of ranks.
	Size() int
	// AllReduce replaces b on every rank with the reduction of all ranks' b.
	AllReduce(b Buffer, op ReduceOp) error
	// Broadcast replaces b on every rank with root's b.
	Broadcast(b Buffer, root int) error
	// Barrier returns once every rank has called it.
	Barrier() error
	// Abort ends every rank's process at once, with reason printed by this
	// one: what a rank does when it cannot go on, so that the others do not
	// wait for it forever.
	Abort(reason error)
	// Close leaves the group; the Comm must not be used afterwards.
	Close() error
}
