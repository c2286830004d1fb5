// Package devicetest is the conformance suite every mixprec backend must
// pass, in the manner of gonum's blas/testblas. A backend's test calls Run:
//
//	func TestConformance(t *testing.T) {
//		devicetest.Run(t, func() device.Device { return mybackend.New() })
//	}
//
// and every kernel of the device contract is checked, per dtype combination
// and per shape, against plain float64 references written here, along with
// the memory accounting (live and peak bytes by category and dtype) and the
// panics on double Free and use after Free.
//
// A backend can also be brought up a group of device.Kernels at a time:
// RunMemory, RunElementwise, RunLinAlg, RunLoss, RunOptim, RunConvPool,
// RunNorm and RunTransformer each take the backend's memory with one group
// (an ElementwiseBackend, a LinAlgBackend, ...) and run Run's checks of it,
// through a device that has that group alone, so they call no kernel
// outside it. A backend type that embeds the groups it does not implement
// yet as nil interfaces is a device.Device, and device.Pool gives it memory
// and its accounting; TestStub brings up such a backend with Gemm alone.
//
// The references are float64 code written here and in package oracle,
// from the operations' definitions, apart from every backend and from
// device's op tables (whose rows define the elementwise ops for the
// backends): an elementwise op's value and gradient come from the oracle,
// and the suite draws its inputs from the domains in its row. Inputs are
// drawn with fixed seeds and rounded to their storage dtype first, so a
// reference computes on exactly what the device stores; its result is
// rounded to the destination dtype and compared with docs/design.md's one
// tolerance rule, |got-want| <= atol + rtol*|want| (dtype.Close), widened
// only where a float32 accumulation or a float32 logsumexp is allowed to
// lose more, with the reason and the measured error next to it. Kernels
// that only move or round values (Fill, Copy, Im2Col, MaxPool, Argmax,
// UnscaleCheck's multiply, Dropout's mask) must match bit for bit.
//
// Every kernel is run twice, first into a destination pre-filled with NaN
// and then into one holding another value, and the two results must agree
// bit for bit: kernels are deterministic and never read what they overwrite.
//
// NaNs of both signs (0x7fc00000, and 0xffc00000, the one x86 arithmetic
// produces) are fed to every unary op and its gradient, to Maximum and
// Minimum, and to the pools and their gradients: a NaN in comes out as a
// NaN, as in PyTorch, except where PyTorch's own rule says otherwise (ReLU's
// gradient is 0 wherever its output is <= 0, whatever dy holds), and
// MaxPool chooses a window's last NaN (see nan.go).
//
// What the contract leaves open is not tested: F32 subnormals (a GPU may
// flush them), NaN inputs to Argmax and the other kernels, aliasing other
// than Axpby's dst = x or y and Copy onto itself, nil gamma or beta in
// BatchNorm, and zero-length buffers.
package devicetest

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// family is a part of the contract the suite tests on its own: the memory
// of device.Device, or one group of device.Kernels.
type family uint8

const (
	memory family = iota
	elementwise
	linAlg
	loss
	optimKernels
	convPool
	norm
	transformer
)

