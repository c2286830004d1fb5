// Package autograd records differentiable operations on a tape (Graph) as
// they run and computes gradients by walking it backwards.
//
// A Graph lives for one training step: it owns every tensor its operations
// create, and Release frees them all at once, so device memory never waits
// for Go's garbage collector and peak-memory figures are exact; Free lets
// code that is done with a result sooner say so. Parameters and their
// gradients belong to the modules that made them, not to graphs.
//
// Each operation asks the graph's CastPolicy which dtype to compute in (the
// hook package amp uses for autocast) and runs its backward pass in that
// same dtype.
//
// # One goroutine per Graph
//
// A Graph belongs to one goroutine at a time, like a bufio.Writer: its
// tape, the list of tensors it owns and its NoGrad depth are not
// synchronised, so two goroutines recording on one Graph at once would lose
// operations from the tape and leak the tensors of the lost records. A Graph may be handed
// from one goroutine to another between calls (with the usual
// synchronisation); separate Graphs may run in separate goroutines, but
// Backward accumulates into the gradients of the parameters it reaches, so
// two graphs sharing parameters must not run Backward at the same time.
//
// The misuse is caught cheaply, in the manner of the runtime's "concurrent
// map writes" check: each change to a graph's bookkeeping takes an atomic
// flag, and a goroutine that finds it taken panics with "autograd: Graph
// used from two goroutines at once". The check never fires for a graph
// used correctly, and it fires before the tape or the ownership list can
// be corrupted; a misuse whose calls happen never to overlap is not
// reported (nor corrupts them). Run tests under -race to find every case.
package autograd

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Var is a value in a computation: a tensor, the gradient that flows back to
// it, and the operation that produced it.
type Var struct {
	// Value is the forward result.
	Value *tensor.Tensor
	// Grad is the gradient of the loss with respect to Value, once Backward
	// has reached this Var. For a parameter it accumulates across Backward
	// calls until ZeroGrad. Intermediate results' gradients are freed as soon
	// as they have been used, unless RetainGrad was called.
	Grad *tensor.Tensor
	// Name labels a parameter in state files and messages.
	Name string

	requiresGrad bool
	param        bool
	retain       bool
	borrowed     bool // a leaf over a tensor the graph does not own (Leaf)
	freed        bool // its value was released by Graph.Free
	node         *node
	castOf       *Var         // for a parameter's autocast copy: the parameter
	uses         int          // for such a copy: how many ops took it (Graph.as)
	graph        *Graph       // the graph that made it; nil for parameters
	host         *tensor.Host // a parameter's initial values until To
	unscaled     gradMark     // a parameter's gradient unscaled as stored (UnscaleAsStored)
}

// gradMark records that a parameter's gradient grad was multiplied by inv
// as a product stored it (Graph.UnscaleAsStored), and whether an unscaled
// value was Inf or NaN. It holds while the parameter's Grad is still grad.
type gradMark struct {
	grad      *tensor.Tensor
	inv       float32
	nonFinite bool
}

// Shape is the shape of Value (or of a parameter not yet on a device).
func (v *Var) Shape() []int {
	if v.Value == nil && v.host != nil {
		return v.host.Shape
	}
	return v.Value.Shape()
}

// DType is the dtype of Value.
func (v *Var) DType() dtype.DType { return v.Value.DType() }

// RequiresGrad reports whether gradients flow to v.
func (v *Var) RequiresGrad() bool { return v.requiresGrad }

// RetainGrad keeps an intermediate result's gradient after Backward has used
// it, so it can be inspected.
func (v *Var) RetainGrad() { v.retain = true }

// IsParam reports whether v is a parameter.
func (v *Var) IsParam() bool { return v.param }

func (v *Var) String() string {
	return fmt.Sprintf("Var(%s %v)", v.Name, v.Shape())
}

