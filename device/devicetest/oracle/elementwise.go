package oracle

import "math"

// Unary is a unary elementwise op: its value and its gradient rule, with
// the op's scalar parameter alpha.
type Unary struct {
	// F is the op.
	F func(x, alpha float64) float64
	// DX is dy·f'(x), written in terms of the input.
	DX func(dy, x, alpha float64) float64
	// DY is dy·f'(x) written in terms of the output y = f(x), for the ops
	// whose derivative is a function of it (nil for the others); a
	// backend that keeps only y is checked against it.
	DY func(dy, y, alpha float64) float64
}

// isNaN is math.IsNaN, short.
func isNaN(x float64) bool { return x != x }

// relu passes dy where its operand v (x or y, which share their sign) is
// positive, and also where v is NaN: PyTorch's threshold_backward zeroes
// only where v <= 0, whatever dy holds, and a NaN is not <= 0.
func reluGrad(dy, v, _ float64) float64 {
	if v <= 0 {
		return 0
	}
	return dy
}

// phi is the standard normal density; cdf its distribution function.
func phi(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }
func cdf(x float64) float64 { return math.Erfc(-x/math.Sqrt2) / 2 }

// geluTanhK and geluTanhC are the constants of GELU's tanh approximation,
// √(2/π) and 0.044715.
const (
	geluTanhK = 0.79788456080286535588
	geluTanhC = 0.044715
)

// unary holds the unary ops by their names in device's table.
var unary = map[string]Unary{
	"scale": {
		F:  func(x, a float64) float64 { return a * x },
		DX: func(dy, _, a float64) float64 { return a * dy },
	},
	"addconst": {
		F:  func(x, a float64) float64 { return x + a },
		DX: func(dy, _, _ float64) float64 { return dy },
	},
	"neg": {
		F:  func(x, _ float64) float64 { return -x },
		DX: func(dy, _, _ float64) float64 { return -dy },
	},
	"exp": {
		F:  func(x, _ float64) float64 { return math.Exp(x) },
		DX: func(dy, x, _ float64) float64 { return dy * math.Exp(x) },
		DY: func(dy, y, _ float64) float64 { return dy * y },
	},
	"log": {
		F:  func(x, _ float64) float64 { return math.Log(x) },
		DX: func(dy, x, _ float64) float64 { return dy / x },
	},
	"sqrt": {
		F:  func(x, _ float64) float64 { return math.Sqrt(x) },
		DX: func(dy, x, _ float64) float64 { return dy * 0.5 / math.Sqrt(x) },
		DY: func(dy, y, _ float64) float64 { return dy * 0.5 / y },
	},
	"rsqrt": { // (x + eps)^(-1/2)
		F:  func(x, eps float64) float64 { return math.Pow(x+eps, -0.5) },
		DX: func(dy, x, eps float64) float64 { return dy * -0.5 * math.Pow(x+eps, -1.5) },
		DY: func(dy, y, _ float64) float64 { return dy * -0.5 * y * y * y },
	},
	"square": {
		F:  func(x, _ float64) float64 { return x * x },
		DX: func(dy, x, _ float64) float64 { return dy * 2 * x },
	},
	"pow": {
		F:  math.Pow,
		DX: func(dy, x, p float64) float64 { return dy * p * math.Pow(x, p-1) },
	},
	"relu": {
		F: func(x, _ float64) float64 {
			if x <= 0 {
				return 0
			}
			return x // NaN included
		},
		DX: reluGrad,
		DY: reluGrad,
	},
	"gelu": {
		F:  func(x, _ float64) float64 { return x * cdf(x) },
		DX: func(dy, x, _ float64) float64 { return dy * (cdf(x) + x*phi(x)) },
	},
	"gelu_tanh": {
		F: func(x, _ float64) float64 {
			return x / 2 * (1 + math.Tanh(geluTanhK*(x+geluTanhC*x*x*x)))
		},
		DX: func(dy, x, _ float64) float64 {
			u := geluTanhK * (x + geluTanhC*x*x*x)
			du := geluTanhK * (1 + 3*geluTanhC*x*x)
			sech2 := 1 / (math.Cosh(u) * math.Cosh(u))
			return dy * ((1+math.Tanh(u))/2 + x/2*sech2*du)
		},
	},
	"tanh": {
		F:  func(x, _ float64) float64 { return math.Tanh(x) },
		DX: func(dy, x, _ float64) float64 { c := math.Cosh(x); return dy / (c * c) },
		DY: func(dy, y, _ float64) float64 { return dy * (1 - y*y) },
	},
	"sigmoid": {
		F: func(x, _ float64) float64 { return 1 / (1 + math.Exp(-x)) },
		DX: func(dy, x, _ float64) float64 {
			e := math.Exp(-math.Abs(x)) // s(1-s) = e^-|x| / (1+e^-|x|)^2
			return dy * e / ((1 + e) * (1 + e))
		},
		DY: func(dy, y, _ float64) float64 { return dy * y * (1 - y) },
	},
	"silu": {
		F: func(x, _ float64) float64 { return x / (1 + math.Exp(-x)) },
		DX: func(dy, x, _ float64) float64 {
			s := 1 / (1 + math.Exp(-x))
			return dy * (s + x*s*(1-s))
		},
	},
	"recip": {
		F:  func(x, _ float64) float64 { return 1 / x },
		DX: func(dy, x, _ float64) float64 { return -dy / (x * x) },
		DY: func(dy, y, _ float64) float64 { return -dy * y * y },
	},
}

