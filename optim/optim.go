// Package optim updates parameters from their gradients: SGD, Adam and
// AdamW with PyTorch's algorithms, learning-rate schedules and gradient
// clipping. Optimiser state is F32 and accounted as Optim.
//
// An update is an in-place write to the parameter, which the optimisers
// record (tensor.Modified) so that autocast's cached low-precision copy of
// it is refreshed. Where the backend offers the fused kernels of
// device.StepCaster, the step writes that copy itself in the same pass, and
// the next forward pass finds it current instead of converting it again.
package optim

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Optimizer updates a fixed list of parameters.
type Optimizer interface {
	// Step applies one update from the current gradients. Parameters whose
	// gradient is nil are skipped, as in PyTorch.
	Step()
	// ZeroGrad drops every gradient (PyTorch's zero_grad with its default
	// set_to_none=True): the next backward pass writes fresh ones.
	ZeroGrad()
	// Params are the parameters being optimised.
	Params() []*autograd.Var
	// LR and SetLR read and change the learning rate (schedules use them).
	LR() float32
	SetLR(lr float32)
	// Release frees the optimiser's state (momentum, moments) on its
	// device; the optimiser is not used afterwards.
	Release()
}

// Config holds every optimiser's hyper-parameters; each constructor starts
// from PyTorch's defaults and applies the options given.
type Config struct {
	LR           float32
	Momentum     float32
	Dampening    float32
	Nesterov     bool
	WeightDecay  float32
	Beta1, Beta2 float32
	Eps          float32
}

// Option changes a Config.
type Option func(*Config)

// LR sets the learning rate.
func LR(lr float32) Option { return func(c *Config) { c.LR = lr } }

// Momentum sets SGD's momentum factor.
func Momentum(m float32) Option { return func(c *Config) { c.Momentum = m } }

// Dampening sets SGD's dampening for momentum.
func Dampening(d float32) Option { return func(c *Config) { c.Dampening = d } }

// Nesterov turns on Nesterov momentum (SGD).
func Nesterov() Option { return func(c *Config) { c.Nesterov = true } }

// WeightDecay sets L2 weight decay (SGD, Adam) or decoupled decay (AdamW).
func WeightDecay(wd float32) Option { return func(c *Config) { c.WeightDecay = wd } }

// Betas sets Adam's moment decay rates.
func Betas(b1, b2 float32) Option { return func(c *Config) { c.Beta1, c.Beta2 = b1, b2 } }

// Eps sets Adam's denominator epsilon.
func Eps(e float32) Option { return func(c *Config) { c.Eps = e } }

func configure(c Config, opts []Option) Config {
	for _, o := range opts {
		o(&c)
	}
	return c
}

// base holds what every optimiser shares.
type base struct {
	params []*autograd.Var
	cfg    Config
	// decays, when not nil, is each parameter's weight decay (its group's),
	// in place of cfg.WeightDecay.
	decays []float32
}

// decay is parameter i's weight decay.
func (b *base) decay(i int) float32 {
	if b.decays != nil {
		return b.decays[i]
	}
	return b.cfg.WeightDecay
}

// Group is a set of parameters that share a weight decay, as one of a
// PyTorch optimizer's param_groups.
type Group struct {
	Params      []*autograd.Var
	WeightDecay float32
}

// DecayGroups splits params by nanoGPT's rule: weight decay wd on every
// parameter of two or more dimensions (the matrices of Linears and
// embeddings), none on the rest (biases, LayerNorm weights), in that
// order, each group keeping params' order.
func DecayGroups(params []*autograd.Var, wd float32) []Group {
	var decay, none []*autograd.Var
	for _, p := range params {
		if len(p.Shape()) >= 2 {
			decay = append(decay, p)
		} else {
			none = append(none, p)
		}
	}
	return []Group{{Params: decay, WeightDecay: wd}, {Params: none, WeightDecay: 0}}
}

// flatten lists the groups' parameters in order with each one's decay.
func flatten(groups []Group) ([]*autograd.Var, []float32) {
	var params []*autograd.Var
	var decays []float32
	for _, g := range groups {
		for _, p := range g.Params {
			params = append(params, p)
			decays = append(decays, g.WeightDecay)
		}
	}
	return params, decays
}

func newBase(params []*autograd.Var, cfg Config) base {
	for _, p := range params {
		if !p.IsParam() {
			panic(fmt.Sprintf("optim: %v is not a parameter", p))
		}
	}
	if cfg.LR < 0 {
		panic(fmt.Sprintf("optim: negative learning rate %v", cfg.LR))
	}
	return base{params: params, cfg: cfg}
}

func (b *base) Params() []*autograd.Var { return b.params }
func (b *base) LR() float32             { return b.cfg.LR }
func (b *base) SetLR(lr float32)        { b.cfg.LR = lr }

// ZeroGrad frees every gradient, like PyTorch's default set_to_none: the
// next backward pass takes its first gradient over instead of adding it to
// zeros, which saves a fill and an addition per parameter per step.
func (b *base) ZeroGrad() {
	for _, p := range b.params {
		p.FreeGrad()
	}
}