// tests are the suite's subtests, each of one family, in the order Run
// runs them. A family's tests use the device's memory and that family's
// kernels and nothing else (TestCPUByFamily in cpu_test.go holds them to
// it), except Memory's checks that kernels reject a freed buffer, which
// use Fill, Copy and Unary.
var tests = []struct {
	name string
	fam  family
	fn   func(t *testing.T, dev device.Device)
}{
	{"Memory", memory, testMemory},
	{"HostCopy", memory, testHostCopy},
	{"Fill", elementwise, testFill},
	{"Copy", elementwise, testCopy},
	{"Gemm", linAlg, testGemm},
	{"GemmNarrow", linAlg, testGemmNarrow},
	{"GemmNarrowUnscale", linAlg, testGemmNarrowUnscale},
	{"Axpby", elementwise, testAxpby},
	{"Binary", elementwise, testBinary},
	{"Unary", elementwise, testUnary},
	{"UnaryGrad", elementwise, testUnaryGrad},
	{"Reduce", elementwise, testReduce},
	{"Expand", elementwise, testExpand},
	{"ReduceExpandAdjoint", elementwise, testReduceExpandAdjoint},
	{"LogSoftmax", loss, testLogSoftmax},
	{"LogSoftmaxGrad", loss, testLogSoftmaxGrad},
	{"CrossEntropy", loss, testCrossEntropy},
	{"CrossEntropyGrad", loss, testCrossEntropyGrad},
	{"Argmax", loss, testArgmax},
	{"SGD", optimKernels, testSGD},
	{"Adam", optimKernels, testAdam},
	{"UnscaleCheck", optimKernels, testUnscaleCheck},
	{"MultiTensor", optimKernels, testMultiTensor},
	{"Im2Col", convPool, testIm2Col},
	{"Col2Im", convPool, testCol2Im},
	{"Im2ColAdjoint", convPool, testIm2ColAdjoint},
	{"DirectConv", convPool, testDirectConv},
	{"MaxPool", convPool, testMaxPool},
	{"MaxPoolGrad", convPool, testMaxPoolGrad},
	{"AvgPool", convPool, testAvgPool},
	{"AvgPoolGrad", convPool, testAvgPoolGrad},
	{"AvgPoolAdjoint", convPool, testAvgPoolAdjoint},
	{"Moments", norm, testMoments},
	{"BatchNorm", norm, testBatchNorm},
	{"BatchNormGrad", norm, testBatchNormGrad},
	{"BatchNormAct", norm, testBatchNormAct},
	{"BatchNormActGrad", norm, testBatchNormActGrad},
	{"Dropout", elementwise, testDropout},
	{"Embedding", transformer, testEmbedding},
	{"EmbeddingGrad", transformer, testEmbeddingGrad},
	{"Softmax", transformer, testSoftmax},
	{"SoftmaxGrad", transformer, testSoftmaxGrad},
	{"LayerNorm", transformer, testLayerNorm},
	{"LayerNormGrad", transformer, testLayerNormGrad},
	{"Attention", transformer, testAttention},
	{"AttentionGrad", transformer, testAttentionGrad},
}

// Run runs the whole suite, one subtest per kernel (or per part of the
// memory contract), then per dtype combination and per case.
//
// open is called once per subtest and may return the same device every
// time (a backend whose device is expensive to open should share one). The
// suite frees every buffer it allocates, and its memory checks work on
// differences from what the device held before, so the device may hold
// other buffers; nothing else may use it while Run runs.
func Run(t *testing.T, open func() device.Device) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev := open()
			if dev == nil {
				t.Fatal("open returned a nil device")
			}
			tc.fn(t, dev)
		})
	}
}

// Backend is what every group's checks need of a backend: a name and its
// memory. A backend is brought up a group of device.Kernels at a time, and
// each group's runner takes the backend with that group alone: a backend
// that has memory and elementwise kernels (an ElementwiseBackend) runs
// RunMemory and RunElementwise long before it is a device.Device.
type Backend interface {
	Name() string
	device.Memory
}

// ElementwiseBackend is a Backend with device.ElementwiseKernels.
type ElementwiseBackend interface {
	Backend
	device.ElementwiseKernels
}

// LinAlgBackend is a Backend with device.LinAlgKernels.
type LinAlgBackend interface {
	Backend
	device.LinAlgKernels
}

// LossBackend is a Backend with device.LossKernels.
type LossBackend interface {
	Backend
	device.LossKernels
}

// OptimBackend is a Backend with device.OptimKernels.
type OptimBackend interface {
	Backend
	device.OptimKernels
}

// ConvPoolBackend is a Backend with device.ConvPoolKernels.
type ConvPoolBackend interface {
	Backend
	device.ConvPoolKernels
}

// NormBackend is a Backend with device.NormKernels.
type NormBackend interface {
	Backend
	device.NormKernels
}

// TransformerBackend is a Backend with device.TransformerKernels.
type TransformerBackend interface {
	Backend
	device.TransformerKernels
}

// partial is the device.Device a group's runner tests: the backend's memory
// and the one group it was given, the other groups nil interfaces, so that
// a check calling a kernel outside its group panics and fails its case.
// backend is what the runner was given, where the checks of the group's
// optional interfaces (device.NarrowGemmer, device.MultiTensor) look.
type partial struct {
	backend Backend
	device.Memory
	device.ElementwiseKernels
	device.LinAlgKernels
	device.LossKernels
	device.ConvPoolKernels
	device.NormKernels
	device.OptimKernels
	device.TransformerKernels
}

func (p *partial) Name() string { return p.backend.Name() }

