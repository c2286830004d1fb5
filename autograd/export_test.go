package autograd

// SetColBudget changes the im2col workspace bound and returns a function
// restoring it, so tests can force convolutions into many chunks.
func SetColBudget(n int) (restore func()) {
	old := colBudget
	colBudget = n
	return func() { colBudget = old }
}

// KeptColumns is how many bytes of convolution columns g keeps for its
// backward pass.
func KeptColumns(g *Graph) int64 { return g.keptCols }