// state allocates an F32 zero tensor like p, accounted as Optim.
func state(p *autograd.Var) *tensor.Tensor {
	return tensor.Zeros(p.Value.Device(), dtype.F32, device.Optim, p.Shape()...)
}

// SGD is stochastic gradient descent with optional momentum, dampening,
// Nesterov momentum and weight decay: torch.optim.SGD.
type SGD struct {
	base
	mom []*tensor.Tensor
}

// NewSGD makes an SGD optimiser (defaults: lr 1e-3, no momentum).
func NewSGD(params []*autograd.Var, opts ...Option) *SGD {
	cfg := configure(Config{LR: 1e-3}, opts)
	if cfg.Nesterov && (cfg.Momentum <= 0 || cfg.Dampening != 0) {
		panic("optim.NewSGD: Nesterov momentum needs momentum > 0 and zero dampening")
	}
	return &SGD{base: newBase(params, cfg), mom: make([]*tensor.Tensor, len(params))}
}

// Step applies one SGD update.
func (o *SGD) Step() {
	c := o.cfg
	for i, p := range o.params {
		if p.Grad == nil {
			continue
		}
		h := device.SGDParams{LR: c.LR, Momentum: c.Momentum, Dampening: c.Dampening, WeightDecay: o.decay(i), Nesterov: c.Nesterov}
		var mb device.Buffer
		if c.Momentum != 0 {
			if o.mom[i] == nil {
				o.mom[i] = state(p)
				h.First = true
			}
			mb = o.mom[i].Buffer()
		}
		dev := p.Value.Device()
		if low, sc := fusedCast(p); low != nil {
			sc.SGDCast(p.Value.Buffer(), p.Grad.Buffer(), mb, low.Buffer(), h)
			p.Value.Modified(low)
			continue
		}
		dev.SGD(p.Value.Buffer(), p.Grad.Buffer(), mb, h)
		p.Value.Modified()
	}
}

// fusedCast returns the cached low-precision copy of p that the update can
// write in the same pass, and the backend's kernels for it; nil when p has
// no copy or the backend no fused kernels. An F16 copy is preferred to a
// BF16 one, should a parameter have both; the other is then converted
// again on its next use.
func fusedCast(p *autograd.Var) (*tensor.Tensor, device.StepCaster) {
	sc, ok := p.Value.Device().(device.StepCaster)
	if !ok {
		return nil, nil
	}
	for _, dt := range [...]dtype.DType{dtype.F16, dtype.BF16} {
		if low := p.Value.CachedCopy(dt); low != nil {
			return low, sc
		}
	}
	return nil, nil
}

// State returns the momentum buffers (nil before the first step), for
// saving and for tests.
func (o *SGD) State() []*tensor.Tensor { return o.mom }

// Release frees the momentum buffers.
func (o *SGD) Release() { releaseAll(o.mom) }

// StateBytes is the memory SGD's state takes once every parameter has
// stepped: one F32 momentum buffer per parameter, none without momentum.
// A memory planner predicts the first step's allocations with it.
func (o *SGD) StateBytes() int64 {
	if o.cfg.Momentum == 0 {
		return 0
	}
	return paramBytes(o.params)
}

// Adam is torch.optim.Adam, or torch.optim.AdamW when made by NewAdamW.
type Adam struct {
	base
	decoupled bool
	m, v      []*tensor.Tensor
	steps     []int
	multi     []device.AdamStep // a MultiTensor step's list, kept between steps
}