// UnaryOp returns the unary op of device's table named name, and whether
// the oracle has it.
func UnaryOp(name string) (Unary, bool) {
	u, ok := unary[name]
	return u, ok
}

// binary holds the binary ops by their names in device's table. Maximum
// and minimum return NaN when either operand is one, as torch.maximum and
// torch.minimum do.
var binary = map[string]func(x, y float64) float64{
	"add": func(x, y float64) float64 { return x + y },
	"sub": func(x, y float64) float64 { return x - y },
	"mul": func(x, y float64) float64 { return x * y },
	"div": func(x, y float64) float64 { return x / y },
	"maximum": func(x, y float64) float64 {
		if isNaN(x) || isNaN(y) {
			return math.NaN()
		}
		return math.Max(x, y)
	},
	"minimum": func(x, y float64) float64 {
		if isNaN(x) || isNaN(y) {
			return math.NaN()
		}
		return math.Min(x, y)
	},
}

// BinaryOp returns the binary op of device's table named name, and whether
// the oracle has it.
func BinaryOp(name string) (func(x, y float64) float64, bool) {
	f, ok := binary[name]
	return f, ok
}

// Broadcast returns f applied to a and b broadcast together (NumPy rules:
// shapes align at the right, a dimension of 1 repeats).
func Broadcast(f func(x, y float64) float64, a, b Array) Array {
	n := max(len(a.Shape), len(b.Shape))
	shape := make([]int, n)
	dim := func(s []int, i int) int {
		if j := i - (n - len(s)); j >= 0 {
			return s[j]
		}
		return 1
	}
	for i := range shape {
		da, db := dim(a.Shape, i), dim(b.Shape, i)
		need(da == db || da == 1 || db == 1, "Broadcast", "shapes %v and %v", a.Shape, b.Shape)
		shape[i] = max(da, db)
	}
	out := New(shape...)
	idx := make([]int, n)
	for k := range out.Data {
		r := k
		for i := n - 1; i >= 0; i-- {
			idx[i] = r % shape[i]
			r /= shape[i]
		}
		out.Data[k] = f(a.Data[offset(a.Shape, idx)], b.Data[offset(b.Shape, idx)])
	}
	return out
}

// offset is the element of an array of shape s that index idx (of a shape
// s broadcasts to) reads.
func offset(s []int, idx []int) int {
	off, st := 0, 1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != 1 {
			off += idx[len(idx)-len(s)+i] * st
		}
		st *= s[i]
	}
	return off
}
