package cpu

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

// iter walks an N-dimensional iteration space as rows of its innermost
// dimension, after merging every pair of adjacent dimensions that all
// operands traverse contiguously and dropping dimensions of size 1. The
// destination is contiguous over the space; operands a and b have strides.
type iter struct {
	L      int   // length of a row
	sa, sb int   // strides of a and b along a row
	dims   []int // outer dimensions, outermost first
	oa, ob []int // strides of a and b along the outer dimensions
	rows   int   // number of rows
}

func newIter(shape, a, b []int) iter {
	if len(a) != len(shape) || len(b) != len(shape) {
		panic(fmt.Sprintf("cpu: strides %v and %v do not match shape %v", a, b, shape))
	}
	dst := device.ContiguousStrides(shape)
	var sh, sa, sb, sd []int
	for i, n := range shape {
		if n == 1 {
			continue
		}
		k := len(sh) - 1
		if k >= 0 && sd[k] == dst[i]*n && sa[k] == a[i]*n && sb[k] == b[i]*n {
			sh[k] *= n
			sd[k], sa[k], sb[k] = dst[i], a[i], b[i]
			continue
		}
		sh = append(sh, n)
		sd = append(sd, dst[i])
		sa = append(sa, a[i])
		sb = append(sb, b[i])
	}
	if len(sh) == 0 {
		sh, sa, sb = []int{1}, []int{0}, []int{0}
	}
	k := len(sh) - 1
	it := iter{L: sh[k], sa: sa[k], sb: sb[k], dims: sh[:k], oa: sa[:k], ob: sb[:k]}
	it.rows = 1
	for _, n := range it.dims {
		it.rows *= n
	}
	return it
}

// bases returns where row r starts in a and b (the destination row starts at r*L).
func (it *iter) bases(r int) (a, b int) {
	for i := len(it.dims) - 1; i >= 0; i-- {
		n := it.dims[i]
		q := r % n
		r /= n
		a += q * it.oa[i]
		b += q * it.ob[i]
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
