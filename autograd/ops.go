package autograd

import (
	"fmt"
	"slices"
	"sync"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// buf is shorthand for a Var's device buffer.
func buf(v *Var) device.Buffer { return v.Value.Buffer() }

// broadcastShape returns the NumPy broadcast of a and b, or panics naming op.
func broadcastShape(op Op, a, b []int) []int {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			panic(fmt.Sprintf("autograd.%s: shapes %v and %v do not broadcast", op, a, b))
		}
	}
	return out
}

// reduceTo sums gradient t (of a broadcast result's shape) down to shape,
// taking t over.
func (g *Graph) reduceTo(t *tensor.Tensor, shape []int) *tensor.Tensor {
	if slices.Equal(t.Shape(), shape) {
		return t
	}
	out := g.alloc(t.DType(), shape...)
	g.dev.Reduce(out.Buffer(), t.Buffer(), device.Strides{Shape: t.Shape(), A: device.BroadcastStrides(shape, t.Shape())}, 1)
	t.Release()
	return out
}

// Add returns a + b with broadcasting.
func (g *Graph) Add(a, b *Var) *Var { return g.binary(OpAdd, a, b) }

// Sub returns a - b with broadcasting.
func (g *Graph) Sub(a, b *Var) *Var { return g.binary(OpSub, a, b) }

// Mul returns a * b (elementwise) with broadcasting.
func (g *Graph) Mul(a, b *Var) *Var { return g.binary(OpMul, a, b) }

// Div returns a / b (elementwise) with broadcasting.
func (g *Graph) Div(a, b *Var) *Var { return g.binary(OpDiv, a, b) }

// binaryRule is an elementwise op of two operands, as unaryRule is of one:
// its kernel, what its backward reads besides dy, and its backward, which
// gives each operand that requires it its gradient, summed down to the
// operand's shape.
type binaryRule struct {
	kernel device.BinaryOp
	keep   keep
	grad   func(g *Graph, o binaryOperands, dy *tensor.Tensor)
}

// binaryOperands is what a binary op's backward works on: the operands, in
// the op's dtype, the output, and the strides through which the kernel
// read each operand over the broadcast shape.
type binaryOperands struct {
	a, b   *Var
	y      *tensor.Tensor
	dt     dtype.DType
	shape  []int // y's shape, the operands broadcast
	sa, sb []int // a's and b's strides through shape
	contig []int // y's (and dy's) strides
}

// times returns dy k x, x (a or b) read through its strides st.
func (o binaryOperands) times(g *Graph, k device.BinaryOp, dy *tensor.Tensor, x *Var, st []int) *tensor.Tensor {
	t := g.alloc(o.dt, o.shape...)
	g.dev.Binary(k, t.Buffer(), dy.Buffer(), buf(x), device.Strides{Shape: o.shape, A: o.contig, B: st})
	return t
}

// binaryRules, indexed by Op. Like the unary rules they are package-level
// values, so recording an op makes one closure, for its operands.
var binaryRules = [numOps]*binaryRule{
	// y = a + b: da = dy, db = dy. Nothing kept.
	OpAdd: {kernel: device.Add, keep: keepNothing, grad: func(g *Graph, o binaryOperands, dy *tensor.Tensor) {
		addGrad(g, o, dy, 1)
	}},
	// y = a - b: da = dy, db = -dy. Nothing kept.
	OpSub: {kernel: device.Sub, keep: keepNothing, grad: func(g *Graph, o binaryOperands, dy *tensor.Tensor) {
		addGrad(g, o, dy, -1)
	}},
	// y = a·b: da = dy·b, db = dy·a. Both operands kept.
	OpMul: {kernel: device.Mul, keep: keepInputs, grad: func(g *Graph, o binaryOperands, dy *tensor.Tensor) {
		if o.a.requiresGrad {
			g.accum(o.a, g.reduceTo(o.times(g, device.Mul, dy, o.b, o.sb), o.a.Shape()))
		}
		if o.b.requiresGrad {
			g.accum(o.b, g.reduceTo(o.times(g, device.Mul, dy, o.a, o.sa), o.b.Shape()))
		}
	}},
	// y = a/b: da = dy/b, db = -dy·a/b² = -(dy/b)·y. b and y kept, a not.
	OpDiv: {kernel: device.Div, keep: keepDivisor, grad: func(g *Graph, o binaryOperands, dy *tensor.Tensor) {
		q := o.times(g, device.Div, dy, o.b, o.sb) // dy / b
		if o.b.requiresGrad {
			t := g.alloc(o.dt, o.shape...)
			g.dev.Binary(device.Mul, t.Buffer(), q.Buffer(), o.y.Buffer(), device.Strides{Shape: o.shape, A: o.contig, B: o.contig})
			g.dev.Unary(device.Neg, t.Buffer(), t.Buffer(), 0)
			g.accum(o.b, g.reduceTo(t, o.b.Shape()))
		}
		if o.a.requiresGrad {
			g.accum(o.a, g.reduceTo(q, o.a.Shape()))
		} else {
			q.Release()
		}
	}},
}