// NewParam returns a parameter holding the initial values h in host memory;
// To places it on a device. Parameters are always F32 (master weights).
func NewParam(name string, h tensor.Host) *Var {
	return &Var{Name: name, requiresGrad: true, param: true, host: &h}
}

// NewBuffer returns module state that is saved and moved with the
// parameters but not trained (batch normalisation's running statistics).
func NewBuffer(name string, h tensor.Host) *Var {
	return &Var{Name: name, param: true, host: &h}
}

// ParamOf wraps a tensor already on a device as a parameter.
func ParamOf(name string, t *tensor.Tensor) *Var {
	return &Var{Name: name, Value: t, requiresGrad: true, param: true}
}

// To places the parameter on dev as an F32 tensor accounted as Param (and its
// gradient, if any, as Grad). Moving to the device it is already on does
// nothing.
func (v *Var) To(dev device.Device) {
	if !v.param {
		panic("autograd: To on " + v.String() + ", which is not a parameter")
	}
	switch {
	case v.Value == nil:
		v.Value = tensor.FromHost(dev, dtype.F32, device.Param, *v.host)
		v.host = nil
	case v.Value.Device() != dev:
		h := v.Value.Host()
		v.Value.Release()
		v.Value = tensor.FromHost(dev, dtype.F32, device.Param, h)
		if v.Grad != nil {
			gh := v.Grad.Host()
			v.Grad.Release()
			v.Grad = tensor.FromHost(dev, dtype.F32, device.Grad, gh)
		}
	}
}

// InitialValues returns a copy of the values of a parameter not yet placed
// on a device (nil once it is).
func (v *Var) InitialValues() []float32 {
	if v.host == nil {
		return nil
	}
	return append([]float32(nil), v.host.Data...)
}

// SetValues overwrites a parameter's values (on its device, or the initial
// values if it has none yet); data must have one value per element.
func (v *Var) SetValues(data []float32) {
	if !v.param {
		panic("autograd: SetValues on " + v.String() + ", which is not a parameter")
	}
	if n := tensor.Numel(v.Shape()); n != len(data) {
		panic(fmt.Sprintf("autograd: SetValues of %d values into %v of shape %v", len(data), v, v.Shape()))
	}
	if v.Value == nil {
		copy(v.host.Data, data)
		return
	}
	v.Value.Device().CopyFromHost(v.Value.Buffer(), data)
	v.Value.Modified() // autocast's cached copies are stale
}

// ZeroGrad sets a parameter's gradient to zero, keeping its memory.
func (v *Var) ZeroGrad() {
	if v.Grad != nil {
		v.Grad.Device().Fill(v.Grad.Buffer(), 0)
	}
}

// FreeGrad releases a parameter's gradient memory (PyTorch's set_to_none).
func (v *Var) FreeGrad() {
	v.unscaled = gradMark{}
	if v.Grad != nil {
		v.Grad.Release()
		v.Grad = nil
	}
}

func (v *Var) mustLive(op string) {
	if v.Value == nil {
		panic(fmt.Sprintf("autograd.%s: %s has no value on a device (call To(dev) on the model first)", op, v))
	}
	if v.freed {
		panic(fmt.Sprintf("autograd.%s: %s was freed by Graph.Free (free a result only after its last use)", op, v))
	}
	if v.Value.Released() {
		panic(fmt.Sprintf("autograd.%s: %s was released (its graph's Release was called)", op, v))
	}
}

// node is one recorded operation: one output and its backward function,
// or (a checkpointed segment) several outputs and backMulti.
type node struct {
	op        Op
	out       *Var
	backward  func(dy *tensor.Tensor)
	outs      []*Var
	backMulti func(dys []*tensor.Tensor)
	mark      func() // a Mark: no op, a point the backward pass reports
}

