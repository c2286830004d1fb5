package oracle

import "math"

// Conv2d is the 2-D cross-correlation (PyTorch's convolution) of x (N, C,
// H, W) with w (OC, C, KH, KW), plus b (OC) unless it is nil, with one
// stride and zero padding for both axes: (N, OC, OH, OW).
func Conv2d(x, w Array, b *Array, stride, pad int) Array {
	need(len(x.Shape) == 4 && len(w.Shape) == 4 && x.Shape[1] == w.Shape[1], "Conv2d", "input %v, weight %v", x.Shape, w.Shape)
	n, c, h, wd := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oc, kh, kw := w.Shape[0], w.Shape[2], w.Shape[3]
	oh, ow := (h+2*pad-kh)/stride+1, (wd+2*pad-kw)/stride+1
	out := New(n, oc, oh, ow)
	for i := range n {
		for o := range oc {
			for y := range oh {
				for z := range ow {
					s := biasOf(b, o)
					for ch := range c {
						for u := range kh {
							for v := range kw {
								r, q := y*stride-pad+u, z*stride-pad+v
								if r >= 0 && r < h && q >= 0 && q < wd {
									s += x.Data[((i*c+ch)*h+r)*wd+q] * w.Data[((o*c+ch)*kh+u)*kw+v]
								}
							}
						}
					}
					out.Data[((i*oc+o)*oh+y)*ow+z] = s
				}
			}
		}
	}
	return out
}

// pool2d applies reduce to every k x k window (stride, zero padding) of x
// (N, C, H, W), giving (N, C, OH, OW). reduce gets the window's values
// inside the image and the window's full size, padding included.
func pool2d(x Array, k, stride, pad int, reduce func(v []float64, size int) float64) Array {
	need(len(x.Shape) == 4, "pool", "input %v; want (N, C, H, W)", x.Shape)
	n, c, h, w := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	oh, ow := (h+2*pad-k)/stride+1, (w+2*pad-k)/stride+1
	out := New(n, c, oh, ow)
	var win []float64
	for p := range n * c {
		for y := range oh {
			for z := range ow {
				win = win[:0]
				for u := range k {
					for v := range k {
						r, q := y*stride-pad+u, z*stride-pad+v
						if r >= 0 && r < h && q >= 0 && q < w {
							win = append(win, x.Data[(p*h+r)*w+q])
						}
					}
				}
				out.Data[(p*oh+y)*ow+z] = reduce(win, k*k)
			}
		}
	}
	return out
}

// MaxPool2d is the maximum of each k x k window (padding never wins; a
// window holding a NaN has a NaN maximum).
func MaxPool2d(x Array, k, stride, pad int) Array {
	return pool2d(x, k, stride, pad, func(v []float64, _ int) float64 {
		m := math.Inf(-1)
		for _, x := range v {
			if isNaN(x) {
				return x
			}
			m = math.Max(m, x)
		}
		return m
	})
}

// AvgPool2d is the mean of each k x k window, padding counted as zeros
// (PyTorch's count_include_pad=True).
func AvgPool2d(x Array, k, stride, pad int) Array {
	return pool2d(x, k, stride, pad, func(v []float64, size int) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(size)
	})
}

// GlobalAvgPool is the mean of each channel of x (N, C, H, W) over its
// positions: (N, C).
func GlobalAvgPool(x Array) Array {
	need(len(x.Shape) == 4, "GlobalAvgPool", "input %v; want (N, C, H, W)", x.Shape)
	return Mean(x.Reshape(x.Shape[0], x.Shape[1], x.Shape[2]*x.Shape[3]), 2)
}