// addGrad is the backward of a + sign·b: db = sign·dy, da = dy.
func addGrad(g *Graph, o binaryOperands, dy *tensor.Tensor, sign float32) {
	if o.b.requiresGrad {
		var db *tensor.Tensor
		if sign == 1 && slices.Equal(o.b.Shape(), o.shape) {
			// dy itself, in b's dtype: one copy (rounding it for a
			// narrower b, as accum would) instead of a scale and a copy.
			db = g.alloc(o.b.DType(), o.shape...)
			g.dev.Copy(db.Buffer(), 0, dy.Buffer(), 0, dy.Numel())
		} else {
			db = g.alloc(o.dt, o.shape...)
			g.dev.Unary(device.Scale, db.Buffer(), dy.Buffer(), sign)
			db = g.reduceTo(db, o.b.Shape())
		}
		g.accum(o.b, db)
	}
	if o.a.requiresGrad {
		g.accum(o.a, g.reduceTo(g.pass(dy), o.a.Shape()))
	}
}

// binary applies the elementwise op op to a and b, broadcast together.
func (g *Graph) binary(op Op, a0, b0 *Var) *Var {
	r := binaryRules[op]
	dt := g.computeType(op, a0, b0)
	// New names, never reassigned, so that the backward closure captures
	// copies instead of moving the variables to the heap.
	a, b := g.operand(r, a0, dt), g.operand(r, b0, dt)
	shape := broadcastShape(op, a.Shape(), b.Shape())
	sa, sb := device.BroadcastStrides(a.Shape(), shape), device.BroadcastStrides(b.Shape(), shape)
	y := g.alloc(dt, shape...)
	g.dev.Binary(r.kernel, y.Buffer(), buf(a), buf(b), device.Strides{Shape: shape, A: sa, B: sb})
	out := g.result(y)
	if !g.recording(a, b) {
		return out
	}
	contig := device.ContiguousStrides(shape)
	switch r.keep {
	case keepInputs:
		g.save(a.Value, b.Value)
	case keepDivisor:
		g.save(b.Value, y)
	}
	g.push(op, out, []*Var{a, b}, func(dy *tensor.Tensor) {
		r.grad(g, binaryOperands{a, b, y, dt, shape, sa, sb, contig}, dy)
	})
	return out
}

// operand is v as binary op r reads it in dtype dt. An op whose backward
// reads no operand (Add, Sub) takes a narrower intermediate result as it is,
// since the kernel widens what it reads (a residual stream in F32 plus a
// 16-bit branch): the same sums as adding its widened copy, without the
// copy, and its gradient is rounded to its dtype by accum as the cast's
// backward would round it.
func (g *Graph) operand(r *binaryRule, v *Var, dt dtype.DType) *Var {
	if r.keep == keepNothing && v != nil && !v.param && v.DType() != dt && dtype.Widest(v.DType(), dt) == dt {
		v.mustLive("binary")
		return v
	}
	return g.as(v, dt)
}

// keep says what a binary op's backward reads besides dy.
type keep uint8