// backendOf is the backend under test: the one a group's runner was
// given, or dev itself.
func backendOf(dev device.Device) any {
	if p, ok := dev.(*partial); ok {
		return p.backend
	}
	return dev
}

// optional returns the backend's optional interface T, and whether it has
// it.
func optional[T any](dev device.Device) (T, bool) {
	v, ok := backendOf(dev).(T)
	return v, ok
}

// runFamily runs the subtests of Run that belong to f, on dev.
func runFamily(t *testing.T, dev device.Device, f family) {
	t.Helper()
	for _, tc := range tests {
		if tc.fam == f {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, dev) })
		}
	}
}

// group runs f's subtests on b's memory with the one group k.
func group(t *testing.T, b Backend, f family, set func(p *partial)) {
	t.Helper()
	if b == nil {
		t.Fatal("devicetest: nil backend")
	}
	p := &partial{backend: b, Memory: b}
	set(p)
	runFamily(t, p, f)
}

// RunMemory runs Run's checks of the backend's memory: accounting, host
// copies, and the panics on a double Free and on use after Free (including
// by Fill, Copy and Unary when the backend has its elementwise kernels).
func RunMemory(t *testing.T, b Backend) {
	t.Helper()
	if b == nil {
		t.Fatal("devicetest: nil backend")
	}
	p := &partial{backend: b, Memory: b}
	if k, ok := b.(device.ElementwiseKernels); ok {
		p.ElementwiseKernels = k
	}
	runFamily(t, p, memory)
}

// RunElementwise runs Run's checks of device.ElementwiseKernels.
func RunElementwise(t *testing.T, b ElementwiseBackend) {
	group(t, b, elementwise, func(p *partial) { p.ElementwiseKernels = b })
}

// RunLinAlg runs Run's checks of device.LinAlgKernels, and of its optional
// device.NarrowGemmer and device.UnscalingGemmer where b has them.
func RunLinAlg(t *testing.T, b LinAlgBackend) {
	group(t, b, linAlg, func(p *partial) { p.LinAlgKernels = b })
}

// RunLoss runs Run's checks of device.LossKernels.
func RunLoss(t *testing.T, b LossBackend) {
	group(t, b, loss, func(p *partial) { p.LossKernels = b })
}

// RunOptim runs Run's checks of device.OptimKernels, and of its optional
// device.MultiTensor and device.StepCaster where b has them.
func RunOptim(t *testing.T, b OptimBackend) {
	group(t, b, optimKernels, func(p *partial) { p.OptimKernels = b })
}

// RunConvPool runs Run's checks of device.ConvPoolKernels.
func RunConvPool(t *testing.T, b ConvPoolBackend) {
	group(t, b, convPool, func(p *partial) { p.ConvPoolKernels = b })
}

// RunNorm runs Run's checks of device.NormKernels.
func RunNorm(t *testing.T, b NormBackend) {
	group(t, b, norm, func(p *partial) { p.NormKernels = b })
}

// RunTransformer runs Run's checks of device.TransformerKernels.
func RunTransformer(t *testing.T, b TransformerBackend) {
	group(t, b, transformer, func(p *partial) { p.TransformerKernels = b })
}

// u32 is the unit roundoff of float32.
const u32 = 1.0 / (1 << 24)

// sumSlack is the extra absolute error allowed for a float32 sum of n terms
// whose magnitudes add up to abs: sqrt(n)*u*abs. The rigorous worst case of
// a sequential float32 loop is n*u*abs, far too loose to catch anything;
// rounding errors of random-signed data grow like sqrt(n), and this bound is
// about three standard deviations of that walk. A backend that accumulates
// in float32 (the contract's minimum) passes; CPU, which sums in float64 or
// in short float32 runs, stays far below it (see the measured errors at the
// call sites). For the small sums of most cases it is below atol.
func sumSlack(n int, abs float64) float64 {
	return math.Sqrt(float64(max(n, 1))) * u32 * abs
}

// maxReports is how many mismatches one comparison reports one by one.
const maxReports = 6

// env is one test case's view of the device: a seeded generator, the
// buffers it allocated (freed when the case ends), and comparisons that
// name the case.
type env struct {
	t    *testing.T
	dev  device.Device
	rng  *rand.Rand
	bufs []device.Buffer
}

