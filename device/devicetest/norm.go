package devicetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// normCase is an (n, c, hw) batch-norm geometry. Channel ch's data are
// drawn around a mean of shift*(ch+1) with spread spread.
type normCase struct {
	name          string
	n, c, hw      int
	shift, spread float64
}

var normCases = []normCase{
	{"4x3x25", 4, 3, 25, 0.5, 1},
	{"2x5x1", 2, 5, 1, 1, 1},
	{"1x8x49", 1, 8, 49, -0.3, 2},
	{"1x1x1", 1, 1, 1, 0, 1},
	{"16x4x3", 16, 4, 3, 0, 0.1},
	// A mean of 30..120 with a spread of 1: a one-pass E[x^2]-E[x]^2 in
	// float32 loses the variance, which a two-pass or Welford kernel keeps.
	{"offset/8x4x16", 8, 4, 16, 30, 1},
	{"large/32x16x196", 32, 16, 196, 0.2, 1},
	// Channels of 12,300 elements, which a GPU backend sums in parts
	// (cudaops: three of 4,100) and then adds the parts.
	{"parts/3x2x4100", 3, 2, 4100, 2, 1},
}

func (e *env) normInput(c normCase) []float32 {
	x := make([]float32, c.n*c.c*c.hw)
	for i := range c.n {
		for ch := range c.c {
			for j := range c.hw {
				x[(i*c.c+ch)*c.hw+j] = float32(c.shift*float64(ch+1) + c.spread*(2*e.rng.Float64()-1))
			}
		}
	}
	return x
}

// moments returns the float64 per-channel mean and biased variance of x
// (n, c, hw), two-pass.
func moments(x []float32, n, c, hw int) (mean, variance []float64) {
	mean, variance = make([]float64, c), make([]float64, c)
	m := float64(n * hw)
	for ch := range c {
		var s float64
		for i := range n {
			for _, v := range x[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				s += float64(v)
			}
		}
		mean[ch] = s / m
		var q float64
		for i := range n {
			for _, v := range x[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				q += (float64(v) - mean[ch]) * (float64(v) - mean[ch])
			}
		}
		variance[ch] = q / m
	}
	return mean, variance
}

func testMoments(t *testing.T, dev device.Device) {
	for _, dt := range dtype.All {
		for _, c := range normCases {
			run(t, dev, fmt.Sprintf("%v/%s", dtName(dtype.F32, dt), c.name), func(e *env) {
				x := e.normInput(c)
				xb := e.put(dt, x)
				got := e.twice(func(fill float32) [][]float32 {
					mb, vb := e.full(dtype.F32, c.c, fill), e.full(dtype.F32, c.c, fill)
					e.dev.Moments(mb, vb, xb, c.n, c.c, c.hw)
					return [][]float32{e.get(mb), e.get(vb)}
				})
				mean, variance := moments(x, c.n, c.c, c.hw)
				m := c.n * c.hw
				ms, vs := make([]float64, c.c), make([]float64, c.c)
				for ch := range c.c {
					// The mean is a float32 sum of m values of size about
					// |mean|+spread, divided by m; a two-pass float32
					// variance is off by the mean's error squared, far less.
					ms[ch] = sumSlack(m, math.Abs(mean[ch])+c.spread)
					vs[ch] = sumSlack(m, variance[ch])
				}
				e.near("mean", dtype.F32, got[0], mean, ms)
				e.near("variance", dtype.F32, got[1], variance, vs)
			})
		}
	}
}

// bnParams returns stored (F32) batch statistics of x, as Moments and a
// 1/sqrt(var+eps) would give them, and random gamma and beta.
func (e *env) bnParams(x []float32, c normCase) (mean, invstd, gamma, beta []float32) {
	m64, v64 := moments(x, c.n, c.c, c.hw)
	mean, invstd = make([]float32, c.c), make([]float32, c.c)
	for ch := range c.c {
		mean[ch] = float32(m64[ch])
		invstd[ch] = float32(1 / math.Sqrt(v64[ch]+1e-5))
	}
	return mean, invstd, e.uniform(c.c, 0.5, 1.5), e.uniform(c.c, -1, 1)
}

// bnTypes are (y or dx; x) with the dtypes of the other operands' fixed at
// F32 by the contract, plus dy in BatchNormGrad.
var bnTypes = sameAnd(2, mix(dtype.F32, dtype.F16, dtype.F16), mix(dtype.BF16, dtype.F32, dtype.BF16), mix(dtype.F16, dtype.BF16, dtype.F32))