const (
	keepNothing keep = iota
	keepInputs       // both operands
	keepDivisor      // the second operand and the output
)

// Unary applies k, an op of device's unary op table, with its scalar
// parameter alpha (0 for an op without one): what the named methods (ReLU,
// Exp, Pow, ...) do, for code that chooses the op at run time.
func (g *Graph) Unary(k device.UnaryOp, x *Var, alpha float32) *Var {
	if k >= device.NumUnaryOps {
		panic(fmt.Sprintf("autograd.Unary: unknown op %v", k))
	}
	return g.unary(opUnary+Op(k), x, alpha)
}

// unary applies the unary elementwise op op with parameter alpha. Its row
// of device's op table says what its backward keeps, and UnaryGrad
// differentiates it.
func (g *Graph) unary(op Op, x0 *Var, alpha float32) *Var {
	k, _ := op.Unary()
	dt := g.computeType(op, x0)
	x := g.as(x0, dt)
	y := g.alloc(dt, x.Shape()...)
	g.dev.Unary(k, y.Buffer(), buf(x), alpha)
	out := g.result(y)
	if !g.recording(x) {
		return out
	}
	var in *tensor.Tensor
	switch k.Def().Keep {
	case device.KeepInput:
		in = x.Value
	case device.KeepOutput:
		in = y
	}
	g.save(in)
	g.push(op, out, []*Var{x}, func(dy *tensor.Tensor) {
		var ib device.Buffer
		if in != nil {
			ib = in.Buffer()
		}
		if dy.DType() == dt && !dy.IsView() {
			// The graph owns dy and nothing reads it after this op: the
			// gradient is written over it and handed on, as PyTorch's
			// in-place activations' backward would, which spares a
			// buffer the size of x at the peak of a network's backward
			// pass (the device contract lets UnaryGrad's dst be dy).
			g.dev.UnaryGrad(k, dy.Buffer(), dy.Buffer(), ib, alpha)
			g.accum(x, g.pass(dy, x.Shape()...))
			return
		}
		dx := g.alloc(dt, x.Shape()...)
		g.dev.UnaryGrad(k, dx.Buffer(), dy.Buffer(), ib, alpha)
		g.accum(x, dx)
	})
	return out
}

// elementwise returns the strides that make Binary a plain elementwise op.
func elementwise(n int) device.Strides {
	return device.Strides{Shape: []int{n}, A: []int{1}, B: []int{1}}
}

// Reshape returns x with a new shape of the same size, sharing its memory.
// One dimension may be -1.
func (g *Graph) Reshape(x *Var, shape ...int) *Var {
	x.mustLive("Reshape")
	out := g.result(g.view(x.Value, shape...))
	if g.recording(x) {
		g.push(OpReshape, out, []*Var{x}, func(dy *tensor.Tensor) {
			g.accum(x, g.pass(dy, x.Shape()...))
		})
	}
	return out
}

// Flatten reshapes x (N, ...) to (N, rest).
func (g *Graph) Flatten(x *Var) *Var {
	return g.Reshape(x, x.Shape()[0], -1)
}

// Sum returns the sum of all elements as a scalar (shape []).
func (g *Graph) Sum(x *Var) *Var { return g.reduceAll(OpSum, x, 1) }

// Mean returns the mean of all elements as a scalar (shape []).
func (g *Graph) Mean(x *Var) *Var {
	return g.reduceAll(OpMean, x, 1/float32(tensor.Numel(x.Shape())))
}

func (g *Graph) reduceAll(op Op, x0 *Var, alpha float32) *Var {
	dt := g.computeType(op, x0)
	x := g.as(x0, dt)
	shape := x.Shape()
	st := device.Strides{Shape: shape, A: g.zeros(len(shape))}
	y := g.alloc(dt)
	g.dev.Reduce(y.Buffer(), buf(x), st, alpha)
	out := g.result(y)
	if g.recording(x) {
		g.push(op, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, shape...)
			g.dev.Expand(dx.Buffer(), dy.Buffer(), st, alpha)
			g.accum(x, dx)
		})
	}
	return out
}

