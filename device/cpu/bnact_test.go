package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestBatchNormActSIMD checks the loops of bnact_amd64.s against the Go
// loops bit for bit (any NaN matching any NaN), in F32, BF16 and F16 storage,
// for every combination of residual and ReLU, lengths on both sides of
// the 16-element step, and values of many magnitudes with infinities,
// NaNs, zeros of both signs and subnormals among them: the fused forward,
// the gradient's sums (and the residual's gradient it stores) and its
// output, and the 16-bit statistics.
func TestBatchNormActSIMD(t *testing.T) {
	if simdNormLevel != simdAVX512 {
		t.Skip("no AVX-512 on this CPU: only the Go loops run")
	}
	d := New()
	defer d.Close()
	same := func(a, b float32) bool {
		return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
	}
	for _, dt := range dtype.All {
		for _, n := range []int{1, 7, 15, 16, 17, 31, 32, 33, 100, 1024} {
			for flags := 0; flags < 4; flags++ {
				t.Run(fmt.Sprintf("%v/n%d/flags%d", dt, n, flags), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(n), uint64(flags)))
					put := func() *Buffer {
						v := optimValues(rng, n+3)
						b := d.Alloc(dt, n+3, device.Temp)
						d.CopyFromHost(b, v)
						t.Cleanup(func() { d.Free(b) })
						return b.(*Buffer)
					}
					x, res, dy, y := put(), put(), put(), put()
					mu, is := rng.NormFloat64(), math.Abs(rng.NormFloat64())+0.1
					k := &bnGradConsts{mu: mu, is: is, m: float64(n), sdy: rng.NormFloat64(), sdyx: rng.NormFloat64(), k: rng.Float64()}
					type out struct {
						act, dres, dx []float32
						sums          [4]float64
					}
					var r [2]out
					for i, l := range []simdLevel{simdGo, simdAVX512} {
						withNormLevel(l, func() {
							rb, yb := res, y
							if flags&bnRes == 0 {
								rb = nil
							}
							if flags&bnReLU == 0 {
								yb = nil
							}
							act, dres, dx := put(), put(), put()
							if flags&bnRes == 0 {
								dres = nil
							}
							bnActPlane(act, x, rb, 3, n, 0.75, -0.25, flags)
							r[i].sums[0], r[i].sums[1] = bnActGradSumsPlane(dres, dy, yb, x, 3, n, mu, is, flags)
							bnActGradOutPlane(dx, dy, yb, x, 3, n, k, flags&bnReLU)
							r[i].act, r[i].dx = d.host(act)[3:3+n], d.host(dx)[3:3+n]
							if dres != nil {
								r[i].dres = d.host(dres)[3 : 3+n]
							}
							r[i].sums[2] = sumPlane(x, 3, n)
							r[i].sums[3] = sumSqDevPlane(x, 3, n, mu)
						})
					}
					for _, c := range []struct {
						what      string
						got, want []float32
					}{{"act", r[1].act, r[0].act}, {"dres", r[1].dres, r[0].dres}, {"dx", r[1].dx, r[0].dx}} {
						for j := range c.want {
							if !same(c.got[j], c.want[j]) {
								t.Fatalf("%s[%d]: assembly %v (%#x), Go %v (%#x)", c.what, j, c.got[j], math.Float32bits(c.got[j]), c.want[j], math.Float32bits(c.want[j]))
							}
						}
					}
					for j, what := range []string{"sdy", "sdyx", "sum", "sumSqDev"} {
						if a, b := r[1].sums[j], r[0].sums[j]; math.Float64bits(a) != math.Float64bits(b) && !(a != a && b != b) {
							t.Errorf("%s: assembly %v, Go %v", what, a, b)
						}
					}
				})
			}
		}
	}
}

// host copies b to the host.
func (d *Device) host(b *Buffer) []float32 {
	out := make([]float32, b.n)
	d.CopyToHost(out, b)
	return out
}

// TestAddSIMD checks Axpby's alpha = beta = 1 loop of bnact_amd64.s (the
// sum of gradients that meet) against the Go loop bit for bit, any NaN
// matching any NaN, in F32, BF16 and F16, over lengths on both sides of the
// 16-element step and values with infinities, NaNs and signed zeros.
func TestAddSIMD(t *testing.T) {
	if simdNormLevel != simdAVX512 {
		t.Skip("no AVX-512 on this CPU: only the Go loop runs")
	}
	d := New()
	defer d.Close()
	for _, dt := range dtype.All {
		for _, n := range []int{1, 15, 16, 17, 100, 1024} {
			t.Run(fmt.Sprintf("%v/n%d", dt, n), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(n), 3))
				put := func() *Buffer {
					b := d.Alloc(dt, n, device.Temp)
					d.CopyFromHost(b, optimValues(rng, n))
					t.Cleanup(func() { d.Free(b) })
					return b.(*Buffer)
				}
				x, y := put(), put()
				var got [2][]float32
				for i, l := range []simdLevel{simdGo, simdAVX512} {
					withNormLevel(l, func() {
						out := put()
						axpbyPiece(out, x, y, 1, 1, 0, n)
						got[i] = d.host(out)
					})
				}
				for j := range got[0] {
					a, b := got[1][j], got[0][j]
					if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
						t.Fatalf("[%d]: assembly %v (%#x), Go %v (%#x)", j, a, math.Float32bits(a), b, math.Float32bits(b))
					}
				}
			})
		}
	}
}