// newEnv returns an env for t. The seed is a hash of the case's name without
// the top-level test, so every backend sees the same inputs for a case and
// adding a case does not change the others' inputs.
func newEnv(t *testing.T, dev device.Device) *env {
	name := t.Name()
	if i := strings.IndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	e := &env{t: t, dev: dev, rng: rand.New(rand.NewPCG(h.Sum64(), 0x6d69787072656321))}
	t.Cleanup(func() {
		for _, b := range e.bufs {
			dev.Free(b)
		}
	})
	return e
}

// run runs body as subtest name with a fresh env, turning a panic in a
// kernel into a failure of that case alone.
func run(t *testing.T, dev device.Device, name string, body func(e *env)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		e := newEnv(t, dev)
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s: panic: %v\n%s", t.Name(), r, debug.Stack())
			}
		}()
		body(e)
	})
}

// alloc returns an uninitialised buffer freed when the case ends.
func (e *env) alloc(dt dtype.DType, n int) device.Buffer {
	b := e.dev.Alloc(dt, n, device.Temp)
	e.bufs = append(e.bufs, b)
	return b
}

// put rounds v in place to dt, so that the caller's reference sees exactly
// what the device stores, and returns a new buffer holding it.
func (e *env) put(dt dtype.DType, v []float32) device.Buffer {
	roundTo(dt, v)
	b := e.alloc(dt, len(v))
	e.dev.CopyFromHost(b, v)
	return b
}

// full returns a new buffer of n elements all set to v (through
// CopyFromHost, not the Fill kernel under test).
func (e *env) full(dt dtype.DType, n int, v float32) device.Buffer {
	h := make([]float32, n)
	for i := range h {
		h[i] = v
	}
	return e.put(dt, h)
}

// get reads b back to the host.
func (e *env) get(b device.Buffer) []float32 {
	out := make([]float32, b.Len())
	e.dev.CopyToHost(out, b)
	return out
}

// uniform returns n values uniform in [lo, hi).
func (e *env) uniform(n int, lo, hi float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(lo + (hi-lo)*e.rng.Float64())
	}
	return v
}

// signed returns n values whose magnitude is uniform in [lo, hi), with a
// random sign: inputs kept away from zero (divisors, reciprocals).
func (e *env) signed(n int, lo, hi float64) []float32 {
	v := e.uniform(n, lo, hi)
	for i := range v {
		if e.rng.IntN(2) == 0 {
			v[i] = -v[i]
		}
	}
	return v
}

// draw returns n values uniform in [lo, hi), or, when signed, with
// magnitudes uniform there and random signs: a device.Domain's inputs.
func (e *env) draw(lo, hi float64, signed bool, n int) []float32 {
	if signed {
		return e.signed(n, lo, hi)
	}
	return e.uniform(n, lo, hi)
}

// roundTo rounds every element of v to dt in place.
func roundTo(dt dtype.DType, v []float32) {
	for i, x := range v {
		v[i] = dtype.Round(dt, x)
	}
}

// nan is the first pre-fill of every output, so a kernel that reads its
// destination shows it; refill is the second.
var nan = float32(math.NaN())

const refill = -7.5

// twice runs f twice, first with outputs to be pre-filled with NaN and then
// with refill, and checks that its results agree bit for bit: kernels must
// be deterministic and must not depend on what they overwrite. It returns
// the first run's results.
func (e *env) twice(f func(fill float32) [][]float32) [][]float32 {
	e.t.Helper()
	a := f(nan)
	b := f(refill)
	for k := range a {
		bad := 0
		for i := range a[k] {
			if math.Float32bits(a[k][i]) != math.Float32bits(b[k][i]) && !(isNaN32(a[k][i]) && isNaN32(b[k][i])) {
				if bad < maxReports {
					e.t.Errorf("%s: output %d [%d]: two runs on the same inputs differ: %v (dst pre-filled with NaN), then %v (pre-filled with %v)",
						e.t.Name(), k, i, a[k][i], b[k][i], float32(refill))
				}
				bad++
			}
		}
		if bad > maxReports {
			e.t.Errorf("%s: output %d: %d of %d elements differ between two runs", e.t.Name(), k, bad, len(a[k]))
		}
	}
	return a
}

// output is twice for a kernel with one output: run writes dst, n
// elements of dt, and output returns what the first run wrote.
func (e *env) output(dt dtype.DType, n int, run func(dst device.Buffer)) []float32 {
	e.t.Helper()
	return e.twice(func(fill float32) [][]float32 {
		dst := e.full(dt, n, fill)
		run(dst)
		return [][]float32{e.get(dst)}
	})[0]
}