// SumAxis sums x over one dimension (negative counts from the end),
// removing it.
func (g *Graph) SumAxis(x0 *Var, axis int) *Var {
	dt := g.computeType(OpSum, x0)
	x := g.as(x0, dt)
	shape := x.Shape()
	if axis < 0 {
		axis += len(shape)
	}
	if axis < 0 || axis >= len(shape) {
		panic(fmt.Sprintf("autograd.SumAxis: axis out of range for shape %v", shape))
	}
	outShape := slices.Delete(slices.Clone(shape), axis, axis+1)
	keep := slices.Clone(shape)
	keep[axis] = 1
	st := device.Strides{Shape: shape, A: device.BroadcastStrides(keep, shape)}
	y := g.alloc(dt, outShape...)
	g.dev.Reduce(y.Buffer(), buf(x), st, 1)
	out := g.result(y)
	if g.recording(x) {
		g.push(OpSum, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, shape...)
			g.dev.Expand(dx.Buffer(), dy.Buffer(), st, 1)
			g.accum(x, dx)
		})
	}
	return out
}

// rowsCols views a tensor of shape (..., C) as rows of C.
func rowsCols(shape []int) (rows, cols int) {
	if len(shape) == 0 {
		return 1, 1
	}
	cols = shape[len(shape)-1]
	return tensor.Numel(shape) / max(cols, 1), cols
}

// LogSoftmax returns x - logsumexp(x) along the last dimension.
func (g *Graph) LogSoftmax(x0 *Var) *Var {
	dt := g.computeType(OpLogSoftmax, x0)
	x := g.as(x0, dt)
	rows, cols := rowsCols(x.Shape())
	y := g.alloc(dt, x.Shape()...)
	g.dev.LogSoftmax(y.Buffer(), buf(x), rows, cols)
	out := g.result(y)
	if g.recording(x) {
		g.save(y)
		g.push(OpLogSoftmax, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, x.Shape()...)
			g.dev.LogSoftmaxGrad(dx.Buffer(), dy.Buffer(), y.Buffer(), rows, cols)
			g.accum(x, dx)
		})
	}
	return out
}

// Labels copies class indices onto the device (as exact integers in an F32
// tensor), checking each is in [0, classes).
func (g *Graph) Labels(labels []int32, classes int) *tensor.Tensor {
	hp := hostScratch.Get().(*[]float32)
	defer hostScratch.Put(hp)
	h := append((*hp)[:0], make([]float32, len(labels))...)
	*hp = h
	for i, l := range labels {
		if l < 0 || int(l) >= classes {
			panic(fmt.Sprintf("autograd.Labels: label %d at row %d is outside [0, %d)", l, i, classes))
		}
		h[i] = float32(l)
	}
	t := g.alloc(dtype.F32, len(labels))
	g.dev.CopyFromHost(t.Buffer(), h)
	return t
}

// hostScratch holds the host copies of label batches on their way to a
// device, which every training step makes at the same size.
var hostScratch = sync.Pool{New: func() any { return new([]float32) }}

// CrossEntropy returns the mean over rows of -log softmax(logits)[label]:
// logits (N, C), labels N class indices. Log-softmax and the negative
// log-likelihood run as one fused kernel.
func (g *Graph) CrossEntropy(logits0 *Var, labels []int32) *Var {
	dt := g.computeType(OpCrossEntropy, logits0)
	// Narrower logits (a 16-bit head's, under autocast) are read as they
	// are: the kernels compute in float32 from their widened values, and
	// write the gradient rounded once to their dtype, the bits of a cast
	// to dt and its backward, without the copy or its pass.
	logits := logits0
	if logits0.param || dtype.Widest(logits0.DType(), dt) != dt {
		logits = g.as(logits0, dt)
	}
	shape := logits.Shape()
	if len(shape) != 2 || shape[0] != len(labels) {
		panic(fmt.Sprintf("autograd.CrossEntropy: logits %v with %d labels; want (N, C) with N labels", shape, len(labels)))
	}
	n, c := shape[0], shape[1]
	lab := g.Labels(labels, c)
	rowLoss := g.alloc(dt, n)
	g.dev.CrossEntropy(rowLoss.Buffer(), buf(logits), lab.Buffer(), n, c)
	st := device.Strides{Shape: g.ints(n), A: g.zeros(1)}
	y := g.alloc(dt)
	g.dev.Reduce(y.Buffer(), rowLoss.Buffer(), st, 1/float32(n))
	rowLoss.Release()
	out := g.result(y)
	if g.recording(logits) {
		g.save(logits.Value)
		g.saveOwn(lab)
		g.push(OpCrossEntropy, out, []*Var{logits}, func(dy *tensor.Tensor) {
			dl := g.alloc(dt, n)
			g.dev.Expand(dl.Buffer(), dy.Buffer(), st, 1/float32(n))
			dx := g.alloc(logits.DType(), shape...)
			g.dev.CrossEntropyGrad(dx.Buffer(), buf(logits), lab.Buffer(), dl.Buffer(), n, c)
			dl.Release()
			g.accum(logits, dx)
		})
	}
	return out
}

