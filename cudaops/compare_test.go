package cudaops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
)

// compareWithCPU runs every kernel of the contract on dev and on the CPU
// backend (the oracle) with identical random inputs, per dtype and per
// mix of dtypes, and checks dev's results against the CPU's with docs/design.md
// §6's rule |got-want| <= atol + rtol*|want| for the result's dtype: F32
// (1e-5, 1e-4), F16 (1e-3, 1e-2), BF16 (1e-3, 2e-2). Where dev sums in
// float32 what the CPU sums in float64 (GEMM, reductions, batch-norm
// statistics), the bound widens by sumSlack, with the reason at the call.
// Kernels that only move data (Fill, Copy, Im2Col, MaxPool, Argmax,
// Dropout, UnscaleCheck's multiply) must match bit for bit, and so must
// Dropout's mask.
func compareWithCPU(t *testing.T, dev device.Device) {
	for _, g := range []struct {
		name string
		fn   func(c *cmp)
	}{
		{"Fill", cmpFill}, {"Copy", cmpCopy}, {"Axpby", cmpAxpby}, {"Binary", cmpBinary},
		{"Unary", cmpUnary}, {"UnaryGrad", cmpUnaryGrad}, {"Reduce", cmpReduce}, {"Expand", cmpExpand},
		{"Gemm", cmpGemm}, {"Softmax", cmpSoftmax}, {"CrossEntropy", cmpCrossEntropy}, {"Argmax", cmpArgmax},
		{"Conv", cmpConv}, {"Pool", cmpPool}, {"Norm", cmpNorm}, {"NormAct", cmpNormAct}, {"Optim", cmpOptim},
		{"Dropout", cmpDropout},
	} {
		t.Run(g.name, func(t *testing.T) {
			c := &cmp{t: t, cpu: cpu.New(), dev: dev, rng: rand.New(rand.NewPCG(uint64(len(g.name)), 0x6d70))}
			defer c.release()
			g.fn(c)
		})
	}
}

// cmp holds a comparison's two devices and the buffer pairs it made.
type cmp struct {
	t        *testing.T
	cpu, dev device.Device
	rng      *rand.Rand
	bufs     []pair
}

// pair is one operand on the CPU ([0]) and on the device under test ([1]).
type pair [2]device.Buffer

func (c *cmp) release() {
	for _, p := range c.bufs {
		c.cpu.Free(p[0])
		c.dev.Free(p[1])
	}
}

// put returns a pair holding v rounded to dt on both devices.
func (c *cmp) put(dt dtype.DType, v []float32) pair {
	p := pair{c.cpu.Alloc(dt, len(v), device.Temp), c.dev.Alloc(dt, len(v), device.Temp)}
	c.cpu.CopyFromHost(p[0], v)
	c.dev.CopyFromHost(p[1], v)
	c.bufs = append(c.bufs, p)
	return p
}

// out is a destination pair, both pre-filled with 7 (kernels must not read
// it; a NaN here would hide nothing the conformance suite does not check).
func (c *cmp) out(dt dtype.DType, n int) pair {
	v := make([]float32, n)
	for i := range v {
		v[i] = 7
	}
	return c.put(dt, v)
}

func (c *cmp) uniform(n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*c.rng.Float64())
	}
	return v
}

func (c *cmp) host(b device.Buffer, d device.Device) []float32 {
	v := make([]float32, b.Len())
	d.CopyToHost(v, b)
	return v
}

// both returns the CPU's and the device's contents of p.
func (c *cmp) both(p pair) (want, got []float32) {
	return c.host(p[0], c.cpu), c.host(p[1], c.dev)
}

// near checks p's device contents against the CPU's, within dt's tolerance
// plus slack(i) (nil: none).
func (c *cmp) near(what string, p pair, slack func(i int) float64) {
	c.t.Helper()
	want, got := c.both(p)
	atol, rtol := dtype.Tolerance(p[0].DType())
	bad := 0
	for i := range want {
		w, g := float64(want[i]), float64(got[i])
		s := 0.0
		if slack != nil {
			s = slack(i)
		}
		if !dtype.Close(p[0].DType(), g, w, s) {
			if bad < 5 {
				c.t.Errorf("%s: %s[%d] = %v, CPU %v (|diff| %.3g > %.3g)", c.t.Name(), what, i, got[i], want[i], math.Abs(g-w), atol+rtol*math.Abs(w)+s)
			}
			bad++
		}
	}
	if bad > 5 {
		c.t.Errorf("%s: %s: %d of %d elements out of tolerance", c.t.Name(), what, bad, len(want))
	}
}

