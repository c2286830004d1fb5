package device

import (
	"fmt"
	"math"
)

// The elementwise ops, one table per arity (tinygrad's code_for_op). A row
// is the one place an op is declared: its name, how every backend computes
// it (in Go for the CPU, as a CUDA expression for the GPU), what its
// backward pass keeps and its gradient rule, its autocast class, and where
// the tests draw its inputs. Everything else follows from the row:
//
//   - the CPU backend runs the row's Go functions (with loops of its own,
//     held to the rows, for a few hot ops);
//   - go generate writes cudaops/kernels/ops.cuh (the CUDA switch cases)
//     and autograd's Op constant and Graph method of each unary op (see
//     internal/opgen); make kernels compiles the PTX;
//   - cudaops' emulator (its tests' stand-in for a GPU) runs the rows' Go
//     functions, autograd's unary rule reads Keep and calls UnaryGrad, amp
//     reads Class;
//   - the conformance suite (devicetest) draws inputs from Domains and
//     compares every backend's forward and gradient with its own float64
//     oracle, which is written apart from this table, so that a wrong
//     formula here cannot agree with itself.
//
// A new unary op is a constant and a row here, its forward and derivative
// in devicetest's oracle, and `go generate ./device && make kernels`; a
// test fails until each of those is done.
//
//go:generate go run ../internal/opgen/cmd

// BinaryOp selects Binary's operation.
type BinaryOp uint8

// The binary operations.
const (
	Add     BinaryOp = iota // x + y
	Sub                     // x - y
	Mul                     // x * y
	Div                     // x / y
	Maximum                 // the larger; a NaN in either operand gives NaN, as torch.maximum
	Minimum                 // the smaller; a NaN in either operand gives NaN, as torch.minimum

	// NumBinaryOps is the number of binary operations.
	NumBinaryOps = iota
)

// CastClass is how autocast treats an op (amp implements the policy; each
// row of the op tables names its op's class, so a new op gets a decision
// rather than a default).
type CastClass uint8

const (
	// CastUnset is a row that names no class, which TestOpTables rejects.
	CastUnset CastClass = iota
	// CastPromote ops run in the widest dtype of their inputs (F32 if
	// mixed), which for a single input is that input's dtype.
	CastPromote
	// CastLow ops run in the autocast dtype (the matrix products).
	CastLow
	// CastF32 ops run in F32 because they are sensitive to range or
	// precision (exponentials, logarithms, reductions, norms, losses).
	CastF32
)

func (c CastClass) String() string {
	switch c {
	case CastPromote:
		return "promote"
	case CastLow:
		return "low"
	case CastF32:
		return "f32"
	}
	return fmt.Sprintf("CastClass(%d)", uint8(c))
}

// Domain is a range the tests draw an op's inputs from, where it is defined
// and well conditioned, with the op's scalar parameter alpha for unary
// ops. An op may have several (Pow with different exponents); Name tells
// them apart in test names.
type Domain struct {
	Name   string
	Alpha  float32
	Lo, Hi float64
	// Signed draws magnitudes in [Lo, Hi) with a random sign (inputs kept
	// away from zero).
	Signed bool
	// BLo, BHi and BSigned are a binary op's second operand's range, when
	// it differs from the first's (a divisor).
	BLo, BHi float64
	BSigned  bool
}

// BinaryDef is one row of the binary op table.
type BinaryDef struct {
	// Name is the op's lower-case name: what String returns and, in upper
	// case after OP_, the op's constant in the CUDA sources.
	Name string
	// F32 is the op on float32 operands: one IEEE operation (or a
	// comparison), which every backend computes exactly.
	F32 func(x, y float32) float32
	// CUDA is the op as a CUDA C float expression in x and y (or
	// statements ending in a return).
	CUDA string
	// Class is the op's autocast class.
	Class CastClass
	// Domains are where the tests draw the operands.
	Domains []Domain
}

