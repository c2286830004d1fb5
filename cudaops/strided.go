package cudaops

import (
	"fmt"
	"sort"
)

// maxDims is MAXDIMS in common.cuh: the dimensions a Dims argument holds.
const maxDims = 8

// dims is an iteration space for the strided kernels (Binary, Reduce,
// Expand), after the CPU backend's simplification: dimensions of size 1
// dropped and adjacent dimensions merged where both operands traverse them
// contiguously, which leaves one or two dimensions in the common cases and
// never changes the row-major order of the elements.
type dims struct {
	n      int // number of elements
	size   []int
	sa, sb []int
}

// newDims simplifies shape with the operand strides a and b.
func newDims(op string, shape, a, b []int) dims {
	if len(a) != len(shape) || len(b) != len(shape) {
		panic(fmt.Sprintf("cudaops: %s: strides %v and %v do not match shape %v", op, a, b, shape))
	}
	it := dims{n: 1}
	for i, n := range shape {
		if n < 0 || a[i] < 0 || b[i] < 0 {
			panic(fmt.Sprintf("cudaops: %s: shape %v with strides %v and %v", op, shape, a, b))
		}
		it.n *= n
		if n == 1 {
			continue
		}
		k := len(it.size) - 1
		if k >= 0 && it.sa[k] == a[i]*n && it.sb[k] == b[i]*n {
			it.size[k] *= n
			it.sa[k], it.sb[k] = a[i], b[i]
			continue
		}
		it.size = append(it.size, n)
		it.sa = append(it.sa, a[i])
		it.sb = append(it.sb, b[i])
	}
	if it.n > maxElems {
		panic(fmt.Sprintf("cudaops: %s: shape %v has more than %d elements", op, shape, maxElems))
	}
	if len(it.size) > maxDims {
		panic(fmt.Sprintf("cudaops: %s: shape %v with strides %v and %v has %d dimensions after merging; the kernels take at most %d",
			op, shape, a, b, len(it.size), maxDims))
	}
	return it
}

// reach is one past the largest offset operand which (0: a, 1: b) reads.
func (it dims) reach(which int) int {
	st := it.sa
	if which == 1 {
		st = it.sb
	}
	r := 1
	for i, n := range it.size {
		r += (n - 1) * st[i]
	}
	return r
}

// checkReach panics unless operand which fits in b.
func (it dims) checkReach(op string, which int, b *Buffer) {
	if r := it.reach(which); it.n > 0 && r > b.Len() {
		panic(fmt.Sprintf("cudaops: %s: strides reach element %d of a buffer of %d", op, r-1, b.Len()))
	}
}

// injective reports whether operand which's strides map distinct indices
// to distinct offsets: sorted by stride, each dimension's stride clears
// the whole extent of the smaller ones.
func (it dims) injective(which int) bool {
	st := it.sa
	if which == 1 {
		st = it.sb
	}
	idx := make([]int, len(it.size))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool { return st[idx[x]] < st[idx[y]] })
	extent := 1
	for _, i := range idx {
		if st[i] < extent {
			return false
		}
		extent = st[i] * it.size[i]
	}
	return true
}

// param is the Dims struct of common.cuh: nd, then size, sa and sb, each
// padded to maxDims.
func (it dims) param() param {
	v := make([]int, 1+3*maxDims)
	v[0] = len(it.size)
	copy(v[1:], it.size)
	copy(v[1+maxDims:], it.sa)
	copy(v[1+2*maxDims:], it.sb)
	return pInts(v...)
}
