package device

import (
	"fmt"
	"math"
)

// The elementwise op families, one table each (tinygrad's code_for_op): a
// row gives an op its name, the scalar function every backend computes,
// and the float64 reference the conformance suite checks it against. The
// CPU backend dispatches through the table (with hand-written loops for
// the few ops that are a single float32 operation), package devicetest
// builds its references from it, and cudaops tests that the operation
// codes of its CUDA sources match it. Adding an op is a constant and a
// row here, its case in cudaops/kernels/elementwise.cu, and an input
// domain in devicetest, which fails until it has one.

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

// BinaryDef is one row of the binary op table.
type BinaryDef struct {
	// Name is the op's lower-case name: what String returns, and, in upper
	// case after OP_, the op's constant in the CUDA sources.
	Name string
	// F32 is the op on float32 operands. It is one IEEE operation (or a
	// comparison), so every backend computes exactly this, bit for bit.
	F32 func(x, y float32) float32
	// F64 is the op in float64, the conformance suite's reference.
	F64 func(x, y float64) float64
}

var binaryOps = [NumBinaryOps]BinaryDef{
	Add: {"add", func(x, y float32) float32 { return x + y }, func(x, y float64) float64 { return x + y }},
	Sub: {"sub", func(x, y float32) float32 { return x - y }, func(x, y float64) float64 { return x - y }},
	Mul: {"mul", func(x, y float32) float32 { return x * y }, func(x, y float64) float64 { return x * y }},
	Div: {"div", func(x, y float32) float32 { return x / y }, func(x, y float64) float64 { return x / y }},
	Maximum: {"maximum",
		func(x, y float32) float32 {
			if x != x || x > y { // x is NaN, or larger; on a tie, or a NaN y, y
				return x
			}
			return y
		},
		func(x, y float64) float64 {
			if math.IsNaN(x) || math.IsNaN(y) { // math.Max(NaN, +Inf) is +Inf
				return math.NaN()
			}
			return math.Max(x, y)
		}},
	Minimum: {"minimum",
		func(x, y float32) float32 {
			if x != x || x < y {
				return x
			}
			return y
		},
		func(x, y float64) float64 {
			if math.IsNaN(x) || math.IsNaN(y) { // math.Min(NaN, -Inf) is -Inf
				return math.NaN()
			}
			return math.Min(x, y)
		}},
}

// Def returns op's row of the table. It panics for an op outside it, which
// only a conversion from an integer can make.
func (op BinaryOp) Def() BinaryDef {
	if op >= NumBinaryOps {
		panic(fmt.Sprintf("device: unknown binary op %d", uint8(op)))
	}
	return binaryOps[op]
}

func (op BinaryOp) String() string {
	if op < NumBinaryOps {
		return binaryOps[op].Name
	}
	return fmt.Sprintf("BinaryOp(%d)", uint8(op))
}

// UnaryOp selects Unary's operation; alpha is its scalar parameter where it has one.
type UnaryOp uint8

// The unary operations.
const (
	Scale    UnaryOp = iota // alpha * x
	AddConst                // x + alpha
	Neg                     // -x
	Exp                     // e^x
	Log                     // ln x
	Sqrt                    // sqrt(x)
	Rsqrt                   // 1/sqrt(x + alpha)
	Square                  // x^2
	Pow                     // x^alpha
	ReLU                    // max(x, 0); a NaN of either sign stays NaN, as in PyTorch
	GELU                    // x * Phi(x), the exact (erf) form
	Tanh                    // tanh(x)
	Sigmoid                 // 1/(1+e^-x)
	Recip                   // 1/x

	// NumUnaryOps is the number of unary operations.
	NumUnaryOps = iota
)

// GradInput says what UnaryGrad reads, besides dy, to differentiate an op.
type GradInput uint8

const (
	// NoGrad marks an op UnaryGrad does not support: its derivative is
	// simple enough for autograd to compose from other kernels.
	NoGrad GradInput = iota
	// GradFromOutput ops are differentiated from their output y, which is
	// what a backward pass keeps for them (ReLU, Tanh, Sigmoid).
	GradFromOutput
	// GradFromInput ops are differentiated from their input x (GELU).
	GradFromInput
)