var binaryOps = [NumBinaryOps]BinaryDef{
	Add: {Name: "add", F32: func(x, y float32) float32 { return x + y }, CUDA: "x + y",
		Class: CastPromote, Domains: []Domain{{Lo: -2, Hi: 2}}},
	Sub: {Name: "sub", F32: func(x, y float32) float32 { return x - y }, CUDA: "x - y",
		Class: CastPromote, Domains: []Domain{{Lo: -2, Hi: 2}}},
	Mul: {Name: "mul", F32: func(x, y float32) float32 { return x * y }, CUDA: "x * y",
		Class: CastPromote, Domains: []Domain{{Lo: -2, Hi: 2}}},
	Div: {Name: "div", F32: func(x, y float32) float32 { return x / y }, CUDA: "x / y",
		Class: CastPromote, Domains: []Domain{{Lo: -2, Hi: 2, BLo: 0.5, BHi: 2, BSigned: true}}},
	Maximum: {Name: "maximum",
		F32: func(x, y float32) float32 {
			if x != x || x > y { // x is NaN, or larger; on a tie, or a NaN y, y
				return x
			}
			return y
		},
		CUDA:  "(is_nan(x) || x > y) ? x : y",
		Class: CastPromote, Domains: []Domain{{Lo: -2, Hi: 2}}},
	Minimum: {Name: "minimum",
		F32: func(x, y float32) float32 {
			if x != x || x < y {
				return x
			}
			return y
		},
		CUDA:  "(is_nan(x) || x < y) ? x : y",
		Class: CastPromote, Domains: []Domain{{Lo: -2, Hi: 2}}},
}

// Def returns op's row of the table. It panics for an op outside it, which
// only a conversion from an integer can make.
func (op BinaryOp) Def() *BinaryDef {
	if op >= NumBinaryOps {
		panic(fmt.Sprintf("device: unknown binary op %d", uint8(op)))
	}
	return &binaryOps[op]
}

func (op BinaryOp) String() string {
	if op < NumBinaryOps {
		return binaryOps[op].Name
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(op))
}

// UnaryOp selects Unary's operation; alpha is its scalar parameter where it
// has one. The comment of each constant, after its name and "returns", is
// the doc comment of autograd's method for the op, and the row's Param
// names the parameter there.
type UnaryOp uint8

// The unary operations.
const (
	Scale    UnaryOp = iota // alpha·x.
	AddConst                // x + c.
	Neg                     // -x.
	Exp                     // eˣ.
	Log                     // the natural logarithm of x.
	Sqrt                    // √x.
	Rsqrt                   // 1/√(x + eps).
	Square                  // x².
	Pow                     // xᵖ.
	ReLU                    // max(x, 0); a NaN of either sign stays NaN, as in PyTorch.
	GELU                    // x·Φ(x), the exact (erf) form PyTorch uses by default.
	Tanh                    // tanh(x).
	Sigmoid                 // 1/(1 + e⁻ˣ).
	Recip                   // 1/x.
	GELUTanh                // PyTorch's gelu(approximate='tanh'): x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2.
	SiLU                    // x·σ(x), the sigmoid-weighted linear unit (PyTorch's silu, or swish).

	// NumUnaryOps is the number of unary operations.
	NumUnaryOps = iota
)

// Keep says what an op's backward pass keeps from forward, besides dy,
// for UnaryGrad to read.
type Keep uint8

const (
	// KeepNothing ops are differentiated from dy (and alpha) alone.
	KeepNothing Keep = iota
	// KeepInput ops are differentiated from their input x (GELU, Log).
	KeepInput
	// KeepOutput ops are differentiated from their output y (ReLU, Tanh,
	// Exp), which the next layer usually keeps anyway.
	KeepOutput
)

func (k Keep) String() string {
	switch k {
	case KeepNothing:
		return "nothing"
	case KeepInput:
		return "input"
	case KeepOutput:
		return "output"
	}
	return fmt.Sprintf("Keep(%d)", uint8(k))
}

// UnaryDef is one row of the unary op table.
type UnaryDef struct {
	// Name is the op's lower-case name: what String returns, autograd's
	// name for the op, and, in upper case after U_, its constant in the
	// CUDA sources.
	Name string
	// Param names the scalar parameter alpha in autograd's method, "" for
	// an op without one (whose alpha is 0).
	Param string
	// F32, where it is not nil, is the op in float32 arithmetic: ops that
	// are a single IEEE operation, which every backend computes exactly.
	F32 func(x, alpha float32) float32
	// F64 is the op in float64, rounded once to float32, as the CPU
	// computes the ops without F32.
	F64 func(x, alpha float64) float64
	// CUDA is the op as a CUDA C float expression in x and alpha (or
	// statements ending in a return).
	CUDA string
	// Keep is what Grad reads besides dy: in is x, y, or nothing.
	Keep Keep
	// Grad computes dy·op'(x) from dy, in (as Keep says) and alpha, as the
	// CPU backend does. NaNs follow PyTorch: ReLU's gradient is 0 wherever
	// its output is <= 0 (threshold_backward), whatever dy holds; every
	// other rule multiplies, so a NaN in either operand gives NaN.
	Grad func(dy, in, alpha float32) float32
	// CUDAGrad is Grad as a CUDA C float expression in g (dy), alpha and
	// x or y as Keep says.
	CUDAGrad string
	// Class is the op's autocast class.
	Class CastClass
	// Domains are where the tests draw inputs.
	Domains []Domain
}

