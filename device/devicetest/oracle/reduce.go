package oracle

import (
	"math"
	"slices"
)

// Sum is the sum of every element of x, a scalar.
func Sum(x Array) Array {
	out := New()
	for _, v := range x.Data {
		out.Data[0] += v
	}
	return out
}

// MeanAll is the mean of every element of x, a scalar.
func MeanAll(x Array) Array {
	out := Sum(x)
	out.Data[0] /= float64(len(x.Data))
	return out
}

// SumAxis sums x over axis (negative counts from the end), removing it.
func SumAxis(x Array, axis int) Array {
	if axis < 0 {
		axis += len(x.Shape)
	}
	need(axis >= 0 && axis < len(x.Shape), "SumAxis", "axis %d of %v", axis, x.Shape)
	outer, n := Numel(x.Shape[:axis]), x.Shape[axis]
	inner := Numel(x.Shape[axis+1:])
	out := New(slices.Delete(slices.Clone(x.Shape), axis, axis+1)...)
	for o := range outer {
		for j := range n {
			for i := range inner {
				out.Data[o*inner+i] += x.Data[(o*n+j)*inner+i]
			}
		}
	}
	return out
}

// Mean averages x over axis, removing it.
func Mean(x Array, axis int) Array {
	if axis < 0 {
		axis += len(x.Shape)
	}
	out := SumAxis(x, axis)
	n := float64(x.Shape[axis])
	for i := range out.Data {
		out.Data[i] /= n
	}
	return out
}

// MSE is the mean of (a - b)², a scalar.
func MSE(a, b Array) Array {
	need(slices.Equal(a.Shape, b.Shape), "MSE", "shapes %v and %v", a.Shape, b.Shape)
	out := New()
	for i := range a.Data {
		d := a.Data[i] - b.Data[i]
		out.Data[0] += d * d
	}
	out.Data[0] /= float64(len(a.Data))
	return out
}

// rows calls f with each row of x's last axis and the same row of out.
func rows(x, out Array, f func(in, out []float64)) {
	c := 1
	if len(x.Shape) > 0 {
		c = x.Shape[len(x.Shape)-1]
	}
	for r := 0; r < len(x.Data); r += c {
		f(x.Data[r:r+c], out.Data[r:r+c])
	}
}

// logSumExp is log Σ e^v, shifted by the maximum so it neither overflows
// nor underflows.
func logSumExp(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	if math.IsInf(m, 0) {
		return m
	}
	var s float64
	for _, x := range v {
		s += math.Exp(x - m)
	}
	return m + math.Log(s)
}

// LogSoftmax is x - logsumexp(x) along the last axis.
func LogSoftmax(x Array) Array {
	out := New(x.Shape...)
	rows(x, out, func(in, o []float64) {
		l := logSumExp(in)
		for j, v := range in {
			o[j] = v - l
		}
	})
	return out
}

// Softmax is e^x / Σ e^x along the last axis.
func Softmax(x Array) Array {
	out := New(x.Shape...)
	rows(x, out, func(in, o []float64) {
		l := logSumExp(in)
		for j, v := range in {
			o[j] = math.Exp(v - l)
		}
	})
	return out
}

// CrossEntropyRows is, for each row r of logits (N, C), logsumexp(row) -
// logits[r, labels[r]]: (N).
func CrossEntropyRows(logits Array, labels []int) Array {
	need(len(logits.Shape) == 2 && logits.Shape[0] == len(labels), "CrossEntropy", "logits %v with %d labels", logits.Shape, len(labels))
	c := logits.Shape[1]
	out := New(len(labels))
	for r, l := range labels {
		row := logits.Data[r*c : (r+1)*c]
		out.Data[r] = logSumExp(row) - row[l]
	}
	return out
}

// CrossEntropy is the mean over rows of CrossEntropyRows, a scalar:
// PyTorch's cross_entropy with its default mean reduction.
func CrossEntropy(logits Array, labels []int) Array {
	return MeanAll(CrossEntropyRows(logits, labels))
}

// Argmax is the index of each row's largest element, the first on ties:
// x (N, C) gives (N).
func Argmax(x Array) Array {
	need(len(x.Shape) == 2, "Argmax", "input %v; want (N, C)", x.Shape)
	c := x.Shape[1]
	out := New(x.Shape[0])
	for r := range x.Shape[0] {
		best := 0
		for j := 1; j < c; j++ {
			if x.Data[r*c+j] > x.Data[r*c+best] {
				best = j
			}
		}
		out.Data[r] = float64(best)
	}
	return out
}