func testBatchNorm(t *testing.T, dev device.Device) {
	for _, ty := range bnTypes {
		for _, c := range normCases {
			run(t, dev, fmt.Sprintf("%v/%s", dtCase{ty.dst, ty.src[:1]}, c.name), func(e *env) {
				x := e.normInput(c)
				xb := e.put(ty.src[0], x)
				mean, invstd, gamma, beta := e.bnParams(x, c)
				mb, ib, gb, bb := e.put(dtype.F32, mean), e.put(dtype.F32, invstd), e.put(dtype.F32, gamma), e.put(dtype.F32, beta)
				got := e.output(ty.dst, len(x), func(yb device.Buffer) {
					e.dev.BatchNorm(yb, xb, mb, ib, gb, bb, c.n, c.c, c.hw)
				})
				want, slack := make([]float64, len(x)), make([]float64, len(x))
				for i, v := range x {
					ch := i / c.hw % c.c
					s := float64(invstd[ch]) * float64(gamma[ch])
					want[i] = (float64(v)-float64(mean[ch]))*s + float64(beta[ch])
					// A kernel may fold the affine map into x*scale+shift,
					// whose float32 rounding is relative to |mean*scale|,
					// not to the (smaller) result. The CPU backend does, and
					// on the offset case (means up to 120) misses the plain
					// F32 tolerance by 8% (1.6e-5 absolute at y = 0.028);
					// with this slack it uses 36% of the allowance.
					slack[i] = 2 * u32 * (math.Abs(float64(mean[ch])*s) + math.Abs(float64(beta[ch])))
				}
				e.near("y", ty.dst, got, want, slack)
			})
		}
	}
}

// bnGradRef is the float64 gradient of training-mode batch norm given the
// statistics the forward used: with xhat = (x-mean)*invstd,
// dbeta = sum dy, dgamma = sum dy*xhat, and
// dx = gamma*invstd/m * (m*dy - dbeta - xhat*dgamma), m = n*hw.
func bnGradRef(dy, x []float64, mean, invstd, gamma []float64, n, c, hw int) (dx, dgamma, dbeta []float64) {
	dx, dgamma, dbeta = make([]float64, len(x)), make([]float64, c), make([]float64, c)
	m := float64(n * hw)
	for i := range x {
		ch := i / hw % c
		dbeta[ch] += dy[i]
		dgamma[ch] += dy[i] * (x[i] - mean[ch]) * invstd[ch]
	}
	for i := range x {
		ch := i / hw % c
		xhat := (x[i] - mean[ch]) * invstd[ch]
		dx[i] = gamma[ch] * invstd[ch] / m * (m*dy[i] - dbeta[ch] - xhat*dgamma[ch])
	}
	return dx, dgamma, dbeta
}

// bnLoss is L = sum w*y with y the training-mode batch norm of x: the
// statistics are recomputed from x, so a finite difference of L sees them
// move.
func bnLoss(w, x, gamma, beta []float64, n, c, hw int, eps float64) float64 {
	mean, variance := make([]float64, c), make([]float64, c)
	m := float64(n * hw)
	for i, v := range x {
		mean[i/hw%c] += v / m
	}
	for i, v := range x {
		d := v - mean[i/hw%c]
		variance[i/hw%c] += d * d / m
	}
	var l float64
	for i, v := range x {
		ch := i / hw % c
		l += w[i] * ((v-mean[ch])/math.Sqrt(variance[ch]+eps)*gamma[ch] + beta[ch])
	}
	return l
}

