// Package nn holds neural-network modules (layers with parameters), the loss
// functions that go with them, PyTorch's default initialisers, and saving
// and loading a model's state.
//
// A module's Forward records its computation on the graph it is given;
// parameters live in the module (FP32 master weights) and are placed on a
// device with To.
package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Module is a differentiable function with parameters.
type Module interface {
	// Forward records the module's computation of x on g.
	Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var
	// Params lists the trainable parameters, in a fixed order.
	Params() []*autograd.Var
}

// Container is a module made of other modules; To, SetTraining and State
// walk into its children.
type Container interface {
	Module
	Children() []Module
}

// Trainable is a module that behaves differently in training and
// evaluation (dropout, batch normalisation).
type Trainable interface {
	SetTraining(training bool)
}

// Buffered is a module with state that is saved but not trained (batch
// normalisation's running statistics).
type Buffered interface {
	Buffers() []*autograd.Var
}

// InputOp is a module whose input goes to a single op, the first it
// records: Linear (autograd.OpLinear) and Conv2d (autograd.OpConv).
type InputOp interface {
	InputOp() autograd.Op
}

// FirstOp returns the op that alone consumes m's input, when m says: an
// InputOp, or a Sequential whose first layer is one. A program uses it to
// feed its batch in the dtype that op computes in under autocast
// (autograd.Graph.InputAs).
func FirstOp(m Module) (autograd.Op, bool) {
	for {
		switch x := m.(type) {
		case InputOp:
			return x.InputOp(), true
		case *Sequential:
			if len(x.Layers) == 0 {
				return 0, false
			}
			m = x.Layers[0]
		default:
			return 0, false
		}
	}
}

// To places every parameter and buffer of m (and its children) on dev.
func To(m Module, dev device.Device) {
	for _, p := range State(m) {
		p.Var.To(dev)
	}
}

// SetTraining switches m and all its children between training (true) and
// evaluation (false) behaviour.
func SetTraining(m Module, training bool) {
	if t, ok := m.(Trainable); ok {
		t.SetTraining(training)
	}
	if c, ok := m.(Container); ok {
		for _, ch := range c.Children() {
			SetTraining(ch, training)
		}
	}
}

// Named is a parameter or buffer with its path in the module tree, e.g.
// "0.weight", as in a PyTorch state_dict.
type Named struct {
	Name string
	Var  *autograd.Var
}

// State lists every parameter and buffer of m with its path.
func State(m Module) []Named {
	var out []Named
	var walk func(prefix string, m Module)
	walk = func(prefix string, m Module) {
		if c, ok := m.(Container); ok {
			for i, ch := range c.Children() {
				walk(childPrefix(prefix, c, i), ch)
			}
			return
		}
		for _, p := range m.Params() {
			out = append(out, Named{prefix + p.Name, p})
		}
		if b, ok := m.(Buffered); ok {
			for _, p := range b.Buffers() {
				out = append(out, Named{prefix + p.Name, p})
			}
		}
	}
	walk("", m)
	return out
}

// CountParams is the number of trainable scalars in m.
func CountParams(m Module) int {
	n := 0
	for _, p := range m.Params() {
		n += tensor.Numel(p.Shape())
	}
	return n
}

// Linear is a fully connected layer, y = x Wᵀ + b, with W (out, in) as in
// PyTorch.
type Linear struct {
	W, B    *autograd.Var
	In, Out int
}

// NewLinear makes a Linear layer with PyTorch's default initialisation:
// Kaiming-uniform weights with a = √5, which bounds them by 1/√in, and a bias
// uniform in ±1/√in. It takes the option Bias (default on).
func NewLinear(in, out int, rng *rand.Rand, opts ...Option) *Linear {
	bias := configure("nn.NewLinear", layerConfig{bias: true}, []string{"Bias"}, opts).bias
	if in <= 0 || out <= 0 {
		panic(fmt.Sprintf("nn.NewLinear: sizes %d -> %d", in, out))
	}
	l := &Linear{In: in, Out: out}
	l.W = autograd.NewParam("weight", KaimingUniform(rng, in, out, in))
	if bias {
		bound := float32(1 / math.Sqrt(float64(in)))
		l.B = autograd.NewParam("bias", tensor.UniformHost(rng, -bound, bound, out))
	}
	return l
}

// NewLinearNoBias is NewLinear without the bias term: NewLinear(in, out,
// rng, Bias(false)).
func NewLinearNoBias(in, out int, rng *rand.Rand) *Linear {
	return NewLinear(in, out, rng, Bias(false))
}

// KaimingUniform is PyTorch's kaiming_uniform_ with a = √5 (its default for
// Linear and Conv2d weights): uniform in ±1/√fanIn.
func KaimingUniform(rng *rand.Rand, fanIn int, shape ...int) tensor.Host {
	gain := math.Sqrt(2 / (1 + 5.0))
	bound := float32(gain * math.Sqrt(3/float64(fanIn)))
	return tensor.UniformHost(rng, -bound, bound, shape...)
}

// HeUniform is kaiming_uniform_ with PyTorch's nonlinearity='relu': uniform
// in ±√(6/fanIn), which keeps activations' variance through ReLU layers.
func HeUniform(rng *rand.Rand, fanIn int, shape ...int) tensor.Host {
	bound := float32(math.Sqrt(6 / float64(fanIn)))
	return tensor.UniformHost(rng, -bound, bound, shape...)
}

// Forward computes x Wᵀ + b for x (..., In).
func (l *Linear) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return g.Linear(x, l.W, l.B)
}

// InputOp is autograd.OpLinear: a Linear's input goes to its product alone.
func (l *Linear) InputOp() autograd.Op { return autograd.OpLinear }