// Graph is the tape of one forward and backward pass.
type Graph struct {
	dev      device.Device
	tape     []*node
	owned    []*tensor.Tensor
	policy   CastPolicy
	noGrad   int
	casts    []castEntry // parameters' copies in other dtypes in use, see as
	saves    []saveAt    // every value an op saved, and where on the tape (see save)
	deferred []saveAt    // saved values to release once backward is past their savers (see Free)
	rng      drawSource
	saveCat  device.Category
	keptCols int64 // bytes of convolution columns kept for backward, within colKeep
	colKeep  int64 // ConvColumnBudget
	im2col   bool  // Im2Col: convolutions take the column path
	colChunk int   // ConvChunk; 0: the device's
	sawGrad  bool
	replay   bool // a checkpointed segment's recomputation: state updates already happened
	segment  bool // a checkpointed segment's graph: parameters' casts are its own (see as)
	keepCast bool // a graph without gradients that leaves its casts on the parameters (KeepCasts)
	backDone bool
	released bool
	busy     atomic.Bool // held while the bookkeeping above changes; see enter
	ready    *readiness  // OnGradReady's bookkeeping; nil without a hook
	unscale  float32     // UnscaleAsStored's factor; 0 without
	obs      Observer    // told where each op's work ends (and a backward's begins); see observe.go

	// The graph's arenas: the structs of its tensors, Vars and tape
	// nodes, and the first stretch of its tape and ownership list, come
	// from chunks instead of one Go allocation each (see arena.go).
	ts       tensor.Arena
	vars     slab[Var]
	nodes    slab[node]
	tape0    [24]*node
	owned0   [48]*tensor.Tensor
	saves0   [32]saveAt
	casts0   [8]castEntry
	dtsSpace [4]dtype.DType // computeType's scratch
}

// misuse is the panic of a graph entered by a second goroutine.
const misuse = "autograd: Graph used from two goroutines at once (a Graph belongs to one goroutine; see the package documentation)"

// enter takes the graph's busy flag for a change to its bookkeeping (tape,
// owned tensors, NoGrad depth, Backward and Release) and panics if another
// goroutine holds it. The sections it guards never call back into the
// graph, so the same goroutine never finds the flag taken: a panic always
// means two goroutines. Because the flag is atomic, sections that do not
// overlap are ordered, so a misuse is either reported or harmless to the
// slices it guards. Uncontended, it costs one compare-and-swap and one
// store (see BenchmarkTinyOps).
func (g *Graph) enter() {
	if !g.busy.CompareAndSwap(false, true) {
		panic(misuse)
	}
}

// leave releases the flag enter took.
func (g *Graph) leave() { g.busy.Store(false) }

// Option configures a Graph.
type Option func(*Graph)

// WithoutGrad makes a graph that records nothing (evaluation, inference).
func WithoutGrad() Option { return func(g *Graph) { g.noGrad = 1 } }

// KeepCasts has a graph without gradients leave the autocast copies it
// makes of parameters on the parameters (tensor.CachedCast), as a training
// graph does, rather than make copies of its own that go with it: for a
// run of small graphs, such as sampling a token at a time, that would
// otherwise convert every weight for each. The caller frees the copies
// when the run is done (tensor.Tensor.ReleaseCasts).
func KeepCasts() Option { return func(g *Graph) { g.keepCast = true } }

// WithPolicy installs a cast policy at creation; see SetPolicy.
func WithPolicy(p CastPolicy) Option { return func(g *Graph) { g.policy = p } }

// NewGraph returns an empty graph whose operations run on dev.
func NewGraph(dev device.Device, opts ...Option) *Graph {
	g := &Graph{dev: dev, rng: freshDraws{}, saveCat: device.Activation}
	g.tape, g.owned, g.casts, g.saves = g.tape0[:0], g.owned0[:0], g.casts0[:0], g.saves0[:0]
	for _, o := range opts {
		o(g)
	}
	return g
}

// Device is where the graph's operations run.
func (g *Graph) Device() device.Device { return g.dev }

// SetPolicy installs p as the graph's cast policy (nil restores the default:
// every op computes in the widest dtype of its inputs).
func (g *Graph) SetPolicy(p CastPolicy) { g.policy = p }