func testBatchNormGrad(t *testing.T, dev device.Device) {
	// First the reference itself, against central differences in float64.
	t.Run("reference/finitedifference", func(t *testing.T) {
		e := newEnv(t, nil)
		const n, c, hw, eps = 3, 2, 4, 1e-5
		x, w := widen(e.uniform(n*c*hw, -2, 2)), widen(e.uniform(n*c*hw, -1, 1))
		gamma, beta := widen(e.uniform(c, 0.5, 1.5)), widen(e.uniform(c, -1, 1))
		mean, invstd := make([]float64, c), make([]float64, c)
		xs := make([]float32, len(x))
		for i, v := range x {
			xs[i] = float32(v)
		}
		m, v := moments(xs, n, c, hw)
		for ch := range c {
			mean[ch], invstd[ch] = m[ch], 1/math.Sqrt(v[ch]+eps)
		}
		dx, dgamma, dbeta := bnGradRef(w, x, mean, invstd, gamma, n, c, hw)
		const h = 1e-6
		fd := func(p []float64, i int) float64 {
			old := p[i]
			p[i] = old + h
			lp := bnLoss(w, x, gamma, beta, n, c, hw, eps)
			p[i] = old - h
			lm := bnLoss(w, x, gamma, beta, n, c, hw, eps)
			p[i] = old
			return (lp - lm) / (2 * h)
		}
		check := func(what string, p, grad []float64) {
			for i := range p {
				if d := fd(p, i); math.Abs(d-grad[i]) > 1e-6*(1+math.Abs(d)) {
					t.Errorf("%s: %s[%d]: formula %.9g, central difference %.9g", t.Name(), what, i, grad[i], d)
				}
			}
		}
		check("dx", x, dx)
		check("dgamma", gamma, dgamma)
		check("dbeta", beta, dbeta)
	})

	for _, ty := range bnTypes {
		for _, c := range normCases {
			run(t, dev, fmt.Sprintf("%v/%s", ty, c.name), func(e *env) {
				x := e.normInput(c)
				dy := e.uniform(len(x), -1, 1)
				dyb, xb := e.put(ty.src[0], dy), e.put(ty.src[1], x)
				mean, invstd, gamma, _ := e.bnParams(x, c)
				mb, ib, gb := e.put(dtype.F32, mean), e.put(dtype.F32, invstd), e.put(dtype.F32, gamma)
				got := e.twice(func(fill float32) [][]float32 {
					db := e.full(ty.dst, len(x), fill)
					dgb, dbb := e.full(dtype.F32, c.c, fill), e.full(dtype.F32, c.c, fill)
					e.dev.BatchNormGrad(db, dgb, dbb, dyb, xb, mb, ib, gb, c.n, c.c, c.hw)
					return [][]float32{e.get(db), e.get(dgb), e.get(dbb)}
				})
				checkBNGrad(e, c, ty.dst, got, dy, x, mean, invstd, gamma)
			})
		}
	}
}

// bnActVariants are BatchNormAct's four forms: with and without the
// residual, with and without the ReLU.
var bnActVariants = []struct {
	name      string
	res, relu bool
}{{"plain", false, false}, {"relu", false, true}, {"res", true, false}, {"res+relu", true, true}}

// testBatchNormAct checks device.BatchNormActKernels' forward where a
// backend has it: y = relu(BatchNorm(x) + res) in every dtype, with and
// without the residual and the ReLU, against the float64 reference, with
// testBatchNorm's slack for the folded affine map plus a rounding of the
// residual.
func testBatchNormAct(t *testing.T, dev device.Device) {
	ba, ok := optional[device.BatchNormActKernels](dev)
	if !ok {
		t.Skip("the backend does not implement the optional device.BatchNormActKernels")
	}
	for _, dt := range dtype.All {
		for _, c := range normCases {
			for _, v := range bnActVariants {
				run(t, dev, fmt.Sprintf("%v/%s/%s", dt, v.name, c.name), func(e *env) {
					x, r := e.normInput(c), e.uniform(c.n*c.c*c.hw, -2, 2)
					xb, rb := e.put(dt, x), e.put(dt, r)
					var res device.Buffer
					if v.res {
						res = rb
					}
					mean, invstd, gamma, beta := e.bnParams(x, c)
					mb, ib, gb, bb := e.put(dtype.F32, mean), e.put(dtype.F32, invstd), e.put(dtype.F32, gamma), e.put(dtype.F32, beta)
					got := e.twice(func(fill float32) [][]float32 {
						yb := e.full(dt, len(x), fill)
						ba.BatchNormAct(yb, xb, res, mb, ib, gb, bb, c.n, c.c, c.hw, v.relu)
						return [][]float32{e.get(yb)}
					})[0]
					want, slack := make([]float64, len(x)), make([]float64, len(x))
					for i, xv := range x {
						ch := i / c.hw % c.c
						s := float64(invstd[ch]) * float64(gamma[ch])
						z := (float64(xv)-float64(mean[ch]))*s + float64(beta[ch])
						slack[i] = 2 * u32 * (math.Abs(float64(mean[ch])*s) + math.Abs(float64(beta[ch])))
						if v.res {
							z += float64(r[i])
							slack[i] += 2 * u32 * math.Abs(float64(r[i]))
						}
						if v.relu && z < 0 {
							z = 0
						}
						want[i] = z
					}
					e.near("y", dt, got, want, slack)
				})
			}
		}
	}
}