// Params are W and, if present, B.
func (l *Linear) Params() []*autograd.Var {
	if l.B == nil {
		return []*autograd.Var{l.W}
	}
	return []*autograd.Var{l.W, l.B}
}

func (l *Linear) String() string {
	return fmt.Sprintf("Linear(%d, %d, bias=%v)", l.In, l.Out, l.B != nil)
}

// Func wraps a parameter-free function of one Var as a Module.
type Func struct {
	// Name is how the module prints: "ReLU" prints as ReLU(), and a name
	// with its arguments, "MaxPool2d(2, stride=2, padding=0)", as it is.
	Name string
	F    func(g *autograd.Graph, x *autograd.Var) *autograd.Var
}

// Forward applies F.
func (f Func) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var { return f.F(g, x) }

// Params is empty.
func (f Func) Params() []*autograd.Var { return nil }

// String is the module as it prints in a model: its Name, with "()"
// unless the name has its arguments.
func (f Func) String() string {
	if strings.HasSuffix(f.Name, ")") {
		return f.Name
	}
	return f.Name + "()"
}

// ReLU is the rectifier as a module.
func ReLU() Module { return Func{"ReLU", (*autograd.Graph).ReLU} }

// GELU is the exact GELU as a module.
func GELU() Module { return Func{"GELU", (*autograd.Graph).GELU} }

// SiLU is x·σ(x) as a module (PyTorch's nn.SiLU).
func SiLU() Module { return Func{"SiLU", (*autograd.Graph).SiLU} }

// Tanh is tanh as a module.
func Tanh() Module { return Func{"Tanh", (*autograd.Graph).Tanh} }

// Flatten reshapes (N, ...) to (N, rest).
func Flatten() Module { return Func{"Flatten", (*autograd.Graph).Flatten} }

// Sequential applies its layers in order. It is a Chain whose units are
// its layers, nested Sequentials' layers in their place.
type Sequential struct {
	Layers    []Module
	recompute *Recompute // SetRecompute's choice; nil runs Layers as they are
}

// NewSequential chains layers.
func NewSequential(layers ...Module) *Sequential { return &Sequential{Layers: layers} }

// Forward applies each layer in turn (nested Sequentials' layers in their
// place), recomputing what SetRecompute chose. Each layer's output is freed
// once the next has taken it (RunChain), so that what no backward pass
// needs goes at once: a Linear's output once the ReLU after it, which keeps
// its own output, has run.
func (s *Sequential) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	return RunChain(g, Modules(s.Units()), s.recompute, x, false)
}

// Params concatenates the layers' parameters.
func (s *Sequential) Params() []*autograd.Var {
	var out []*autograd.Var
	for _, l := range s.Layers {
		out = append(out, l.Params()...)
	}
	return out
}

// Children are the layers.
func (s *Sequential) Children() []Module { return s.Layers }

// To places the model on dev.
func (s *Sequential) To(dev device.Device) { To(s, dev) }

func (s *Sequential) String() string {
	var b strings.Builder
	b.WriteString("Sequential(\n")
	for i, l := range s.Layers {
		fmt.Fprintf(&b, "  (%d) %v\n", i, l)
	}
	b.WriteString(")")
	return b.String()
}

// CrossEntropy is the mean cross-entropy of logits (N, C) against integer
// class labels, PyTorch's nn.CrossEntropyLoss with its defaults.
func CrossEntropy(g *autograd.Graph, logits *autograd.Var, labels []int32) *autograd.Var {
	return g.CrossEntropy(logits, labels)
}

// MSE is the mean squared error, PyTorch's nn.MSELoss.
func MSE(g *autograd.Graph, pred, target *autograd.Var) *autograd.Var {
	return g.MSE(pred, target)
}

// Dropout zeroes activations with probability P while training; its random
// stream is its own, seeded at construction, so runs are reproducible and a
// checkpointed recomputation draws the same mask.
type Dropout struct {
	P        float32
	RNG      *autograd.RNG
	training bool
}

// NewDropout makes a Dropout layer in training mode, seeding its stream from rng.
func NewDropout(p float32, rng *rand.Rand) *Dropout {
	return &Dropout{P: p, RNG: autograd.NewRNG(rng.Uint64()), training: true}
}

// Forward applies dropout in training mode and is the identity in evaluation.
func (d *Dropout) Forward(g *autograd.Graph, x *autograd.Var) *autograd.Var {
	if !d.training {
		return x
	}
	return g.Dropout(x, d.P, d.RNG)
}

// Params is empty.
func (d *Dropout) Params() []*autograd.Var { return nil }

// SetTraining switches dropout on or off.
func (d *Dropout) SetTraining(t bool) { d.training = t }

func (d *Dropout) String() string { return fmt.Sprintf("Dropout(p=%v)", d.P) }

// DropNewCasts notes which of m's parameters keep autocast copies now
// (tensor.CachedCast) and returns the function that frees the copies the
// others made since: a memory planner's dry step, or a run of sampling
// graphs made with autograd.KeepCasts, leaves the parameters as it found
// them.
func DropNewCasts(m Module) func() {
	params := m.Params()
	had := make([]bool, len(params))
	for i, v := range params {
		had[i] = v.Value.CachedCopy(dtype.F16) != nil || v.Value.CachedCopy(dtype.BF16) != nil
	}
	return func() {
		for i, v := range params {
			if !had[i] {
				v.Value.ReleaseCasts()
			}
		}
	}
}

// Release frees the device memory of every parameter, gradient and buffer
// of m. The module must not be used afterwards.
func Release(m Module) {
	for _, p := range State(m) {
		p.Var.FreeGrad()
		if p.Var.Value != nil {
			p.Var.Value.Release()
		}
	}
}