// Policy is the installed cast policy, or nil.
func (g *Graph) Policy() CastPolicy { return g.policy }

// GradEnabled reports whether operations are being recorded.
func (g *Graph) GradEnabled() bool { return g.noGrad == 0 }

// NoGrad runs fn with recording off: results do not require grad and
// nothing is kept for a backward pass.
func (g *Graph) NoGrad(fn func()) {
	g.enter()
	g.noGrad++
	g.leave()
	defer func() {
		g.enter()
		g.noGrad--
		g.leave()
	}()
	fn()
}

// Recomputing reports whether the graph is re-running a checkpointed segment
// for its backward pass; operations with side effects (running statistics)
// must not apply them a second time.
func (g *Graph) Recomputing() bool { return g.replay }

// Len is the number of recorded operations.
func (g *Graph) Len() int { return len(g.tape) }

// own registers t as one of the graph's tensors, freed by Release.
func (g *Graph) own(t *tensor.Tensor) *tensor.Tensor {
	if !g.busy.CompareAndSwap(false, true) {
		t.Release() // not recorded anywhere: free it, so the panic leaks nothing
		panic(misuse)
	}
	g.owned = append(g.owned, t)
	g.leave()
	return t
}

// alloc makes a graph-owned tensor accounted as Temp until an op saves it.
func (g *Graph) alloc(dt dtype.DType, shape ...int) *tensor.Tensor {
	g.enter()
	defer g.leave() // a bad shape panics inside
	g.check()
	t := g.ts.New(g.dev, dt, device.Temp, shape...)
	g.owned = append(g.owned, t)
	return t
}

// move is t.Move(shape...) with the new tensor owned by the graph and
// made in its arena.
func (g *Graph) move(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	g.enter()
	defer g.leave()
	out := g.ts.Move(t, shape...)
	g.owned = append(g.owned, out)
	return out
}

// moveOut is t.Move(shape...) made in the graph's arena for a tensor the
// graph hands on: a parameter's gradient.
func (g *Graph) moveOut(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	g.enter()
	defer g.leave()
	return g.ts.Move(t, shape...)
}

// newOut is tensor.New made in the graph's arena for a tensor the graph
// hands on: a parameter's gradient.
func (g *Graph) newOut(dt dtype.DType, c device.Category, shape ...int) *tensor.Tensor {
	g.enter()
	defer g.leave()
	return g.ts.New(g.dev, dt, c, shape...)
}

// view is t.Reshape(shape...) made in the graph's arena.
func (g *Graph) view(t *tensor.Tensor, shape ...int) *tensor.Tensor {
	g.enter()
	defer g.leave() // a bad shape panics inside
	return g.ts.Reshape(t, shape...)
}

// ints returns a copy of dims that lives as long as the graph's tensors,
// for the shapes and strides a backward closure keeps.
func (g *Graph) ints(dims ...int) []int {
	g.enter()
	defer g.leave()
	return g.ts.Shape(dims...)
}

// zeros returns n zero strides that live as long as the graph's tensors.
func (g *Graph) zeros(n int) []int {
	var space [8]int
	if n > len(space) {
		return g.ints(make([]int, n)...)
	}
	return g.ints(space[:n]...)
}

// newVar returns v in a struct from the graph's arena.
func (g *Graph) newVar(v Var) *Var {
	g.enter()
	p := g.vars.get()
	g.leave()
	*p = v
	return p
}

func (g *Graph) check() {
	if g.released {
		panic("autograd: graph used after Release")
	}
}

// saveAt is a value saved for backward by an op recorded at tape index at
// or after (the op's node comes after its save).
type saveAt struct {
	t  *tensor.Tensor
	at int
}

