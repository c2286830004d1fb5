package cpu

import (
	"fmt"
	"slices"
)

// iter walks an N-dimensional iteration space as rows of its innermost
// dimension, after merging every pair of adjacent dimensions that all
// operands traverse contiguously and dropping dimensions of size 1. The
// destination is contiguous over the space; operands a and b have strides.
// The outer dimensions are held inline up to iterDims of them (every
// tensor of the examples), so that making an iter allocates nothing; more
// go to slices of their own.
type iter struct {
	L      int // length of a row
	sa, sb int // strides of a and b along a row
	rows   int // number of rows
	nd     int // outer dimensions
	// The outer dimensions, outermost first, and a's and b's strides
	// along them: in the arrays up to iterDims, else in big.
	dims, oa, ob [iterDims]int
	big          *[3][]int
}

// iterDims is how many outer dimensions an iter holds inline.
const iterDims = 8

// outer returns it's outer dimensions and a's and b's strides along them.
func (it *iter) outer() (dims, oa, ob []int) {
	if it.big != nil {
		return it.big[0], it.big[1], it.big[2]
	}
	return it.dims[:it.nd], it.oa[:it.nd], it.ob[:it.nd]
}

func newIter(shape, a, b []int) iter {
	if len(a) != len(shape) || len(b) != len(shape) {
		panic(fmt.Sprintf("cpu: strides %v and %v do not match shape %v", a, b, shape))
	}
	// The merged dimensions (shape, destination, a and b strides), on the
	// stack for up to 2*iterDims of them.
	var space [4][2 * iterDims]int
	sh, sd, sa, sb := space[0][:0], space[1][:0], space[2][:0], space[3][:0]
	dst := 1 // the destination's contiguous stride of dimension i
	for _, n := range shape {
		dst *= max(n, 1)
	}
	for i, n := range shape {
		if n > 0 {
			dst /= n
		}
		if n == 1 {
			continue
		}
		k := len(sh) - 1
		if k >= 0 && sd[k] == dst*n && sa[k] == a[i]*n && sb[k] == b[i]*n {
			sh[k] *= n
			sd[k], sa[k], sb[k] = dst, a[i], b[i]
			continue
		}
		sh = append(sh, n)
		sd = append(sd, dst)
		sa = append(sa, a[i])
		sb = append(sb, b[i])
	}
	if len(sh) == 0 {
		sh, sa, sb = append(sh, 1), append(sa, 0), append(sb, 0)
	}
	k := len(sh) - 1
	it := iter{L: sh[k], sa: sa[k], sb: sb[k], rows: 1, nd: k}
	if k <= iterDims {
		copy(it.dims[:], sh[:k])
		copy(it.oa[:], sa[:k])
		copy(it.ob[:], sb[:k])
	} else {
		it.big = &[3][]int{slices.Clone(sh[:k]), slices.Clone(sa[:k]), slices.Clone(sb[:k])}
	}
	for _, n := range sh[:k] {
		it.rows *= n
	}
	return it
}

// bases returns where row r starts in a and b (the destination row starts at r*L).
func (it *iter) bases(r int) (a, b int) {
	dims, oa, ob := it.outer()
	for i := len(dims) - 1; i >= 0; i-- {
		n := dims[i]
		q := r % n
		r /= n
		a += q * oa[i]
		b += q * ob[i]
	}
	return a, b
}

// forRows runs fn on every row, in parallel pieces of about grain elements.
func (d *Device) forRows(it *iter, fn func(r int)) {
	per := max(1, grain/max(it.L, 1))
	d.parallelGrain(it.rows, per, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			fn(r)
		}
	})
}

// readRow returns a float32 view of the L elements of b from base with stride
// s; for s == 0 the view has one element, which the caller broadcasts.
func readRow(b *Buffer, base, s, L int) view {
	switch s {
	case 1:
		return read(b, base, base+L)
	case 0:
		t := getScratch(1)
		(*t)[0] = get(b, base)
		return view{v: *t, tmp: t}
	}
	t := getScratch(L)
	for j := range L {
		(*t)[j] = get(b, base+j*s)
	}
	return view{v: *t, tmp: t}
}