// NewAdam makes Adam (defaults: lr 1e-3, betas 0.9 and 0.999, eps 1e-8, no
// weight decay).
func NewAdam(params []*autograd.Var, opts ...Option) *Adam {
	cfg := configure(Config{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, opts)
	return newAdam(params, cfg, false)
}

// NewAdamW makes AdamW, Adam with decoupled weight decay (defaults as Adam,
// weight decay 0.01).
func NewAdamW(params []*autograd.Var, opts ...Option) *Adam {
	cfg := configure(Config{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2}, opts)
	return newAdam(params, cfg, true)
}

// NewAdamWGroups makes AdamW over the groups' parameters, in order, each
// with its group's weight decay (PyTorch's AdamW given param_groups);
// opts set the other hyper-parameters, as for NewAdamW. A WeightDecay
// option has no effect.
func NewAdamWGroups(groups []Group, opts ...Option) *Adam {
	params, decays := flatten(groups)
	o := NewAdamW(params, opts...)
	o.decays = decays
	return o
}

// NewSGDGroups is NewSGD over param groups, each with its own weight decay.
func NewSGDGroups(groups []Group, opts ...Option) *SGD {
	params, decays := flatten(groups)
	o := NewSGD(params, opts...)
	o.decays = decays
	return o
}

func newAdam(params []*autograd.Var, cfg Config, decoupled bool) *Adam {
	n := len(params)
	return &Adam{base: newBase(params, cfg), decoupled: decoupled,
		m: make([]*tensor.Tensor, n), v: make([]*tensor.Tensor, n), steps: make([]int, n)}
}

// Step applies one Adam update. On a backend with device.MultiTensor the
// parameters are updated in one call (the same bits as one call each).
func (o *Adam) Step() {
	c := o.cfg
	var mt device.MultiTensor
	if len(o.params) > 0 && o.params[0].Value != nil {
		mt, _ = o.params[0].Value.Device().(device.MultiTensor)
	}
	o.multi = o.multi[:0]
	for i, p := range o.params {
		if p.Grad == nil {
			continue
		}
		if o.m[i] == nil {
			o.m[i], o.v[i] = state(p), state(p)
		}
		o.steps[i]++
		h := device.AdamParams{LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: o.decay(i),
			Decoupled: o.decoupled, Step: o.steps[i]}
		pb, gb, mb, vb := p.Value.Buffer(), p.Grad.Buffer(), o.m[i].Buffer(), o.v[i].Buffer()
		low, sc := fusedCast(p)
		switch {
		case mt != nil && p.Value.Device() == o.params[0].Value.Device():
			s := device.AdamStep{P: pb, G: gb, M: mb, V: vb, H: h}
			if low != nil {
				s.Low = low.Buffer()
			}
			o.multi = append(o.multi, s)
			continue
		case low != nil:
			sc.AdamCast(pb, gb, mb, vb, low.Buffer(), h)
			p.Value.Modified(low)
		default:
			p.Value.Device().Adam(pb, gb, mb, vb, h)
			p.Value.Modified()
		}
	}
	if len(o.multi) == 0 {
		return
	}
	mt.AdamMulti(o.multi)
	for _, p := range o.params {
		if p.Grad == nil {
			continue
		}
		if low, _ := fusedCast(p); low != nil {
			p.Value.Modified(low)
		} else {
			p.Value.Modified()
		}
	}
	clear(o.multi) // keep no buffers alive
}

// State returns the first and second moments (nil before the first step).
func (o *Adam) State() (m, v []*tensor.Tensor) { return o.m, o.v }

// Release frees the first and second moments.
func (o *Adam) Release() { releaseAll(o.m, o.v) }

// StateBytes is the memory Adam's state takes once every parameter has
// stepped: two F32 moments per parameter.
func (o *Adam) StateBytes() int64 { return 2 * paramBytes(o.params) }

// paramBytes is the size of an F32 tensor like each of params, summed.
func paramBytes(params []*autograd.Var) int64 {
	var n int64
	for _, p := range params {
		n += device.Bytes(dtype.F32, tensor.Numel(p.Shape()))
	}
	return n
}

// Release frees o's state: o.Release(), for a defer beside the optimiser's
// construction.
func Release(o Optimizer) { o.Release() }

// releaseAll releases the tensors of ts that were made.
func releaseAll(ts ...[]*tensor.Tensor) {
	for _, l := range ts {
		for _, t := range l {
			if t != nil {
				t.Release()
			}
		}
	}
}

// GradNorm returns the 2-norm of all gradients together (nil ones skipped),
// summed in float64: in one call on a backend with device.MultiTensor.
func GradNorm(params []*autograd.Var) float64 {
	var sum float64
	var mt device.MultiTensor
	var multi []device.Buffer
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		if m, ok := p.Grad.Device().(device.MultiTensor); ok && (mt == nil || m == mt) {
			mt, multi = m, append(multi, p.Grad.Buffer())
			continue
		}
		sum += sumSquares(p.Grad)
	}
	if mt != nil {
		sum += mt.SumSquares(multi)
	}
	return math.Sqrt(sum)
}

// sumSquares is the sum of g's squared elements, through a device's
// elementwise kernels.
func sumSquares(g *tensor.Tensor) float64 {
	d := g.Device()
	sq := tensor.New(d, dtype.F32, device.Temp, g.Shape()...)
	d.Unary(device.Square, sq.Buffer(), g.Buffer(), 0)
	s := tensor.New(d, dtype.F32, device.Temp)
	d.Reduce(s.Buffer(), sq.Buffer(), device.Strides{Shape: []int{sq.Numel()}, A: []int{0}}, 1)
	v := float64(s.Item())
	sq.Release()
	s.Release()
	return v
}

// ClipGradNorm scales all gradients together so that their 2-norm is at most
// maxNorm, and returns the norm before clipping (torch.nn.utils.clip_grad_norm_).
// With mixed precision, call it between GradScaler.Unscale and Step.
func ClipGradNorm(params []*autograd.Var, maxNorm float64) float64 {
	norm := GradNorm(params)
	coef := maxNorm / (norm + 1e-6)
	if coef < 1 {
		// UnscaleCheck multiplies every buffer by one factor, all of them
		// in one call: a scale, whose Inf/NaN report is not needed here.
		byDev := map[device.Device][]device.Buffer{}
		for _, p := range params {
			if p.Grad != nil {
				byDev[p.Grad.Device()] = append(byDev[p.Grad.Device()], p.Grad.Buffer())
			}
		}
		for d, bufs := range byDev {
			d.UnscaleCheck(bufs, float32(coef))
		}
	}
	return norm
}