// save marks t as kept for the backward pass, which is what the Activation
// category counts (a tensor saved twice counts once), and notes where on
// the tape it was saved, so that Free can release it once the backward
// pass is past every op that saved it.
func (g *Graph) save(ts ...*tensor.Tensor) {
	for _, t := range ts {
		if t == nil {
			continue
		}
		switch t.Category() {
		case device.Temp:
			t.SetCategory(g.saveCat)
		case g.saveCat:
		default:
			continue // a parameter's, or another graph's, value: never Free's
		}
		g.enter()
		g.saves = append(g.saves, saveAt{t, len(g.tape)})
		g.leave()
	}
}

// saveOwn is save for values an op makes for its own backward alone (a
// LayerNorm's x̂, attention's logsumexp): nothing else reads them, so they
// are released as soon as the backward pass is past the op.
func (g *Graph) saveOwn(ts ...*tensor.Tensor) {
	g.save(ts...)
	g.enter()
	for _, t := range ts {
		if t != nil {
			g.deferred = append(g.deferred, saveAt{t, len(g.tape)})
		}
	}
	g.leave()
}

// releaseDeferred releases the saved values whose last reader in the
// backward walk is at tape index i or after: the walk has done them.
func (g *Graph) releaseDeferred(i int) {
	g.enter()
	defer g.leave()
	for k := range g.deferred {
		if d := &g.deferred[k]; d.t != nil && d.at >= i {
			d.t.Release()
			d.t = nil
		}
	}
}

// Input copies a host array onto the graph's device as an F32 leaf that does
// not require grad.
func (g *Graph) Input(h tensor.Host) *Var { return g.InputAs(h, dtype.F32) }

// InputAs is Input converted to dt as it is copied to the device, in one
// pass. Under autocast, a batch whose only consumer is an op that computes
// in dt (a network's first Linear or convolution; see nn.FirstOp) may come
// in as dt: the op's own cast of an F32 input would round it to the same
// values, so the result is the same bits, without the F32 copy and the
// cast's pass over it.
func (g *Graph) InputAs(h tensor.Host, dt dtype.DType) *Var {
	return g.input(func() *tensor.Tensor { return g.ts.FromHost(g.dev, dt, device.Temp, h) })
}

// InputBits is InputAs for a batch already rounded on the host: its 16-bit
// patterns are copied to the device as they are, as a leaf of h's dtype
// that does not require grad. A data loader's workers round the batch
// (datasets.Bits) while the previous step runs.
func (g *Graph) InputBits(h tensor.Host16) *Var {
	return g.input(func() *tensor.Tensor { return g.ts.FromBits(g.dev, device.Temp, h) })
}

// InputView is Input without the copy on a backend whose memory is the
// host's (the CPU): the leaf reads h.Data where it is until the graph is
// released, so h must not change until then (tensor.Arena.View). A data loader's
// batch qualifies: the loader refills its memory only after the loop body
// that took it has ended. On other backends it is Input.
func (g *Graph) InputView(h tensor.Host) *Var {
	return g.input(func() *tensor.Tensor { return g.ts.View(g.dev, device.Temp, h) })
}

// InputBitsView is InputBits without the copy, as InputView is Input.
func (g *Graph) InputBitsView(h tensor.Host16) *Var {
	return g.input(func() *tensor.Tensor { return g.ts.ViewBits(g.dev, device.Temp, h) })
}

// input makes a graph-owned leaf that does not require grad of the tensor
// upload copies from the host.
func (g *Graph) input(upload func() *tensor.Tensor) *Var {
	g.enter()
	defer g.leave() // host data that does not fit its shape panics inside
	g.check()
	t := upload()
	g.owned = append(g.owned, t)
	v := g.vars.get()
	*v = Var{Value: t, graph: g}
	return v
}

// Leaf wraps t as a leaf of the graph (the graph does not take ownership).
// With requiresGrad its gradient is kept in Grad after Backward.
func (g *Graph) Leaf(t *tensor.Tensor, requiresGrad bool) *Var {
	g.check()
	if t.Device() != g.dev {
		panic(fmt.Sprintf("autograd.Leaf: tensor on %s, graph on %s", t.Device().Name(), g.dev.Name()))
	}
	return g.newVar(Var{Value: t, requiresGrad: requiresGrad, graph: g, borrowed: true})
}