// MSE returns the mean of (a - b)² (computed in F32 under autocast).
func (g *Graph) MSE(a, b *Var) *Var {
	dt := g.computeType(OpMSE, a, b)
	d := g.Sub(g.as(a, dt), g.as(b, dt))
	return g.Mean(g.Mul(d, d))
}

// MatMul returns a @ b for a (M, K) and b (K, N), or batched a (B, M, K) and
// b (B, K, N).
func (g *Graph) MatMul(a0, b0 *Var) *Var {
	op := OpMatMul
	if len(a0.Shape()) == 3 {
		op = OpBMM
	}
	dt := g.computeType(op, a0, b0)
	a, b := g.as(a0, dt), g.as(b0, dt)
	as, bs := a.Shape(), b.Shape()
	var batch, m, k, n int
	switch {
	case len(as) == 2 && len(bs) == 2 && as[1] == bs[0]:
		batch, m, k, n = 1, as[0], as[1], bs[1]
	case len(as) == 3 && len(bs) == 3 && as[0] == bs[0] && as[2] == bs[1]:
		batch, m, k, n = as[0], as[1], as[2], bs[2]
	default:
		panic(fmt.Sprintf("autograd.MatMul: shapes %v and %v do not multiply", as, bs))
	}
	outShape := []int{m, n}
	if len(as) == 3 {
		outShape = []int{batch, m, n}
	}
	y := g.alloc(dt, outShape...)
	g.dev.Gemm(y.Buffer(), buf(a), buf(b), batched(batch, false, false, m, n, k, m*k, k*n, m*n))
	out := g.result(y)
	if g.recording(a, b) {
		g.save(a.Value, b.Value)
		g.push(op, out, []*Var{a, b}, func(dy *tensor.Tensor) {
			if a.requiresGrad { // da = dy @ bᵀ
				da := g.alloc(dt, as...)
				g.dev.Gemm(da.Buffer(), dy.Buffer(), buf(b), batched(batch, false, true, m, k, n, m*n, k*n, m*k))
				g.accum(a, da)
			}
			if b.requiresGrad { // db = aᵀ @ dy
				db := g.alloc(dt, bs...)
				g.dev.Gemm(db.Buffer(), buf(a), dy.Buffer(), batched(batch, true, false, k, n, m, m*k, m*n, k*n))
				g.accum(b, db)
			}
		})
	}
	return out
}

// batched describes batch products of op(A) (m, k) and op(B) (k, n), whose
// matrices are sa, sb and sc elements apart.
func batched(batch int, ta, tb bool, m, n, k int, sa, sb, sc int) device.GemmParams {
	return device.GemmParams{TransA: ta, TransB: tb, M: m, N: n, K: k, Alpha: 1, Batch: batch, StrideA: sa, StrideB: sb, StrideC: sc}
}