func isNaN32(f float32) bool { return f != f }

// near checks got against the float64 reference want, rounded to dt, with
// dt's tolerance plus slack[i] (slack may be nil).
func (e *env) near(what string, dt dtype.DType, got []float32, want, slack []float64) {
	e.t.Helper()
	if len(got) != len(want) {
		e.t.Fatalf("%s: %s: got %d values, want %d", e.t.Name(), what, len(got), len(want))
	}
	atol, rtol := dtype.Tolerance(dt)
	bad := 0
	for i := range want {
		w := float64(dtype.Round(dt, float32(want[i])))
		s := 0.0
		if slack != nil {
			s = slack[i]
		}
		g := float64(got[i])
		if !dtype.Close(dt, g, w, s) {
			if bad < maxReports {
				e.t.Errorf("%s: %s[%d]: got %v, want %v (exact %.9g; |diff| %.3g > tolerance %.3g)",
					e.t.Name(), what, i, got[i], float32(w), want[i], math.Abs(g-w), atol+rtol*math.Abs(w)+s)
			}
			bad++
		}
	}
	if bad > maxReports {
		e.t.Errorf("%s: %s: %d of %d elements out of tolerance", e.t.Name(), what, bad, len(want))
	}
}

// exact checks got bit for bit against want (a NaN matches any NaN).
func (e *env) exact(what string, got, want []float32) {
	e.t.Helper()
	if len(got) != len(want) {
		e.t.Fatalf("%s: %s: got %d values, want %d", e.t.Name(), what, len(got), len(want))
	}
	bad := 0
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(isNaN32(g) && isNaN32(w)) {
			if bad < maxReports {
				e.t.Errorf("%s: %s[%d]: got %v (%#08x), want %v (%#08x) exactly",
					e.t.Name(), what, i, g, math.Float32bits(g), w, math.Float32bits(w))
			}
			bad++
		}
	}
	if bad > maxReports {
		e.t.Errorf("%s: %s: %d of %d elements differ", e.t.Name(), what, bad, len(want))
	}
}

// dtName names a combination of dtypes: "f16" or "f16,bf16->f32".
func dtName(dst dtype.DType, src ...dtype.DType) string {
	same := true
	for _, s := range src {
		same = same && s == dst
	}
	if same {
		return dst.String()
	}
	parts := make([]string, len(src))
	for i, s := range src {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",") + "->" + dst.String()
}

// dtCase is a destination dtype and the dtypes of the sources.
type dtCase struct {
	dst dtype.DType
	src []dtype.DType
}

func (c dtCase) String() string { return dtName(c.dst, c.src...) }

// sameAnd returns the three same-dtype combinations of nsrc sources
// followed by the mixed ones given.
func sameAnd(nsrc int, mixed ...dtCase) []dtCase {
	var out []dtCase
	for _, dt := range dtype.All {
		src := make([]dtype.DType, nsrc)
		for i := range src {
			src[i] = dt
		}
		out = append(out, dtCase{dst: dt, src: src})
	}
	return append(out, mixed...)
}

func mix(dst dtype.DType, src ...dtype.DType) dtCase { return dtCase{dst: dst, src: src} }

// widen returns v as float64s.
func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// dot is the float64 inner product.
func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// absDot is sum |a_i b_i|, the scale of dot's rounding error.
func absDot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i]) * float64(b[i]))
	}
	return s
}

// checkAdjoint checks <lhs, y> == <x, rhs>, the identity between a linear
// map and its adjoint, in float64 with a relative tolerance of the F32 rule
// against the terms' magnitudes.
func (e *env) checkAdjoint(what string, lhs, y, x, rhs []float32) {
	e.t.Helper()
	l, r := dot(lhs, y), dot(x, rhs)
	scale := absDot(lhs, y) + absDot(x, rhs)
	_, rtol := dtype.Tolerance(dtype.F32)
	if math.Abs(l-r) > rtol*scale {
		e.t.Errorf("%s: %s: <A x, y> = %.9g but <x, A* y> = %.9g (|diff| %.3g > %.3g)", e.t.Name(), what, l, r, math.Abs(l-r), rtol*scale)
	}
}

// mustPanic checks that f panics.
func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: %s did not panic", t.Name(), what)
		}
	}()
	f()
}