// Const returns a graph-owned constant tensor of the given shape filled with v.
func (g *Graph) Const(dt dtype.DType, v float32, shape ...int) *Var {
	t := g.alloc(dt, shape...)
	g.dev.Fill(t.Buffer(), v)
	return g.newVar(Var{Value: t, graph: g})
}

// recording reports whether an op on these inputs must be recorded, and
// notes whether any of them needs a gradient (checkpointing asks).
func (g *Graph) recording(in ...*Var) bool {
	any := false
	for _, v := range in {
		if v != nil && v.requiresGrad {
			any = true
		}
	}
	if any {
		g.sawGrad = true
	}
	return any && g.noGrad == 0
}

// result wraps a graph-owned tensor as an op's output.
func (g *Graph) result(t *tensor.Tensor) *Var { return g.newVar(Var{Value: t, graph: g}) }

// push records a single-output op. in lists its inputs, for the reader: the
// tape does not keep them, since backward captures what it needs.
func (g *Graph) push(op Op, out *Var, in []*Var, backward func(dy *tensor.Tensor)) {
	g.ready.count(in)
	g.record(node{op: op, out: out, backward: backward}, out)
}

// pushMulti records an op with several outputs; backward gets one gradient
// per output, nil where none arrived.
func (g *Graph) pushMulti(op Op, outs []*Var, in []*Var, backward func(dys []*tensor.Tensor)) {
	g.ready.count(in)
	g.record(node{op: op, outs: outs, backMulti: backward}, outs...)
}

// record puts nd on the tape as the producer of outs.
func (g *Graph) record(nd node, outs ...*Var) {
	g.enter()
	if g.backDone {
		g.leave()
		panic("autograd: operation recorded after Backward; use a new Graph per step")
	}
	n := g.nodes.get()
	*n = nd
	for _, o := range outs {
		o.requiresGrad = true
		o.node = n
	}
	g.tape = append(g.tape, n)
	g.leave()
	if g.obs != nil {
		g.obs.OpEnd(nd.op, g.phase())
	}
}

// Mark records a point on the tape: the backward pass calls fn when it
// reaches it, after the backward functions of every operation recorded
// since and before those of the ones recorded before (and after the
// values freed by the first have gone; see Free). It computes nothing: a
// memory planner reads the device there, to see a step's backward pass
// one layer at a time. A graph that records nothing (NoGrad) records no
// mark either.
func (g *Graph) Mark(fn func()) {
	g.enter()
	defer g.leave()
	g.check()
	if g.noGrad > 0 {
		return
	}
	if g.backDone {
		panic("autograd: Mark after Backward; use a new Graph per step")
	}
	n := g.nodes.get()
	*n = node{mark: fn}
	g.tape = append(g.tape, n)
}

// Backward computes the gradient of loss, a one-element Var, with respect to
// every parameter and leaf that requires grad, accumulating into their Grad.
// A graph can be walked backwards once.
func (g *Graph) Backward(loss *Var) {
	loss.mustLive("Backward")
	if loss.Value.Numel() != 1 {
		panic(fmt.Sprintf("autograd.Backward: loss has shape %v; want one element (reduce it with Sum or Mean)", loss.Shape()))
	}
	seed := g.alloc(loss.DType(), loss.Shape()...)
	g.dev.Fill(seed.Buffer(), 1)
	g.BackwardFrom([]*Var{loss}, []*tensor.Tensor{seed})
}

