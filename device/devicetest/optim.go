package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// optimSteps is how many steps each optimizer case runs in sequence.
const optimSteps = 5

func testSGD(t *testing.T, dev device.Device) {
	cases := []struct {
		name string
		h    device.SGDParams
	}{
		{"plain", device.SGDParams{LR: 0.1}},
		{"decay", device.SGDParams{LR: 0.1, WeightDecay: 0.01}},
		{"momentum", device.SGDParams{LR: 0.05, Momentum: 0.9}},
		{"dampening", device.SGDParams{LR: 0.05, Momentum: 0.9, Dampening: 0.1}},
		{"nesterov", device.SGDParams{LR: 0.05, Momentum: 0.9, Nesterov: true}},
		{"all", device.SGDParams{LR: 0.02, Momentum: 0.8, Dampening: 0.3, WeightDecay: 0.05}},
		{"nesterov+decay", device.SGDParams{LR: 0.02, Momentum: 0.95, WeightDecay: 1e-3, Nesterov: true}},
	}
	for _, c := range cases {
		for _, n := range []int{1, 1000, 50001} {
			run(t, dev, fmt.Sprintf("%s/n%d", c.name, n), func(e *env) {
				p0 := e.uniform(n, -1, 1)
				grads := make([][]float32, optimSteps)
				for s := range grads {
					grads[s] = e.uniform(n, -1, 1)
				}
				// The float64 run of torch.optim.SGD's step.
				p := widen(p0)
				buf := make([]float64, n)
				wantP, wantM := make([][]float64, optimSteps), make([][]float64, optimSteps)
				for s := range optimSteps {
					h := c.h
					for i := range p {
						d := float64(grads[s][i])
						if h.WeightDecay != 0 {
							d += float64(h.WeightDecay) * p[i]
						}
						if h.Momentum != 0 {
							if s == 0 {
								buf[i] = d
							} else {
								buf[i] = float64(h.Momentum)*buf[i] + (1-float64(h.Dampening))*d
							}
							if h.Nesterov {
								d += float64(h.Momentum) * buf[i]
							} else {
								d = buf[i]
							}
						}
						p[i] -= float64(h.LR) * d
					}
					wantP[s], wantM[s] = append([]float64(nil), p...), append([]float64(nil), buf...)
				}

				e.twice(func(fill float32) [][]float32 {
					first := isNaN32(fill) // check the values once, determinism twice
					pb := e.put(dtype.F32, append([]float32(nil), p0...))
					var mb device.Buffer
					if c.h.Momentum != 0 {
						// The first step sets the buffer without reading it.
						mb = e.full(dtype.F32, n, nan)
					}
					var out [][]float32
					for s := range optimSteps {
						h := c.h
						h.First = s == 0
						e.dev.SGD(pb, e.put(dtype.F32, grads[s]), mb, h)
						out = append(out, e.get(pb))
						if first {
							e.near(fmt.Sprintf("p after step %d", s+1), dtype.F32, out[len(out)-1], wantP[s], nil)
						}
						if mb != nil {
							out = append(out, e.get(mb))
							if first {
								e.near(fmt.Sprintf("momentum after step %d", s+1), dtype.F32, out[len(out)-1], wantM[s], nil)
							}
						}
					}
					return out
				})
			})
		}
	}
}

