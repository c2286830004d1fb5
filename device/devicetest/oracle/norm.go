package oracle

import "math"

// Moments are per-channel statistics of x (N, C, ...) over every axis but
// the channel's: the mean and the biased variance.
func Moments(x Array) (mean, variance Array) {
	need(len(x.Shape) >= 2, "Moments", "input %v; want (N, C, ...)", x.Shape)
	n, c := x.Shape[0], x.Shape[1]
	hw := Numel(x.Shape[2:])
	mean, variance = New(c), New(c)
	count := float64(n * hw)
	for ch := range c {
		var s float64
		for i := range n {
			for j := range hw {
				s += x.Data[(i*c+ch)*hw+j]
			}
		}
		m := s / count
		var q float64
		for i := range n {
			for j := range hw {
				d := x.Data[(i*c+ch)*hw+j] - m
				q += d * d
			}
		}
		mean.Data[ch], variance.Data[ch] = m, q/count
	}
	return mean, variance
}

// BatchNorm is (x - mean)/√(var + eps)·gamma + beta per channel of x (N,
// C, ...), with the batch's own statistics (training mode) when mean and
// variance are nil, else those given (evaluation mode, the running
// statistics). gamma and beta may be nil (1 and 0).
func BatchNorm(x Array, gamma, beta, mean, variance *Array, eps float64) Array {
	if mean == nil {
		m, v := Moments(x)
		mean, variance = &m, &v
	}
	n, c := x.Shape[0], x.Shape[1]
	hw := Numel(x.Shape[2:])
	out := New(x.Shape...)
	for i := range n {
		for ch := range c {
			g, b := 1.0, 0.0
			if gamma != nil {
				g = gamma.Data[ch]
			}
			if beta != nil {
				b = beta.Data[ch]
			}
			inv := 1 / math.Sqrt(variance.Data[ch]+eps)
			for j := range hw {
				k := (i*c+ch)*hw + j
				out.Data[k] = (x.Data[k]-mean.Data[ch])*inv*g + b
			}
		}
	}
	return out
}

// LayerNorm normalises each row of x's last axis by its mean and biased
// variance, then applies w and b (that axis's length; b may be nil):
// torch.nn.LayerNorm.
func LayerNorm(x, w Array, b *Array, eps float64) Array {
	c := x.Shape[len(x.Shape)-1]
	need(len(w.Data) == c && (b == nil || len(b.Data) == c), "LayerNorm", "input %v, weight %v", x.Shape, w.Shape)
	out := New(x.Shape...)
	rows(x, out, func(in, o []float64) {
		var m, q float64
		for _, v := range in {
			m += v
		}
		m /= float64(c)
		for _, v := range in {
			q += (v - m) * (v - m)
		}
		inv := 1 / math.Sqrt(q/float64(c)+eps)
		for j, v := range in {
			o[j] = (v - m) * inv * w.Data[j]
			if b != nil {
				o[j] += b.Data[j]
			}
		}
	})
	return out
}
