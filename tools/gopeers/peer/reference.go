package peer

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// What the peers' tests check their frameworks against.

// RandomSet is n random images (normal values) with random labels.
func RandomSet(rng *rand.Rand, n int) *MNIST {
	d := &MNIST{N: n, Images: make([]float32, n*784), Labels: make([]uint8, n)}
	for i := range d.Images {
		d.Images[i] = float32(rng.NormFloat64())
	}
	for i := range d.Labels {
		d.Labels[i] = uint8(rng.IntN(10))
	}
	return d
}

// Reference is PyTorch's recipe for a single Linear layer (784 -> 10) in
// float64, started from a peer's initial weights, for a test to step
// beside the peer's framework and compare.
type Reference struct {
	W, B       []float64 // the weights (784, 10) and the bias (10)
	wBuf, bBuf []float64 // SGD's momentum buffers
	steps      int
}

// NewReference starts a Reference from the weights w (784, 10) and the
// bias b.
func NewReference(w, b []float32) *Reference {
	return &Reference{W: Float64s(w), B: Float64s(b), wBuf: make([]float64, len(w)), bBuf: make([]float64, len(b))}
}

// Step returns the mean cross-entropy of the batch idx of d and makes the
// update of torch.optim.SGD with momentum: buf = g at the first step, then
// buf = momentum*buf + g; w -= lr*buf.
func (r *Reference) Step(d *MNIST, idx []int, lr, momentum float64) float64 {
	w, b := r.W, r.B
	gw, gb := make([]float64, len(w)), make([]float64, len(b))
	loss := 0.0
	for _, j := range idx {
		x := d.Images[j*784 : (j+1)*784]
		z := make([]float64, 10)
		for o := range z {
			z[o] = b[o]
			for i := range 784 {
				z[o] += float64(x[i]) * w[i*10+o]
			}
		}
		m := math.Inf(-1)
		for _, v := range z {
			m = math.Max(m, v)
		}
		sum := 0.0
		for _, v := range z {
			sum += math.Exp(v - m)
		}
		y := int(d.Labels[j])
		loss += -(z[y] - m - math.Log(sum))
		for o := range z {
			g := math.Exp(z[o]-m) / sum
			if o == y {
				g--
			}
			g /= float64(len(idx))
			gb[o] += g
			for i := range 784 {
				gw[i*10+o] += float64(x[i]) * g
			}
		}
	}
	update := func(p, buf, g []float64) {
		for i := range p {
			if r.steps == 0 {
				buf[i] = g[i]
			} else {
				buf[i] = momentum*buf[i] + g[i]
			}
			p[i] -= lr * buf[i]
		}
	}
	update(w, r.wBuf, gw)
	update(b, r.bBuf, gb)
	r.steps++
	return loss / float64(len(idx))
}

// Differs describes the first weight, then bias, of a peer's w and b that
// is not Near the reference's, or returns "" when all are.
func (r *Reference) Differs(w, b []float32) string {
	for i, v := range w {
		if !Near(v, r.W[i]) {
			return fmt.Sprintf("weight %d = %v, want %v", i, v, r.W[i])
		}
	}
	for i, v := range b {
		if !Near(v, r.B[i]) {
			return fmt.Sprintf("bias %d = %v, want %v", i, v, r.B[i])
		}
	}
	return ""
}

// Near is the project's F32 tolerance: |got-want| <= 1e-5 + 1e-4·|want|.
func Near(got float32, want float64) bool {
	return math.Abs(float64(got)-want) <= 1e-5+1e-4*math.Abs(want)
}

// Separable is a training and a test set that an MLP learns in a few
// dozen steps: each class a fixed random pattern (drawn first) plus noise
// of unit variance.
func Separable(rng *rand.Rand, ntrain, ntest int) (train, test *MNIST) {
	protos := RandomSet(rng, 10)
	sample := func(n int) *MNIST {
		d := &MNIST{N: n, Images: make([]float32, n*784), Labels: make([]uint8, n)}
		for i := range n {
			c := rng.IntN(10)
			d.Labels[i] = uint8(c)
			for k := range 784 {
				d.Images[i*784+k] = protos.Images[c*784+k] + float32(rng.NormFloat64())
			}
		}
		return d
	}
	return sample(ntrain), sample(ntest)
}

// Float64s is v widened, for a reference.
func Float64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