// sqrt2OverPi is √(2/π), GELUTanh's factor.
const sqrt2OverPi = 0.7978845608028654

var unaryOps = [NumUnaryOps]UnaryDef{
	Scale: {Name: "scale", Param: "alpha",
		F32:  func(x, a float32) float32 { return a * x },
		CUDA: "alpha * x",
		Keep: KeepNothing, Grad: func(dy, _, a float32) float32 { return a * dy }, CUDAGrad: "alpha * g",
		Class: CastPromote, Domains: []Domain{{Alpha: -1.7, Lo: -3, Hi: 3}}},
	AddConst: {Name: "addconst", Param: "c",
		F32:  func(x, a float32) float32 { return x + a },
		CUDA: "x + alpha",
		Keep: KeepNothing, Grad: func(dy, _, _ float32) float32 { return dy }, CUDAGrad: "g",
		Class: CastPromote, Domains: []Domain{{Alpha: 0.3, Lo: -3, Hi: 3}}},
	Neg: {Name: "neg",
		F32:  func(x, _ float32) float32 { return -x },
		CUDA: "-x",
		Keep: KeepNothing, Grad: func(dy, _, _ float32) float32 { return -dy }, CUDAGrad: "-g",
		Class: CastPromote, Domains: []Domain{{Lo: -3, Hi: 3}}},
	Exp: {Name: "exp",
		F64:  func(x, _ float64) float64 { return math.Exp(x) },
		CUDA: "expf(x)",
		Keep: KeepOutput, Grad: func(dy, y, _ float32) float32 { return dy * y }, CUDAGrad: "g * y",
		Class: CastF32, Domains: []Domain{{Lo: -4, Hi: 4}}},
	Log: {Name: "log",
		F64:  func(x, _ float64) float64 { return math.Log(x) },
		CUDA: "logf(x)",
		Keep: KeepInput, Grad: func(dy, x, _ float32) float32 { return dy / x }, CUDAGrad: "g / x",
		Class: CastF32, Domains: []Domain{{Lo: 0.05, Hi: 10}}},
	Sqrt: {Name: "sqrt",
		F64:  func(x, _ float64) float64 { return math.Sqrt(x) },
		CUDA: "sqrtf(x)",
		Keep: KeepOutput, Grad: func(dy, y, _ float32) float32 { return dy / (2 * y) }, CUDAGrad: "g / (2.0f * y)",
		// PyTorch's autocast lists leave sqrt out: it runs in its input's dtype.
		Class: CastPromote, Domains: []Domain{{Lo: 0.05, Hi: 10}}},
	Rsqrt: {Name: "rsqrt", Param: "eps",
		F64:  func(x, a float64) float64 { return 1 / math.Sqrt(x+a) },
		CUDA: "1.0f / sqrtf(x + alpha)",
		Keep: KeepOutput, Grad: func(dy, y, _ float32) float32 { return dy * (-0.5 * y * y * y) }, CUDAGrad: "g * (-0.5f * y * y * y)",
		Class: CastF32, Domains: []Domain{{Name: "eps", Alpha: 1e-5, Lo: 0.05, Hi: 10}, {Name: "0.5", Alpha: 0.5, Lo: 0, Hi: 4}}},
	Square: {Name: "square",
		F32:  func(x, _ float32) float32 { return x * x },
		CUDA: "x * x",
		Keep: KeepInput, Grad: func(dy, x, _ float32) float32 { return dy * (2 * x) }, CUDAGrad: "g * (2.0f * x)",
		Class: CastPromote, Domains: []Domain{{Lo: -3, Hi: 3}}},
	Pow: {Name: "pow", Param: "p",
		F64:  math.Pow,
		CUDA: "powf(x, alpha)",
		Keep: KeepInput,
		Grad: func(dy, x, p float32) float32 {
			return dy * (p * float32(math.Pow(float64(x), float64(p-1))))
		},
		CUDAGrad: "g * (alpha * powf(x, alpha - 1.0f))",
		Class:    CastF32,
		Domains:  []Domain{{Name: "1.5", Alpha: 1.5, Lo: 0.05, Hi: 4}, {Name: "-0.5", Alpha: -0.5, Lo: 0.1, Hi: 4}, {Name: "3", Alpha: 3, Lo: -2, Hi: 2}}},
	ReLU: {Name: "relu",
		F32: func(x, _ float32) float32 {
			if x > 0 || x != x { // -0 and negative numbers become +0
				return x
			}
			return 0
		},
		CUDA: "(x > 0.0f || is_nan(x)) ? x : 0.0f",
		Keep: KeepOutput,
		Grad: func(dy, y, _ float32) float32 {
			if y > 0 || y != y { // y <= 0 zeroes dy, NaN included
				return dy
			}
			return 0
		},
		CUDAGrad: "y <= 0.0f ? 0.0f : g",
		Class:    CastPromote, Domains: []Domain{{Lo: -3, Hi: 3}}},
	GELU: {Name: "gelu",
		F64: func(x, _ float64) float64 { return x * 0.5 * math.Erfc(-x/math.Sqrt2) },
		// normcdff is accurate in the tails, where 1+erf(x/√2) cancels.
		CUDA: "x * normcdff(x)",
		Keep: KeepInput,
		Grad: func(dy, x, _ float32) float32 {
			v := float64(x)
			return dy * float32(0.5*math.Erfc(-v/math.Sqrt2)+v*math.Exp(-0.5*v*v)/math.Sqrt(2*math.Pi))
		},
		CUDAGrad: "g * (normcdff(x) + x * (expf(-0.5f * x * x) * 0.398942280401432678f))",
		Class:    CastPromote, Domains: []Domain{{Lo: -5, Hi: 5}}},
	Tanh: {Name: "tanh",
		F64:  func(x, _ float64) float64 { return math.Tanh(x) },
		CUDA: "tanhf(x)",
		Keep: KeepOutput, Grad: func(dy, y, _ float32) float32 { return dy * (1 - y*y) }, CUDAGrad: "g * (1.0f - y * y)",
		Class: CastPromote, Domains: []Domain{{Lo: -5, Hi: 5}}},
	Sigmoid: {Name: "sigmoid",
		F64:  func(x, _ float64) float64 { return 1 / (1 + math.Exp(-x)) },
		CUDA: "1.0f / (1.0f + expf(-x))",
		Keep: KeepOutput, Grad: func(dy, y, _ float32) float32 { return dy * y * (1 - y) }, CUDAGrad: "g * y * (1.0f - y)",
		Class: CastPromote, Domains: []Domain{{Lo: -10, Hi: 10}}},
	Recip: {Name: "recip",
		F32:  func(x, _ float32) float32 { return 1 / x },
		CUDA: "1.0f / x",
		Keep: KeepOutput, Grad: func(dy, y, _ float32) float32 { return -dy * (y * y) }, CUDAGrad: "-g * (y * y)",
		Class: CastF32, Domains: []Domain{{Lo: 0.1, Hi: 4, Signed: true}}},
	GELUTanh: {Name: "gelu_tanh",
		F64: func(x, _ float64) float64 {
			return 0.5 * x * (1 + math.Tanh(sqrt2OverPi*(x+0.044715*x*x*x)))
		},
		CUDA: "0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)))",
		Keep: KeepInput,
		Grad: func(dy, x, _ float32) float32 {
			v := float64(x)
			t := math.Tanh(sqrt2OverPi * (v + 0.044715*v*v*v))
			return dy * float32(0.5*(1+t)+0.5*v*(1-t*t)*sqrt2OverPi*(1+3*0.044715*v*v))
		},
		CUDAGrad: "float t = tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)); " +
			"return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * 0.7978845608028654f * (1.0f + 0.134145f * x * x));",
		Class: CastPromote, Domains: []Domain{{Lo: -5, Hi: 5}}},
	SiLU: {Name: "silu",
		F64:  func(x, _ float64) float64 { return x / (1 + math.Exp(-x)) },
		CUDA: "x / (1.0f + expf(-x))",
		Keep: KeepInput,
		Grad: func(dy, x, _ float32) float32 {
			s := 1 / (1 + math.Exp(-float64(x)))
			return dy * float32(s*(1+float64(x)*(1-s)))
		},
		CUDAGrad: "float s = 1.0f / (1.0f + expf(-x)); return g * (s * (1.0f + x * (1.0f - s)));",
		Class:    CastPromote, Domains: []Domain{{Lo: -8, Hi: 8}}},
}

// Def returns op's row of the table. It panics for an op outside it, which
// only a conversion from an integer can make.
func (op UnaryOp) Def() *UnaryDef {
	if op >= NumUnaryOps {
		panic(fmt.Sprintf("device: unknown unary op %d", uint8(op)))
	}
	return &unaryOps[op]
}

func (op UnaryOp) String() string {
	if op < NumUnaryOps {
		return unaryOps[op].Name
	}
	return fmt.Sprintf("UnaryOp(%d)", uint8(op))
}

// Eval computes op(x) for one element as the CPU backend does: the row's
// F32, or its F64 rounded once.
func (d *UnaryDef) Eval(x, alpha float32) float32 {
	if d.F32 != nil {
		return d.F32(x, alpha)
	}
	return float32(d.F64(float64(x), float64(alpha)))
}
