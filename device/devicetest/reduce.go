package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// reduceCase is a Reduce (or Expand) geometry: the full shape, the strides
// through which it maps onto the small array, the small array's length, and
// alpha.
type reduceCase struct {
	name  string
	shape []int
	a     []int
	small int
	alpha float32
}

var reduceCases = []reduceCase{
	{"all(37,53)", []int{37, 53}, []int{0, 0}, 1, 1},
	{"rows(37,53)->(37)", []int{37, 53}, []int{1, 0}, 37, 1},
	{"cols(37,53)->(53)", []int{37, 53}, []int{0, 1}, 53, -2},
	{"nchw(4,6,5,7)->(6)/mean", []int{4, 6, 5, 7}, []int{0, 1, 0, 0}, 6, 1.0 / 140},
	{"nchw(4,6,5,7)->(4,1,5,1)", []int{4, 6, 5, 7}, []int{5, 0, 1, 0}, 20, 0.5},
	{"ones(3,1,5)->(1,1,5)", []int{3, 1, 5}, []int{0, 0, 1}, 5, 1},
	{"identity(6,7)", []int{6, 7}, []int{7, 1}, 42, 2},
	{"transpose(6,7)->(7,6)", []int{6, 7}, []int{1, 6}, 42, 1},
	{"one(1)", []int{1}, []int{0}, 1, 3},
	// An empty source (a batch of 0): the sum of nothing is 0. The source
	// buffer has one element, never read, so no buffer is empty.
	{"empty(0,5)->(5)", []int{0, 5}, []int{0, 1}, 5, 1},
	{"large/all(100003)", []int{100003}, []int{0}, 1, 1},
	{"large/cols(2000,50)->(50)", []int{2000, 50}, []int{0, 1}, 50, 1.0 / 2000},
	{"large/rows(50,2001)->(50)", []int{50, 2001}, []int{1, 0}, 50, 1},
	{"large/nchw(32,16,14,14)->(16)", []int{32, 16, 14, 14}, []int{0, 1, 0, 0}, 16, 1},
}

// reduceTypes are (dst; src): Reduce accumulates 16-bit sources into F32,
// as autocast's sum does.
var reduceTypes = sameAnd(1,
	mix(dtype.F32, dtype.F16),
	mix(dtype.F32, dtype.BF16),
	mix(dtype.BF16, dtype.F32),
)

// reduceRef sums src into the small array through c.a, scaled by alpha,
// with the accumulation slack of each output's sum.
func reduceRef(c reduceCase, src []float32) (want, slack []float64) {
	want = make([]float64, c.small)
	abs := make([]float64, c.small)
	count := make([]int, c.small)
	walk(c.shape, c.a, nil, func(i, o, _ int) {
		want[o] += float64(src[i])
		abs[o] += math.Abs(float64(src[i]))
		count[o]++
	})
	slack = make([]float64, c.small)
	for o := range want {
		want[o] *= float64(c.alpha)
		slack[o] = sumSlack(count[o], math.Abs(float64(c.alpha))*abs[o])
	}
	return want, slack
}

func testReduce(t *testing.T, dev device.Device) {
	for _, ty := range reduceTypes {
		for _, c := range reduceCases {
			run(t, dev, fmt.Sprintf("%v/%s/alpha%.4g", ty, c.name, c.alpha), func(e *env) {
				// Data with a mean, so the sums are not all small.
				src := e.uniform(max(1, numel(c.shape)), -1, 2)
				sb := e.put(ty.src[0], src)
				s := device.Strides{Shape: c.shape, A: c.a}
				got := e.output(ty.dst, c.small, func(db device.Buffer) {
					e.dev.Reduce(db, sb, s, c.alpha)
				})
				// The CPU backend accumulates in float64 and matches the
				// rounded reference exactly; sumSlack is for a backend
				// that accumulates in float32, as the contract allows.
				want, slack := reduceRef(c, src)
				e.near("dst", ty.dst, got, want, slack)
			})
		}
	}
}

func testExpand(t *testing.T, dev device.Device) {
	for _, ty := range reduceTypes {
		for _, c := range reduceCases {
			if numel(c.shape) == 0 {
				continue
			}
			run(t, dev, fmt.Sprintf("%v/%s/alpha%.4g", ty, c.name, c.alpha), func(e *env) {
				src := e.uniform(c.small, -2, 2)
				sb := e.put(ty.src[0], src)
				n := numel(c.shape)
				s := device.Strides{Shape: c.shape, A: c.a}
				got := e.output(ty.dst, n, func(db device.Buffer) {
					e.dev.Expand(db, sb, s, c.alpha)
				})
				want := make([]float64, n)
				walk(c.shape, c.a, nil, func(i, o, _ int) { want[i] = float64(c.alpha) * float64(src[o]) })
				e.near("dst", ty.dst, got, want, nil)
			})
		}
	}
}

// testReduceExpandAdjoint checks <Expand(x), y> == <x, Reduce(y)>: Expand
// is Reduce's adjoint, which is what makes it the gradient of a broadcast.
func testReduceExpandAdjoint(t *testing.T, dev device.Device) {
	for _, c := range reduceCases {
		if numel(c.shape) == 0 {
			continue
		}
		run(t, dev, c.name, func(e *env) {
			n := numel(c.shape)
			x, y := e.uniform(c.small, -1, 1), e.uniform(n, -1, 1)
			xb, yb := e.put(dtype.F32, x), e.put(dtype.F32, y)
			ex, ry := e.alloc(dtype.F32, n), e.alloc(dtype.F32, c.small)
			s := device.Strides{Shape: c.shape, A: c.a}
			e.dev.Expand(ex, xb, s, c.alpha)
			e.dev.Reduce(ry, yb, s, c.alpha)
			e.checkAdjoint("Expand, Reduce", e.get(ex), y, x, e.get(ry))
		})
	}
}