// exact checks p's device contents against the CPU's bit for bit (any NaN
// matches any NaN).
func (c *cmp) exact(what string, p pair) {
	c.t.Helper()
	want, got := c.both(p)
	bad := 0
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
			if bad < 5 {
				c.t.Errorf("%s: %s[%d] = %v (%#x), CPU %v (%#x)", c.t.Name(), what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 5 {
		c.t.Errorf("%s: %s: %d of %d elements differ", c.t.Name(), what, bad, len(want))
	}
}

// sumSlack is the extra error of a float32 sum of n terms whose magnitudes
// add up to abs, against the CPU's float64 one: rounding errors of terms of
// random sign grow like sqrt(n) ulps of the running magnitude, and two
// such sums in different orders (cuBLAS's tiles and split-K, our fixed
// trees) differ by about twice that.
func sumSlack(n int, abs float64) float64 {
	return 2 * math.Sqrt(float64(max(n, 1))) * abs / (1 << 24)
}

// combos are the dtype combinations of a kernel with nsrc floating sources:
// each dtype alone, then mixes (the destination first).
func combos(nsrc int) [][]dtype.DType {
	var out [][]dtype.DType
	for _, dt := range dtype.All {
		c := []dtype.DType{dt}
		for range nsrc {
			c = append(c, dt)
		}
		out = append(out, c)
	}
	mixes := [][]dtype.DType{
		{dtype.F32, dtype.F16, dtype.BF16, dtype.F16},
		{dtype.F16, dtype.F32, dtype.BF16, dtype.F32},
		{dtype.BF16, dtype.F16, dtype.F32, dtype.BF16},
	}
	for _, m := range mixes {
		out = append(out, m[:nsrc+1])
	}
	return out
}

func name(dts []dtype.DType) string {
	s := dts[0].String() + "<-"
	for i, d := range dts[1:] {
		if i > 0 {
			s += ","
		}
		s += d.String()
	}
	return s
}

func cmpFill(c *cmp) {
	for _, dt := range dtype.All {
		for _, v := range []float32{0, -2.5, 0.1, 70000, float32(math.Inf(1))} {
			p := c.out(dt, 1001)
			c.cpu.Fill(p[0], v)
			c.dev.Fill(p[1], v)
			c.exact(fmt.Sprintf("%v/v%v", dt, v), p)
		}
	}
}

func cmpCopy(c *cmp) {
	for _, sdt := range dtype.All {
		for _, ddt := range dtype.All {
			src := c.put(sdt, c.uniform(3000, -70000, 70000))
			dst := c.out(ddt, 3010)
			c.cpu.Copy(dst[0], 7, src[0], 3, 2990)
			c.dev.Copy(dst[1], 7, src[1], 3, 2990)
			c.exact(fmt.Sprintf("%v<-%v", ddt, sdt), dst)
		}
	}
}

func cmpAxpby(c *cmp) {
	for _, ty := range combos(2) {
		for _, s := range [][2]float32{{1, 1}, {2, -0.5}, {0.3, 0}} {
			n := 20001
			x, y := c.put(ty[1], c.uniform(n, -2, 2)), c.put(ty[2], c.uniform(n, -2, 2))
			dst := c.out(ty[0], n)
			c.cpu.Axpby(dst[0], x[0], y[0], s[0], s[1])
			c.dev.Axpby(dst[1], x[1], y[1], s[0], s[1])
			c.near(fmt.Sprintf("%s/a%v_b%v", name(ty), s[0], s[1]), dst, nil)
		}
	}
}

func cmpBinary(c *cmp) {
	shapes := []struct {
		name          string
		shape, sa, sb []int
		na, nb        int
	}{
		{"same", []int{33, 65}, []int{65, 1}, []int{65, 1}, 33 * 65, 33 * 65},
		{"row", []int{33, 65}, []int{65, 1}, []int{0, 1}, 33 * 65, 65},
		{"col", []int{33, 65}, []int{65, 1}, []int{1, 0}, 33 * 65, 33},
		{"channel", []int{4, 6, 25}, []int{150, 25, 1}, []int{0, 1, 0}, 600, 6},
		{"transposed", []int{17, 9}, []int{1, 17}, []int{9, 1}, 153, 153},
		{"scalar", []int{1000}, []int{1}, []int{0}, 1000, 1},
	}
	for op := range device.BinaryOp(device.NumBinaryOps) {
		for _, ty := range combos(2) {
			for _, s := range shapes {
				d := op.Def().Domains[0]
				a := c.put(ty[1], c.domain(d, s.na))
				bv := c.domain(d, s.nb)
				if d.BHi != 0 {
					bv = c.domain(device.Domain{Lo: d.BLo, Hi: d.BHi, Signed: d.BSigned}, s.nb)
				}
				b := c.put(ty[2], bv)
				n := 1
				for _, x := range s.shape {
					n *= x
				}
				dst := c.out(ty[0], n)
				st := device.Strides{Shape: s.shape, A: s.sa, B: s.sb}
				c.cpu.Binary(op, dst[0], a[0], b[0], st)
				c.dev.Binary(op, dst[1], a[1], b[1], st)
				c.near(fmt.Sprintf("%v/%s/%s", op, name(ty), s.name), dst, nil)
			}
		}
	}
}

// cmpUnary runs every unary op of device's table on each of its input
// domains.
func cmpUnary(c *cmp) {
	for op := range device.UnaryOp(device.NumUnaryOps) {
		for _, d := range op.Def().Domains {
			for _, ty := range combos(1) {
				n := 20001
				src := c.put(ty[1], c.domain(d, n))
				dst := c.out(ty[0], n)
				c.cpu.Unary(op, dst[0], src[0], d.Alpha)
				c.dev.Unary(op, dst[1], src[1], d.Alpha)
				c.near(fmt.Sprintf("%v/%v/%s", op, d.Alpha, name(ty)), dst, nil)
			}
		}
	}
}

// cmpUnaryGrad runs every unary op's gradient on each of its input
// domains, from the CPU's forward output for an op that keeps it.
func cmpUnaryGrad(c *cmp) {
	for op := range device.UnaryOp(device.NumUnaryOps) {
		def := op.Def()
		for _, d := range def.Domains {
			for _, ty := range combos(2) {
				n := 20001
				in := c.domain(d, n)
				if def.Keep == device.KeepOutput {
					for i, v := range in {
						in[i] = def.Eval(v, d.Alpha)
					}
				}
				dy, inb := c.put(ty[1], c.uniform(n, -2, 2)), c.put(ty[2], in)
				dst := c.out(ty[0], n)
				c.cpu.UnaryGrad(op, dst[0], dy[0], inb[0], d.Alpha)
				c.dev.UnaryGrad(op, dst[1], dy[1], inb[1], d.Alpha)
				c.near(fmt.Sprintf("%v/%s", op, name(ty)), dst, nil)
			}
		}
	}
}

// domain draws n inputs from d.
func (c *cmp) domain(d device.Domain, n int) []float32 {
	v := c.uniform(n, d.Lo, d.Hi)
	if d.Signed {
		for i := range v {
			if i%2 == 1 {
				v[i] = -v[i]
			}
		}
	}
	return v
}

func cmpReduce(c *cmp) {
	cases := []struct {
		name  string
		shape []int
		a     []int
		small int
	}{
		{"all", []int{100003}, []int{0}, 1},
		{"rows", []int{300, 700}, []int{1, 0}, 300},
		{"cols", []int{3000, 50}, []int{0, 1}, 50},
		{"channel", []int{32, 16, 14, 14}, []int{0, 1, 0, 0}, 16},
		{"transpose", []int{30, 70}, []int{1, 30}, 2100},
		{"empty", []int{0, 5}, []int{0, 1}, 5},
	}
	for _, ty := range combos(1) {
		for _, r := range cases {
			n := 1
			for _, x := range r.shape {
				n *= x
			}
			v := c.uniform(max(n, 1), -1, 2)
			src := c.put(ty[1], v)
			dst := c.out(ty[0], r.small)
			st := device.Strides{Shape: r.shape, A: r.a}
			c.cpu.Reduce(dst[0], src[0], st, 0.5)
			c.dev.Reduce(dst[1], src[1], st, 0.5)
			// Terms are at most 2 in magnitude; the device sums in float32.
			terms := n / max(r.small, 1)
			c.near(fmt.Sprintf("%s/%s", name(ty), r.name), dst, func(int) float64 { return sumSlack(terms, float64(terms)) })
		}
	}
}

func cmpExpand(c *cmp) {
	for _, ty := range combos(1) {
		src := c.put(ty[1], c.uniform(16, -2, 2))
		dst := c.out(ty[0], 32*16*49)
		st := device.Strides{Shape: []int{32, 16, 49}, A: []int{0, 1, 0}}
		c.cpu.Expand(dst[0], src[0], st, -1.5)
		c.dev.Expand(dst[1], src[1], st, -1.5)
		c.near(name(ty), dst, nil)
	}
}

func cmpGemm(c *cmp) {
	types := [][]dtype.DType{
		{dtype.F32, dtype.F32, dtype.F32}, {dtype.F32, dtype.F16, dtype.F16}, {dtype.F32, dtype.BF16, dtype.BF16},
		{dtype.F16, dtype.F16, dtype.F16}, {dtype.BF16, dtype.BF16, dtype.BF16},
		{dtype.F16, dtype.F32, dtype.F32}, {dtype.BF16, dtype.F16, dtype.F32}, {dtype.F32, dtype.BF16, dtype.F16},
	}
	cases := []device.GemmParams{
		{M: 64, N: 96, K: 256, Alpha: 1},
		{M: 33, N: 17, K: 129, Alpha: 1.5, Beta: -0.5, TransA: true},
		{M: 40, N: 50, K: 60, Alpha: 1, Beta: 1, TransB: true},
		{M: 7, N: 9, K: 11, Alpha: -1, TransA: true, TransB: true, OffA: 3, OffB: 5, OffC: 2},
		{M: 12, N: 20, K: 30, Alpha: 1, Batch: 4, StrideA: 12 * 30, StrideB: 0, StrideC: 12*20 + 3},
		{M: 5, N: 6, K: 0, Alpha: 1, Beta: 0.5},
		{M: 16, N: 8, K: 4, Alpha: 1, Beta: 1, Batch: 3, StrideA: 64, StrideB: 32, StrideC: 0}, // a shared, accumulated C
	}
	for _, ty := range types {
		for _, p := range cases {
			nb := p.Batches()
			span := func(off, stride, size int) int { return off + (nb-1)*stride + size }
			av := c.uniform(span(p.OffA, p.StrideA, p.M*p.K), -1, 1)
			bv := c.uniform(span(p.OffB, p.StrideB, p.K*p.N), -1, 1)
			a, b := c.put(ty[1], av), c.put(ty[2], bv)
			dst := c.put(ty[0], c.uniform(span(p.OffC, p.StrideC, p.M*p.N), -1, 1))
			c.cpu.Gemm(dst[0], a[0], b[0], p)
			c.dev.Gemm(dst[1], a[1], b[1], p)
			// Inputs lie in [-1, 1): sum|a*b| <= K, and a shared C
			// accumulates nb products. cuBLAS and gonum both sum in float32
			// but in different orders (tiles, split-K), so beyond the F32
			// rule they may differ by sumSlack of K terms of size 1 each,
			// plus the rounding of Beta*C.
			k := p.K * nb
			c.near(fmt.Sprintf("%s/%+v", name(ty), p), dst, func(int) float64 {
				return sumSlack(k, float64(k)*math.Abs(float64(p.Alpha))) + math.Abs(float64(p.Beta))*float64(nb)/(1<<23)
			})
		}
	}
}

func cmpSoftmax(c *cmp) {
	for _, ty := range combos(1) {
		for _, rc := range [][3]int{{64, 10, 0}, {7, 1000, 0}, {5, 37, 1000}} {
			rows, cols, shift := rc[0], rc[1], float64(rc[2])
			x := c.put(ty[1], c.uniform(rows*cols, shift-4, shift+4))
			dst := c.out(ty[0], rows*cols)
			c.cpu.LogSoftmax(dst[0], x[0], rows, cols)
			c.dev.LogSoftmax(dst[1], x[1], rows, cols)
			// A float32 logsumexp near |shift| is rounded to half an ulp there.
			c.near(fmt.Sprintf("LogSoftmax/%s/%dx%d+%v", name(ty), rows, cols, shift), dst, func(int) float64 { return 4 * (shift + 4) / (1 << 24) })

			y := c.host(dst[0], c.cpu)
			yb, dy := c.put(ty[1], y), c.put(ty[1], c.uniform(rows*cols, -1, 1))
			g := c.out(ty[0], rows*cols)
			c.cpu.LogSoftmaxGrad(g[0], dy[0], yb[0], rows, cols)
			c.dev.LogSoftmaxGrad(g[1], dy[1], yb[1], rows, cols)
			c.near(fmt.Sprintf("LogSoftmaxGrad/%s/%dx%d", name(ty), rows, cols), g, func(int) float64 { return sumSlack(cols, float64(cols)) })
		}
	}
}

func cmpCrossEntropy(c *cmp) {
	for _, ty := range combos(2) {
		rows, cols := 128, 10
		labels := make([]float32, rows)
		for i := range labels {
			labels[i] = float32(c.rng.IntN(cols))
		}
		x := c.put(ty[1], c.uniform(rows*cols, -5, 5))
		l := c.put(ty[2], labels)
		loss := c.out(ty[0], rows)
		c.cpu.CrossEntropy(loss[0], x[0], l[0], rows, cols)
		c.dev.CrossEntropy(loss[1], x[1], l[1], rows, cols)
		c.near("CrossEntropy/"+name(ty), loss, func(int) float64 { return 4.0 * 8 / (1 << 24) })

		dloss := c.put(ty[0], c.uniform(rows, -1, 1))
		g := c.out(ty[0], rows*cols)
		c.cpu.CrossEntropyGrad(g[0], x[0], l[0], dloss[0], rows, cols)
		c.dev.CrossEntropyGrad(g[1], x[1], l[1], dloss[1], rows, cols)
		c.near("CrossEntropyGrad/"+name(ty), g, nil)
	}
	// A label that is not a class index panics on both.
	l := c.put(dtype.F32, []float32{0, 10})
	x := c.put(dtype.F32, c.uniform(20, -1, 1))
	loss := c.out(dtype.F32, 2)
	for i, d := range []device.Device{c.cpu, c.dev} {
		func() {
			defer func() {
				if recover() == nil {
					c.t.Errorf("%s: CrossEntropy with label 10 of 10 classes did not panic on %s", c.t.Name(), d.Name())
				}
			}()
			d.CrossEntropy(loss[i], x[i], l[i], 2, 10)
		}()
	}
}

func cmpArgmax(c *cmp) {
	for _, sdt := range dtype.All {
		for _, ddt := range dtype.All {
			rows, cols := 300, 77
			v := make([]float32, rows*cols)
			for i := range v {
				v[i] = float32(c.rng.IntN(9) - 4) // ties everywhere: the first maximum wins
			}
			src := c.put(sdt, v)
			dst := c.out(ddt, rows)
			if ddt == dtype.BF16 {
				cols = 64 // BF16 holds the indices up to 256 exactly
			}
			c.cpu.Argmax(dst[0], src[0], rows, cols)
			c.dev.Argmax(dst[1], src[1], rows, cols)
			c.exact(fmt.Sprintf("%v<-%v", ddt, sdt), dst)
		}
	}
}

func cmpConv(c *cmp) {
	shapes := []device.ConvShape{
		device.NewConvShape(3, 4, 9, 11, 3, 3, 1, 1),
		device.NewConvShape(2, 3, 12, 10, 5, 3, 2, 2),
		device.NewConvShape(4, 2, 8, 8, 2, 2, 2, 0),
	}
	for _, ty := range combos(1) {
		for _, s := range shapes {
			s.N0, s.NB = 1, s.N-1
			x := c.put(ty[1], c.uniform(s.N*s.C*s.H*s.W, -2, 2))
			col := c.out(ty[0], s.NB*s.C*s.KH*s.KW*s.OH*s.OW)
			c.cpu.Im2Col(col[0], x[0], s)
			c.dev.Im2Col(col[1], x[1], s)
			c.exact(fmt.Sprintf("Im2Col/%s/%+v", name(ty), s), col)

			cv := c.put(ty[1], c.uniform(col[0].Len(), -2, 2))
			dx := c.out(ty[0], s.N*s.C*s.H*s.W)
			c.cpu.Col2Im(dx[0], cv[0], s)
			c.dev.Col2Im(dx[1], cv[1], s)
			c.near(fmt.Sprintf("Col2Im/%s/%+v", name(ty), s), dx, nil)
		}
	}
}

func cmpPool(c *cmp) {
	shapes := []device.PoolShape{
		device.NewPoolShape(2, 3, 9, 9, 2, 2, 0),
		device.NewPoolShape(2, 3, 10, 7, 3, 2, 1),
		device.NewPoolShape(1, 2, 11, 11, 3, 1, 1),
	}
	for _, ty := range combos(2) {
		for _, s := range shapes {
			xv := make([]float32, s.N*s.C*s.H*s.W)
			for i := range xv {
				xv[i] = float32(c.rng.IntN(7)) // ties, which the first maximum breaks
			}
			x := c.put(ty[1], xv)
			y := c.out(ty[0], s.N*s.C*s.OH*s.OW)
			arg := c.out(ty[2], y[0].Len())
			c.cpu.MaxPool(y[0], arg[0], x[0], s)
			c.dev.MaxPool(y[1], arg[1], x[1], s)
			c.exact(fmt.Sprintf("MaxPool/%s/%+v", name(ty), s), y)
			c.exact(fmt.Sprintf("MaxPool arg/%s/%+v", name(ty), s), arg)

			dy := c.put(ty[2], c.uniform(y[0].Len(), -1, 1))
			dx := c.out(ty[0], x[0].Len())
			c.cpu.MaxPoolGrad(dx[0], dy[0], arg[0], s)
			c.dev.MaxPoolGrad(dx[1], dy[1], arg[1], s)
			c.near(fmt.Sprintf("MaxPoolGrad/%s/%+v", name(ty), s), dx, nil)

			xa := c.put(ty[1], c.uniform(x[0].Len(), -2, 2))
			c.cpu.AvgPool(y[0], xa[0], s)
			c.dev.AvgPool(y[1], xa[1], s)
			c.near(fmt.Sprintf("AvgPool/%s/%+v", name(ty), s), y, nil)

			c.cpu.AvgPoolGrad(dx[0], dy[0], s)
			c.dev.AvgPoolGrad(dx[1], dy[1], s)
			c.near(fmt.Sprintf("AvgPoolGrad/%s/%+v", name(ty), s), dx, nil)
		}
	}
}

func cmpNorm(c *cmp) {
	for i, ty := range combos(2) {
		// Every other combination on channels that mp_bn_sums cuts into
		// three parts (12,295 elements: 4,099, 4,099 and 4,097).
		n, ch, hw := 16, 6, 49
		if i%2 == 1 {
			n, ch, hw = 5, 3, 2459
		}
		xv := c.uniform(n*ch*hw, -1, 1)
		for i := range xv {
			xv[i] += float32(3 * (i / hw % ch)) // channel means 0..15
		}
		x := c.put(ty[1], xv)
		mean, variance := c.out(dtype.F32, ch), c.out(dtype.F32, ch)
		c.cpu.Moments(mean[0], variance[0], x[0], n, ch, hw)
		c.dev.Moments(mean[1], variance[1], x[1], n, ch, hw)
		m := n * hw
		c.near("Moments/mean/"+name(ty), mean, func(int) float64 { return sumSlack(m, 16) })
		c.near("Moments/variance/"+name(ty), variance, func(int) float64 { return sumSlack(m, 1) })

		mv := c.host(mean[0], c.cpu)
		vv := c.host(variance[0], c.cpu)
		inv := make([]float32, ch)
		for i := range inv {
			inv[i] = float32(1 / math.Sqrt(float64(vv[i])+1e-5))
		}
		mb, ib := c.put(dtype.F32, mv), c.put(dtype.F32, inv)
		gamma, beta := c.put(dtype.F32, c.uniform(ch, 0.5, 1.5)), c.put(dtype.F32, c.uniform(ch, -1, 1))
		y := c.out(ty[0], n*ch*hw)
		c.cpu.BatchNorm(y[0], x[0], mb[0], ib[0], gamma[0], beta[0], n, ch, hw)
		c.dev.BatchNorm(y[1], x[1], mb[1], ib[1], gamma[1], beta[1], n, ch, hw)
		c.near("BatchNorm/"+name(ty), y, nil)
		c.cpu.BatchNorm(y[0], x[0], mb[0], ib[0], nil, nil, n, ch, hw)
		c.dev.BatchNorm(y[1], x[1], mb[1], ib[1], nil, nil, n, ch, hw)
		c.near("BatchNorm/nogamma/"+name(ty), y, nil)

		dy := c.put(ty[2], c.uniform(n*ch*hw, -1, 1))
		dx := c.out(ty[0], n*ch*hw)
		dg, db := c.out(dtype.F32, ch), c.out(dtype.F32, ch)
		c.cpu.BatchNormGrad(dx[0], dg[0], db[0], dy[0], x[0], mb[0], ib[0], gamma[0], n, ch, hw)
		c.dev.BatchNormGrad(dx[1], dg[1], db[1], dy[1], x[1], mb[1], ib[1], gamma[1], n, ch, hw)
		// |dy| < 1 and |xhat| < 4: the channel sums of m terms may differ by
		// sumSlack, and dx = k*(m*dy - sdy - xhat*sdyx) carries them with
		// k = gamma*invstd/m <= 1.5*3/m.
		sg, sb := sumSlack(m, 4*float64(m)), sumSlack(m, float64(m))
		c.near("BatchNormGrad/dgamma/"+name(ty), dg, func(int) float64 { return sg })
		c.near("BatchNormGrad/dbeta/"+name(ty), db, func(int) float64 { return sb })
		c.near("BatchNormGrad/dx/"+name(ty), dx, func(int) float64 { return 4.5 / float64(m) * (sb + 4*sg + 8*float64(m)/(1<<24)) })
	}
}

// cmpNormAct compares device.BatchNormActKernels: the affine map with the
// residual added and ReLU applied, with and without each, and its gradient
// (dres, the gradient through ReLU, bit for bit; dx, dgamma and dbeta with
// cmpNorm's slack).
func cmpNormAct(c *cmp) {
	ca, ok := c.cpu.(device.BatchNormActKernels)
	da, dok := c.dev.(device.BatchNormActKernels)
	if !ok || !dok {
		c.t.Fatalf("BatchNormActKernels: CPU %v, device %v", ok, dok)
	}
	n, ch, hw := 8, 5, 37
	m := n * hw
	for _, ty := range combos(2) {
		x := c.put(ty[1], c.uniform(n*ch*hw, -2, 2))
		res, dy := c.put(ty[1], c.uniform(n*ch*hw, -2, 2)), c.put(ty[2], c.uniform(n*ch*hw, -1, 1))
		mb, ib := c.put(dtype.F32, c.uniform(ch, -0.5, 0.5)), c.put(dtype.F32, c.uniform(ch, 0.5, 2))
		gamma, beta := c.put(dtype.F32, c.uniform(ch, 0.5, 1.5)), c.put(dtype.F32, c.uniform(ch, -1, 1))
		y, dx, dres := c.out(ty[0], n*ch*hw), c.out(ty[0], n*ch*hw), c.out(ty[0], n*ch*hw)
		dg, db := c.out(dtype.F32, ch), c.out(dtype.F32, ch)
		for _, v := range []struct {
			name      string
			res, relu bool
		}{{"plain", false, false}, {"relu", false, true}, {"res", true, false}, {"res+relu", true, true}} {
			r, dr := pair{}, pair{}
			if v.res {
				r, dr = res, dres
			}
			what := v.name + "/" + name(ty)
			ca.BatchNormAct(y[0], x[0], r[0], mb[0], ib[0], gamma[0], beta[0], n, ch, hw, v.relu)
			da.BatchNormAct(y[1], x[1], r[1], mb[1], ib[1], gamma[1], beta[1], n, ch, hw, v.relu)
			c.near("BatchNormAct/"+what, y, nil)
			// The gradient through ReLU at the CPU's y on both sides.
			yy := c.put(ty[0], c.host(y[0], c.cpu))
			ca.BatchNormActGrad(dx[0], dr[0], dg[0], db[0], dy[0], yy[0], x[0], mb[0], ib[0], gamma[0], n, ch, hw, v.relu)
			da.BatchNormActGrad(dx[1], dr[1], dg[1], db[1], dy[1], yy[1], x[1], mb[1], ib[1], gamma[1], n, ch, hw, v.relu)
			if v.res {
				c.exact("BatchNormActGrad/dres/"+what, dres)
			}
			// |dz| < 1 and |xhat| < 2*2.5+0.5*2: as in cmpNorm.
			sg, sb := sumSlack(m, 6*float64(m)), sumSlack(m, float64(m))
			c.near("BatchNormActGrad/dgamma/"+what, dg, func(int) float64 { return sg })
			c.near("BatchNormActGrad/dbeta/"+what, db, func(int) float64 { return sb })
			c.near("BatchNormActGrad/dx/"+what, dx, func(int) float64 { return 3 / float64(m) * (sb + 6*sg + 12*float64(m)/(1<<24)) })
		}
	}
}

func cmpOptim(c *cmp) {
	n := 50001
	for _, h := range []device.SGDParams{
		{LR: 0.1}, {LR: 0.05, Momentum: 0.9, WeightDecay: 0.01}, {LR: 0.05, Momentum: 0.9, Dampening: 0.1, Nesterov: true},
	} {
		p, mom := c.put(dtype.F32, c.uniform(n, -1, 1)), c.put(dtype.F32, make([]float32, n))
		for s := range 3 {
			g := c.put(dtype.F32, c.uniform(n, -1, 1))
			h.First = s == 0
			c.cpu.SGD(p[0], g[0], mom[0], h)
			c.dev.SGD(p[1], g[1], mom[1], h)
		}
		c.near(fmt.Sprintf("SGD/%+v/p", h), p, nil)
		c.near(fmt.Sprintf("SGD/%+v/momentum", h), mom, nil)
	}
	for _, h := range []device.AdamParams{
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Decoupled: true},
		{LR: 1e-2, Beta1: 0.8, Beta2: 0.99, Eps: 1e-6, WeightDecay: 0.1},
	} {
		p := c.put(dtype.F32, c.uniform(n, -1, 1))
		m, v := c.put(dtype.F32, make([]float32, n)), c.put(dtype.F32, make([]float32, n))
		for s := range 3 {
			g := c.put(dtype.F32, c.uniform(n, -1, 1))
			h.Step = s + 1
			c.cpu.Adam(p[0], g[0], m[0], v[0], h)
			c.dev.Adam(p[1], g[1], m[1], v[1], h)
		}
		c.near(fmt.Sprintf("Adam/%+v/p", h), p, nil)
		c.near(fmt.Sprintf("Adam/%+v/m", h), m, nil)
		c.near(fmt.Sprintf("Adam/%+v/v", h), v, nil)
	}
	for _, poison := range []float32{0, float32(math.Inf(1)), float32(math.NaN()), 3e38} {
		var cpuB, devB []device.Buffer
		var pairs []pair
		for _, size := range []int{10, 50001, 3} {
			v := c.uniform(size, -1e4, 1e4)
			if poison != 0 && size == 50001 {
				v[777] = poison
			}
			p := c.put(dtype.F32, v)
			pairs = append(pairs, p)
			cpuB, devB = append(cpuB, p[0]), append(devB, p[1])
		}
		want, got := c.cpu.UnscaleCheck(cpuB, 4), c.dev.UnscaleCheck(devB, 4)
		if want != got {
			c.t.Errorf("%s: UnscaleCheck with %v: %v, CPU %v", c.t.Name(), poison, got, want)
		}
		for i, p := range pairs {
			c.exact(fmt.Sprintf("UnscaleCheck/%v/grads[%d]", poison, i), p)
		}
	}
}

func cmpDropout(c *cmp) {
	for _, ty := range combos(1) {
		for _, p := range []float32{0, 0.1, 0.5} {
			n := 100003
			src := c.put(ty[1], c.uniform(n, 0.5, 2))
			dst := c.out(ty[0], n)
			key := device.RandKey{Seed: 0x1234_5678_9abc_def0, Offset: 1 << 33}
			c.cpu.Dropout(dst[0], src[0], p, key)
			c.dev.Dropout(dst[1], src[1], p, key)
			c.exact(fmt.Sprintf("%s/p%v", name(ty), p), dst)
		}
	}
}