// UnaryDef is one row of the unary op table.
type UnaryDef struct {
	// Name is the op's lower-case name: what String returns, and, in upper
	// case after U_, the op's constant in the CUDA sources.
	Name string
	// F32, where it is not nil, is the op in float32 arithmetic: ops that
	// are a single IEEE operation, which every backend computes exactly.
	F32 func(x, alpha float32) float32
	// F64 is the op in float64: the conformance suite's reference for every
	// op, and what the CPU backend computes, rounding once to float32, for
	// ops without F32.
	F64 func(x, alpha float64) float64
	// Grad is what UnaryGrad reads for the op, NoGrad where it has no rule.
	Grad GradInput
	// GradF32 computes dy * op'(in), in being the output or the input as
	// Grad says, as the CPU backend does.
	GradF32 func(dy, in float32) float32
	// GradF64 is GradF32's float64 reference. It follows PyTorch where a
	// NaN is about: ReLU's gradient is 0 wherever its output is <= 0
	// (threshold_backward), whatever dy holds; every other rule multiplies,
	// so a NaN in either operand gives NaN.
	GradF64 func(dy, in float64) float64
}

var unaryOps = [NumUnaryOps]UnaryDef{
	Scale: {Name: "scale",
		F32: func(x, a float32) float32 { return a * x },
		F64: func(x, a float64) float64 { return a * x }},
	AddConst: {Name: "addconst",
		F32: func(x, a float32) float32 { return x + a },
		F64: func(x, a float64) float64 { return x + a }},
	Neg: {Name: "neg",
		F32: func(x, _ float32) float32 { return -x },
		F64: func(x, _ float64) float64 { return -x }},
	Exp:   {Name: "exp", F64: func(x, _ float64) float64 { return math.Exp(x) }},
	Log:   {Name: "log", F64: func(x, _ float64) float64 { return math.Log(x) }},
	Sqrt:  {Name: "sqrt", F64: func(x, _ float64) float64 { return math.Sqrt(x) }},
	Rsqrt: {Name: "rsqrt", F64: func(x, a float64) float64 { return 1 / math.Sqrt(x+a) }},
	Square: {Name: "square",
		F32: func(x, _ float32) float32 { return x * x },
		F64: func(x, _ float64) float64 { return x * x }},
	Pow: {Name: "pow", F64: math.Pow},
	ReLU: {Name: "relu",
		F32: func(x, _ float32) float32 {
			if x > 0 || x != x { // -0 and negative numbers become +0
				return x
			}
			return 0
		},
		F64:  func(x, _ float64) float64 { return math.Max(x, 0) },
		Grad: GradFromOutput,
		GradF32: func(dy, y float32) float32 {
			if y > 0 || y != y { // y <= 0 zeroes dy, NaN included
				return dy
			}
			return 0
		},
		GradF64: func(dy, y float64) float64 {
			if y <= 0 {
				return 0
			}
			return dy
		}},
	GELU: {Name: "gelu",
		F64:     func(x, _ float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) },
		Grad:    GradFromInput,
		GradF32: func(dy, x float32) float32 { return dy * float32(geluDeriv(float64(x))) },
		GradF64: func(dy, x float64) float64 { return dy * geluDeriv(x) }},
	Tanh: {Name: "tanh",
		F64:     func(x, _ float64) float64 { return math.Tanh(x) },
		Grad:    GradFromOutput,
		GradF32: func(dy, y float32) float32 { return dy * (1 - y*y) },
		GradF64: func(dy, y float64) float64 { return dy * (1 - y*y) }},
	Sigmoid: {Name: "sigmoid",
		F64:     func(x, _ float64) float64 { return 1 / (1 + math.Exp(-x)) },
		Grad:    GradFromOutput,
		GradF32: func(dy, y float32) float32 { return dy * y * (1 - y) },
		GradF64: func(dy, y float64) float64 { return dy * (y * (1 - y)) }},
	Recip: {Name: "recip",
		F32: func(x, _ float32) float32 { return 1 / x },
		F64: func(x, _ float64) float64 { return 1 / x }},
}

// geluDeriv is the derivative of x·Φ(x): Φ(x) + x·φ(x).
func geluDeriv(x float64) float64 {
	cdf := 0.5 * (1 + math.Erf(x/math.Sqrt2))
	pdf := math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi)
	return cdf + x*pdf
}

// Def returns op's row of the table. It panics for an op outside it, which
// only a conversion from an integer can make.
func (op UnaryOp) Def() UnaryDef {
	if op >= NumUnaryOps {
		panic(fmt.Sprintf("device: unknown unary op %d", uint8(op)))
	}
	return unaryOps[op]
}

func (op UnaryOp) String() string {
	if op < NumUnaryOps {
		return unaryOps[op].Name
	}
	return fmt.Sprintf("UnaryOp(%d)", uint8(op))
}
