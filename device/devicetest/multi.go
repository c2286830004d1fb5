package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// testMultiTensor checks device.MultiTensor, an optional interface: a
// backend without it has nothing to check. AdamMulti must give the bits of
// Adam (AdamCast where a copy is given) on each tensor in turn, and
// SumSquares the float64 sum of squares within the F32 rule, for tensors
// of lengths that cut into pieces unevenly.
func testMultiTensor(t *testing.T, dev device.Device) {
	mt, ok := optional[device.MultiTensor](dev)
	if !ok {
		t.Skipf("%s has no optional device.MultiTensor", dev.Name())
	}
	sc, _ := optional[device.StepCaster](dev)
	lengths := []int{1, 5000, 16384, 16385, 70000, 3}
	run(t, dev, "AdamMulti", func(e *env) {
		var steps []device.AdamStep
		var single [][4]device.Buffer
		var singleLow []device.Buffer
		for i, n := range lengths {
			h := device.AdamParams{LR: 1e-2 * float32(i+1), Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1 * float32(i%2), Decoupled: i%3 != 0, Step: 1 + i}
			p, g, m, v := e.uniform(n, -1, 1), e.uniform(n, -1, 1), e.uniform(n, -0.1, 0.1), e.uniform(n, 0, 0.01)
			s := device.AdamStep{P: e.put(dtype.F32, append([]float32(nil), p...)), G: e.put(dtype.F32, g),
				M: e.put(dtype.F32, append([]float32(nil), m...)), V: e.put(dtype.F32, append([]float32(nil), v...)), H: h}
			b := [4]device.Buffer{e.put(dtype.F32, p), s.G, e.put(dtype.F32, m), e.put(dtype.F32, v)}
			var low device.Buffer
			if sc != nil && i%2 == 0 {
				s.Low, low = e.alloc(dtype.BF16, n), e.alloc(dtype.BF16, n)
			}
			steps = append(steps, s)
			single = append(single, b)
			singleLow = append(singleLow, low)
		}
		mt.AdamMulti(steps)
		for i, s := range steps {
			b := single[i]
			if singleLow[i] != nil {
				sc.AdamCast(b[0], b[1], b[2], b[3], singleLow[i], s.H)
				e.exact(fmt.Sprintf("tensor %d low", i), e.get(s.Low), e.get(singleLow[i]))
			} else {
				dev.Adam(b[0], b[1], b[2], b[3], s.H)
			}
			e.exact(fmt.Sprintf("tensor %d p", i), e.get(s.P), e.get(b[0]))
			e.exact(fmt.Sprintf("tensor %d m", i), e.get(s.M), e.get(b[2]))
			e.exact(fmt.Sprintf("tensor %d v", i), e.get(s.V), e.get(b[3]))
		}
	})
	run(t, dev, "SumSquares", func(e *env) {
		var bufs []device.Buffer
		var want, abs float64
		n := 0
		for _, l := range lengths {
			x := e.uniform(l, -2, 2)
			bufs = append(bufs, e.put(dtype.F32, x))
			for _, v := range x {
				want += float64(v) * float64(v)
			}
			n += l
		}
		abs = want
		got := mt.SumSquares(bufs)
		if !dtype.Close(dtype.F32, got, want, sumSlack(n, abs)) {
			e.t.Errorf("SumSquares = %v, want %v", got, want)
		}
		if again := mt.SumSquares(bufs); math.Float64bits(again) != math.Float64bits(got) {
			e.t.Errorf("SumSquares gave %v, then %v", got, again)
		}
		if mt.SumSquares(nil) != 0 {
			e.t.Error("SumSquares of no buffers is not 0")
		}
	})
}