// BackwardFrom starts the backward pass from several outputs with the given
// gradients (each the shape of its output; the graph takes them over).
func (g *Graph) BackwardFrom(outs []*Var, grads []*tensor.Tensor) {
	g.check()
	if len(outs) != len(grads) {
		panic(fmt.Sprintf("autograd.BackwardFrom: %d outputs, %d gradients", len(outs), len(grads)))
	}
	g.enter()
	switch {
	case g.backDone:
		g.leave()
		panic("autograd: Backward called twice on one graph")
	case g.noGrad > 0:
		g.leave()
		panic("autograd: Backward inside NoGrad")
	}
	g.backDone = true
	g.leave()
	for i, o := range outs {
		if !slices.Equal(o.Shape(), grads[i].Shape()) {
			panic(fmt.Sprintf("autograd.BackwardFrom: gradient %v for output %v", grads[i].Shape(), o.Shape()))
		}
		g.accum(o, grads[i])
	}
	for i := len(g.tape) - 1; i >= 0; i-- {
		// The tape is read under the flag; the closure runs outside it,
		// since it records into the graph itself (own, accum).
		g.enter()
		n := g.tape[i]
		g.tape[i] = nil
		g.leave()
		if n.mark != nil {
			n.mark()
			n.mark = nil
			continue
		}
		if n.backward != nil {
			if dy := g.takeGrad(n.out); dy != nil {
				if g.obs != nil {
					g.obs.OpStart(n.op, Backward)
				}
				n.backward(dy)
				dy.Release() // a no-op for one the closure passed on
				if g.obs != nil {
					g.obs.OpEnd(n.op, Backward)
				}
			}
		} else {
			dys := make([]*tensor.Tensor, len(n.outs))
			seen := false
			for j, o := range n.outs {
				dys[j] = g.takeGrad(o)
				seen = seen || dys[j] != nil
			}
			if seen {
				if g.obs != nil {
					g.obs.OpStart(n.op, Backward)
				}
				n.backMulti(dys)
				for _, dy := range dys {
					if dy != nil {
						dy.Release()
					}
				}
				if g.obs != nil {
					g.obs.OpEnd(n.op, Backward)
				}
			}
		}
		// What the closure captured can be collected, although the
		// outputs still point at the node.
		n.backward, n.backMulti = nil, nil
		if len(g.deferred) > 0 {
			g.releaseDeferred(i)
		}
	}
	if len(g.deferred) > 0 {
		g.releaseDeferred(0)
	}
	g.enter()
	g.tape = g.tape[:0]
	g.leave()
	g.ready.finish()
}

// takeGrad takes o's gradient for its producer's backward function: the
// tensor itself, or a copy when o keeps it (RetainGrad); nil if none came.
func (g *Graph) takeGrad(o *Var) *tensor.Tensor {
	switch {
	case o.Grad == nil:
		return nil
	case o.retain:
		return g.own(o.Grad.Clone(device.Temp))
	}
	dy := o.Grad
	o.Grad = nil
	return dy
}

// pass hands an incoming gradient on unchanged (in a new shape if given),
// taking over its buffer instead of copying it.
func (g *Graph) pass(dy *tensor.Tensor, shape ...int) *tensor.Tensor {
	if shape == nil {
		shape = dy.Shape()
	}
	return g.move(dy, shape...)
}