// testBatchNormActGrad checks device.BatchNormActKernels' gradient where a
// backend has it: dz = dy where ReLU's output y is positive (zero
// elsewhere) when relu, stored exactly into dres when it is given, and
// BatchNormGrad of dz against bnGradRef with testBatchNormGrad's slack.
func testBatchNormActGrad(t *testing.T, dev device.Device) {
	ba, ok := optional[device.BatchNormActKernels](dev)
	if !ok {
		t.Skip("the backend does not implement the optional device.BatchNormActKernels")
	}
	for _, dt := range dtype.All {
		for _, c := range normCases {
			for _, v := range bnActVariants {
				run(t, dev, fmt.Sprintf("%v/%s/%s", dt, v.name, c.name), func(e *env) {
					x, dy, y := e.normInput(c), e.uniform(c.n*c.c*c.hw, -1, 1), e.uniform(c.n*c.c*c.hw, -1, 1)
					roundTo(dt, dy)
					xb, dyb, yb := e.put(dt, x), e.put(dt, dy), e.put(dt, y)
					mean, invstd, gamma, _ := e.bnParams(x, c)
					mb, ib, gb := e.put(dtype.F32, mean), e.put(dtype.F32, invstd), e.put(dtype.F32, gamma)
					got := e.twice(func(fill float32) [][]float32 {
						db, drb := e.full(dt, len(x), fill), e.full(dt, len(x), fill)
						dgb, dbb := e.full(dtype.F32, c.c, fill), e.full(dtype.F32, c.c, fill)
						var dres device.Buffer
						if v.res {
							dres = drb
						}
						ba.BatchNormActGrad(db, dres, dgb, dbb, dyb, yb, xb, mb, ib, gb, c.n, c.c, c.hw, v.relu)
						out := [][]float32{e.get(db), e.get(dgb), e.get(dbb)}
						if v.res {
							out = append(out, e.get(drb))
						}
						return out
					})
					dz := make([]float32, len(dy))
					for i := range dy {
						if !v.relu || y[i] > 0 {
							dz[i] = dy[i]
						}
					}
					if v.res {
						e.exact("dres", got[3], dz)
					}
					checkBNGrad(e, c, dt, got, dz, x, mean, invstd, gamma)
				})
			}
		}
	}
}

// checkBNGrad checks got's dx (in dt), dgamma and dbeta against bnGradRef
// of dy: dbeta and dgamma are sums of m terms, with sumSlack of their
// magnitudes, and dx subtracts them (scaled by gamma*invstd/m).
func checkBNGrad(e *env, c normCase, dt dtype.DType, got [][]float32, dy, x, mean, invstd, gamma []float32) {
	dx, dgamma, dbeta := bnGradRef(widen(dy), widen(x), widen(mean), widen(invstd), widen(gamma), c.n, c.c, c.hw)
	m := c.n * c.hw
	absDy, absDyx := make([]float64, c.c), make([]float64, c.c)
	for i := range x {
		ch := i / c.hw % c.c
		absDy[ch] += math.Abs(float64(dy[i]))
		absDyx[ch] += math.Abs(float64(dy[i]) * (float64(x[i]) - float64(mean[ch])) * float64(invstd[ch]))
	}
	sg, sb := make([]float64, c.c), make([]float64, c.c)
	for ch := range c.c {
		sg[ch], sb[ch] = sumSlack(m, absDyx[ch]), sumSlack(m, absDy[ch])
	}
	sx := make([]float64, len(x))
	for i := range x {
		ch := i / c.hw % c.c
		xhat := math.Abs((float64(x[i]) - float64(mean[ch])) * float64(invstd[ch]))
		k := float64(gamma[ch]) * float64(invstd[ch]) / float64(m)
		sx[i] = k * (sb[ch] + xhat*sg[ch] + 2*u32*(float64(m)*math.Abs(float64(dy[i]))+absDy[ch]+xhat*absDyx[ch]))
	}
	e.near("dx", dt, got[0], dx, sx)
	e.near("dgamma", dtype.F32, got[1], dgamma, sg)
	e.near("dbeta", dtype.F32, got[2], dbeta, sb)
}