func testAdam(t *testing.T, dev device.Device) {
	cases := []struct {
		name  string
		h     device.AdamParams
		first int  // step number of the first step
		warm  bool // m and v start from a previous run's values, not zero
	}{
		{"adam", device.AdamParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, 1, false},
		{"adam/decay", device.AdamParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}, 1, false},
		{"adam/betas", device.AdamParams{LR: 5e-2, Beta1: 0.8, Beta2: 0.95, Eps: 1e-6}, 1, false},
		{"adam/resumed", device.AdamParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}, 10, true},
		{"adamw", device.AdamParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true}, 1, false},
		{"adamw/nodecay", device.AdamParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Decoupled: true}, 1, false},
		{"adamw/resumed", device.AdamParams{LR: 3e-3, Beta1: 0.85, Beta2: 0.99, Eps: 1e-7, WeightDecay: 0.1, Decoupled: true}, 100, true},
	}
	for _, c := range cases {
		for _, n := range []int{1, 1000, 50001} {
			run(t, dev, fmt.Sprintf("%s/n%d", c.name, n), func(e *env) {
				p0 := e.uniform(n, -1, 1)
				m0, v0 := make([]float32, n), make([]float32, n)
				if c.warm {
					m0 = e.uniform(n, -0.1, 0.1)
					v0 = e.uniform(n, 0, 0.01)
				}
				grads := make([][]float32, optimSteps)
				for s := range grads {
					grads[s] = e.uniform(n, -1, 1)
				}
				if n > 2 {
					grads[0][1] = 0 // a zero first gradient: 0/(0+eps)
				}
				// The float64 run of torch.optim.Adam / AdamW's step.
				h := c.h
				lr, b1, b2, eps, wd := float64(h.LR), float64(h.Beta1), float64(h.Beta2), float64(h.Eps), float64(h.WeightDecay)
				p, m, v := widen(p0), widen(m0), widen(v0)
				want := make([][3][]float64, optimSteps)
				for s := range optimSteps {
					step := float64(c.first + s)
					bc1, bc2 := 1-math.Pow(b1, step), 1-math.Pow(b2, step)
					for i := range p {
						g := float64(grads[s][i])
						if wd != 0 {
							if h.Decoupled {
								p[i] *= 1 - lr*wd
							} else {
								g += wd * p[i]
							}
						}
						m[i] = b1*m[i] + (1-b1)*g
						v[i] = b2*v[i] + (1-b2)*g*g
						p[i] -= lr / bc1 * m[i] / (math.Sqrt(v[i])/math.Sqrt(bc2) + eps)
					}
					want[s] = [3][]float64{append([]float64(nil), p...), append([]float64(nil), m...), append([]float64(nil), v...)}
				}

				e.twice(func(fill float32) [][]float32 {
					first := isNaN32(fill)
					pb := e.put(dtype.F32, append([]float32(nil), p0...))
					mb, vb := e.put(dtype.F32, append([]float32(nil), m0...)), e.put(dtype.F32, append([]float32(nil), v0...))
					var out [][]float32
					for s := range optimSteps {
						h := c.h
						h.Step = c.first + s
						e.dev.Adam(pb, e.put(dtype.F32, grads[s]), mb, vb, h)
						for k, b := range []device.Buffer{pb, mb, vb} {
							got := e.get(b)
							out = append(out, got)
							if !first {
								continue
							}
							e.near(fmt.Sprintf("%s after step %d", [3]string{"p", "m", "v"}[k], h.Step), dtype.F32, got, want[s][k], nil)
						}
					}
					return out
				})
			})
		}
	}
}

func testUnscaleCheck(t *testing.T, dev device.Device) {
	sizes := []int{10, 1000, 50001}
	inf := float32(math.Inf(1))
	cases := []struct {
		name string
		inv  float32
		// poison puts a non-finite value (or a finite one that overflows
		// when scaled) at buffer b, index i.
		b, i   int
		poison float32
		want   bool
	}{
		{"finite/pow2", 1.0 / 1024, -1, 0, 0, false},
		{"finite/third", 1.0 / 3, -1, 0, 0, false},
		{"inf/first", 0.5, 0, 3, inf, true},
		{"-inf/middle", 0.5, 1, 999, -inf, true},
		{"nan/last", 0.5, 2, 50000, nan, true},
		{"nan/firstpiece", 0.5, 2, 5, nan, true},
		{"inf/inv0", 0, 1, 7, inf, true}, // Inf*0 is NaN: non-finite before and after
		{"overflow/after", 4, 0, 9, 3e38, true},
	}
	for _, c := range cases {
		run(t, dev, c.name, func(e *env) {
			host := make([][]float32, len(sizes))
			for k, n := range sizes {
				host[k] = e.uniform(n, -1e4, 1e4)
			}
			if c.b >= 0 {
				host[c.b][c.i] = c.poison
			}
			e.twice(func(fill float32) [][]float32 {
				first := isNaN32(fill)
				bufs := make([]device.Buffer, len(sizes))
				for k := range sizes {
					bufs[k] = e.put(dtype.F32, append([]float32(nil), host[k]...))
				}
				found := e.dev.UnscaleCheck(bufs, c.inv)
				if first && found != c.want {
					e.t.Errorf("%s: UnscaleCheck returned %v, want %v", e.t.Name(), found, c.want)
				}
				var out [][]float32
				for k, b := range bufs {
					// Every element is multiplied, non-finite values or not
					// (PyTorch's _amp_foreach_non_finite_check_and_unscale_),
					// by one float32 multiply: exact.
					got := e.get(b)
					want := make([]float32, len(got))
					for i, v := range host[k] {
						want[i] = v * c.inv
					}
					if first {
						e.exact(fmt.Sprintf("grads[%d]", k), got, want)
					}
					out = append(out, got)
				}
				return out
			})
		})
	}
	// A non-finite value in any one buffer of several, each alone.
	for k := range sizes {
		run(t, dev, fmt.Sprintf("onlybuffer%d", k), func(e *env) {
			bufs := make([]device.Buffer, len(sizes))
			for j, n := range sizes {
				h := e.uniform(n, -1, 1)
				if j == k {
					h[n-1] = inf
				}
				bufs[j] = e.put(dtype.F32, h)
			}
			if !e.dev.UnscaleCheck(bufs, 0.25) {
				e.t.Errorf("%s: an Inf at the end of buffer %d of %d was not reported", e.t.Name(), k, len(sizes))
			}
		})
	}
	run(t, dev, "empty", func(e *env) {
		if e.dev.UnscaleCheck(nil, 0.5) {
			e.t.Errorf("%s: UnscaleCheck of no buffers reported a non-finite value", e.t.Name())
		}
	})
}