// accum adds gradient t (graph-owned; accum takes it over) into v's
// gradient, converting to v's dtype.
func (g *Graph) accum(v *Var, t *tensor.Tensor) {
	if v == nil || !v.requiresGrad {
		t.Release()
		return
	}
	if !slices.Equal(t.Shape(), v.Shape()) {
		panic(fmt.Sprintf("autograd: gradient of shape %v for %v", t.Shape(), v))
	}
	if v.param {
		if g.ready != nil {
			defer g.ready.arrived(v)
		}
		if v.unscaled.grad != nil && v.unscaled.grad == v.Grad {
			// The gradient so far was unscaled as stored; this one is not:
			// scale it back first (exactly, by a power of two) and add.
			g.dev.Axpby(v.Grad.Buffer(), v.Grad.Buffer(), t.Buffer(), 1/v.unscaled.inv, 1)
			v.unscaled = gradMark{}
			t.Release()
			return
		}
		v.unscaled = gradMark{}
		switch {
		case v.Grad == nil && t.DType() == v.DType() && !t.IsView():
			// The first gradient of the step: take the buffer over rather
			// than copy it (the graph's Release then skips it).
			v.Grad = g.moveOut(t, v.Shape()...)
			v.Grad.SetCategory(device.Grad)
			return
		case v.Grad == nil:
			v.Grad = g.newOut(v.DType(), device.Grad, v.Shape()...)
			g.dev.Copy(v.Grad.Buffer(), 0, t.Buffer(), 0, t.Numel())
		default:
			g.dev.Axpby(v.Grad.Buffer(), v.Grad.Buffer(), t.Buffer(), 1, 1)
		}
		t.Release()
		return
	}
	if t.DType() != v.DType() {
		c := g.alloc(v.DType(), v.Shape()...)
		g.dev.Copy(c.Buffer(), 0, t.Buffer(), 0, t.Numel())
		t.Release()
		t = c
	}
	if v.Grad == nil {
		v.Grad = t
		return
	}
	g.dev.Axpby(v.Grad.Buffer(), v.Grad.Buffer(), t.Buffer(), 1, 1)
	t.Release()
}

// Free releases the values of intermediate results that the caller will
// not read again, which Release would otherwise hold to the end of the
// step. PyTorch frees a tensor when its last reference goes; a tape that
// owns every result has to be told. A layer calls it for what it made and
// is done with: a projection once its residual sum exists, say.
//
// A value no recorded op saved for its backward pass goes at once. A value
// an op saved goes as soon as the backward pass has run every op that
// saved it (at once if Backward has already run), as PyTorch drops a
// node's saved tensors once the node has run. Only the value of a result
// this graph made is freed: not a parameter or its autocast copy, an input
// given by Leaf, or another graph's value; nor a view, or a value of which
// a view was ever made (a view shares the buffer and may outlive the call).
// Those are left for Release. Freeing a Var twice does nothing.
//
// A freed Var keeps its shape and dtype, and gradients flow through it as
// before: what backward needs of it was saved. Passing it to another op
// panics, naming the op, and so does reading its value once it is gone.
func (g *Graph) Free(vs ...*Var) {
	g.enter()
	defer g.leave()
	g.check()
	for _, v := range vs {
		if v == nil || v.graph != g || v.param || v.borrowed || v.freed || v.Value == nil {
			continue
		}
		t := v.Value
		if t.Released() || t.IsView() || t.Viewed() {
			continue
		}
		switch t.Category() {
		case device.Temp:
			// An op that keeps a value for backward moves it out of Temp
			// (save) into the recording graph's category, Activation or,
			// in a segment's recomputation, Recompute; the no-grad first
			// pass of a segment records nothing. So no op kept it.
			t.Release() // Release skips it later: releasing twice does nothing
		case g.saveCat:
			if g.backDone {
				t.Release()
				break
			}
			// Its last reader in the backward walk is the earliest op
			// that saved it.
			at := -1
			for _, s := range g.saves {
				if s.t == t && (at < 0 || s.at < at) {
					at = s.at
				}
			}
			if at < 0 {
				continue // saved where this graph did not see it
			}
			g.deferred = append(g.deferred, saveAt{t, at})
		default:
			continue
		}
		v.freed = true
	}
}

// Release frees every tensor the graph owns: intermediate results, their
// gradients and autocast's weight copies. Parameters and their gradients
// survive. Vars made by the graph must not be used afterwards.
func (g *Graph) Release() {
	g.enter()
	defer g.leave() // a tensor's Release may panic (a double free)
	for _, t := range g.owned {
		t.Release()
	}
	g.owned = nil
	g.tape = nil
	g.casts = nil
	g.saves, g.deferred = nil, nil
	g.released = true
}