// Linear returns x @ wᵀ + b for x (..., in), w (out, in) and b (out) or nil,
// PyTorch's layout.
func (g *Graph) Linear(x0, w0, b0 *Var) *Var {
	dt := g.computeType(OpLinear, x0, w0, b0)
	x, w, b := g.as(x0, dt), g.as(w0, dt), g.as(b0, dt)
	xs, ws := x.Shape(), w.Shape()
	if len(ws) != 2 || len(xs) < 1 || xs[len(xs)-1] != ws[1] || (b != nil && !slices.Equal(b.Shape(), ws[:1])) {
		var bs []int
		if b != nil {
			bs = b.Shape()
		}
		panic(fmt.Sprintf("autograd.Linear: input %v, weight %v, bias %v; want (..., in), (out, in), (out)", xs, ws, bs))
	}
	in, outF := ws[1], ws[0]
	rows := tensor.Numel(xs) / in
	var space [8]int
	outShape := append(append(space[:0], xs[:len(xs)-1]...), outF)
	y := g.alloc(dt, outShape...)
	biasSt := device.Strides{Shape: g.ints(rows, outF), A: g.ints(0, 1)}
	beta := float32(0)
	if b != nil {
		g.dev.Expand(y.Buffer(), buf(b), biasSt, 1)
		beta = 1
	}
	g.dev.Gemm(y.Buffer(), buf(x), buf(w), device.GemmParams{TransB: true, M: rows, N: outF, K: in, Alpha: 1, Beta: beta})
	out := g.result(y)
	if g.recording(x, w, b) {
		g.save(x.Value, w.Value)
		g.push(OpLinear, out, []*Var{x, w, b}, func(dy *tensor.Tensor) {
			if x.requiresGrad { // dx = dy @ w
				dx := g.alloc(dt, xs...)
				g.dev.Gemm(dx.Buffer(), dy.Buffer(), buf(w), device.GemmParams{M: rows, N: in, K: outF, Alpha: 1})
				g.accum(x, dx)
			}
			if w.requiresGrad { // dw = dyᵀ @ x
				dwp := device.GemmParams{TransA: true, M: outF, N: in, K: rows, Alpha: 1}
				if p, ng := g.narrowGrad(w); p != nil {
					// Rounded to dt and widened, as the cast's backward would.
					dw := g.alloc(p.DType(), ws...)
					if ug := g.unscaling(p); ug != nil {
						nf := ug.GemmNarrowUnscale(dw.Buffer(), dy.Buffer(), buf(x), dwp, dt, g.unscale)
						g.accum(p, dw)
						p.unscaled = gradMark{p.Grad, g.unscale, nf}
					} else {
						ng.GemmNarrow(dw.Buffer(), dy.Buffer(), buf(x), dwp, dt)
						g.accum(p, dw)
					}
				} else {
					dw := g.alloc(dt, ws...)
					g.dev.Gemm(dw.Buffer(), dy.Buffer(), buf(x), dwp)
					g.accum(w, dw)
				}
			}
			if b != nil && b.requiresGrad {
				db := g.alloc(dt, outF)
				g.dev.Reduce(db.Buffer(), dy.Buffer(), biasSt, 1)
				g.accum(b, db)
			}
		})
	}
	return out
}

// Dropout zeroes each element of x with probability p and scales the rest
// by 1/(1-p). The mask comes from rng through the graph, so a checkpointed
// segment's recomputation draws the same one.
func (g *Graph) Dropout(x0 *Var, p float32, rng *RNG) *Var {
	if p < 0 || p > 1 {
		panic(fmt.Sprintf("autograd.Dropout: p = %v, want [0, 1]", p))
	}
	if p == 0 {
		return x0
	}
	dt := g.computeType(OpDropout, x0)
	x := g.as(x0, dt)
	key := g.Draw(rng, x.Value.Numel())
	y := g.alloc(dt, x.Shape()...)
	g.dev.Dropout(y.Buffer(), buf(x), p, key)
	out := g.result(y)
	if g.recording(x) {
		g.push(OpDropout, out, []*Var{x}, func(dy *tensor.Tensor) {
			dx := g.alloc(dt, x.Shape()...)
			g.dev.Dropout(dx.Buffer(), dy.Buffer(), p, key)
			g.accum(x, dx)
		})
	}
	return out
}
