package device

// MultiTensor is an optional interface of a backend, found by type
// assertion: optimiser work over all of a model's parameters in one call,
// as PyTorch's foreach and fused optimisers do. A model of many small
// tensors (a transformer's biases, norms and projections) is then shared
// out among the cores as one piece of work, instead of one kernel per
// tensor each too small to share.
type MultiTensor interface {
	// AdamMulti applies Adam (or AdamW) to every step's tensors with its
	// own hyper-parameters: the bits of calling Adam, or AdamCast where
	// Low is not nil (StepCaster), on each in turn.
	AdamMulti(steps []AdamStep)
	// SumSquares returns the sum of the squares of every element of every
	// buffer (F32), accumulated in float64 in an order that depends on the
	// buffers' lengths alone: a gradient norm.
	SumSquares(bufs []Buffer) float64
}

// AdamStep is one parameter's Adam update: parameter, gradient, first and
// second moments (all F32), the parameter's cached low-precision copy to
// refresh (nil for none), and the step's hyper-parameters.
type AdamStep struct {
	P, G, M, V, Low Buffer
	H               AdamParams
}
