package optim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/safetensors"
	"github.com/mixprec/mixprec/tensor"
)

// Stateful is an optimiser whose state can be saved and restored, for a
// training checkpoint. Tensors are named as in PyTorch's optimizer
// state_dict ("state.3.exp_avg" for parameter 3's first moment); scalars
// (step counts, hyper-parameters) go in the metadata as strings.
type Stateful interface {
	Optimizer
	StateDict() ([]safetensors.Tensor, map[string]string)
	LoadStateDict(tensors []safetensors.Tensor, meta map[string]string) error
}

var (
	_ Stateful = (*SGD)(nil)
	_ Stateful = (*Adam)(nil)
)

func f32(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

// meta records the hyper-parameters; the learning rate is there because
// schedules change it. Per-group decays, when there are groups, are one
// value per parameter.
func (b *base) meta(kind string) map[string]string {
	m := b.cfg.meta(kind, len(b.params))
	if b.decays != nil {
		d := make([]string, len(b.decays))
		for i, v := range b.decays {
			d[i] = f32(v)
		}
		m["weight_decays"] = strings.Join(d, ",")
	}
	return m
}

// checkMeta is Config.checkMeta with the per-group decays compared too.
func (b *base) checkMeta(kind string, meta map[string]string) (float32, error) {
	if want := b.meta(kind)["weight_decays"]; meta["weight_decays"] != want {
		return 0, fmt.Errorf("optim: saved state has per-parameter weight decays %q, this optimiser %q", meta["weight_decays"], want)
	}
	return b.cfg.checkMeta(kind, len(b.params), meta)
}

func (c Config) meta(kind string, n int) map[string]string {
	return map[string]string{
		"optimizer": kind, "params": strconv.Itoa(n), "lr": f32(c.LR), "momentum": f32(c.Momentum),
		"dampening": f32(c.Dampening), "nesterov": strconv.FormatBool(c.Nesterov), "weight_decay": f32(c.WeightDecay),
		"beta1": f32(c.Beta1), "beta2": f32(c.Beta2), "eps": f32(c.Eps),
	}
}

// checkMeta refuses state saved by another kind of optimiser, for another
// parameter list or with other fixed hyper-parameters, naming the first
// difference; it returns the saved learning rate.
func (c Config) checkMeta(kind string, n int, meta map[string]string) (float32, error) {
	want := c.meta(kind, n)
	for _, k := range []string{"optimizer", "params", "momentum", "dampening", "nesterov", "weight_decay", "beta1", "beta2", "eps"} {
		if meta[k] != want[k] {
			return 0, fmt.Errorf("optim: saved state has %s %q, this optimiser %q", k, meta[k], want[k])
		}
	}
	lr, err := strconv.ParseFloat(meta["lr"], 32)
	if err != nil {
		return 0, fmt.Errorf("optim: saved state has learning rate %q: %v", meta["lr"], err)
	}
	return float32(lr), nil
}

func toNamed(name string, t *tensor.Tensor) safetensors.Tensor {
	h := t.Host()
	return safetensors.Tensor{Name: name, DType: dtype.F32, Shape: h.Shape, F32: h.Data}
}

// pick finds the tensor called name for parameter p, checking its shape.
func pick(byName map[string]*safetensors.Tensor, name string, p *autograd.Var) ([]float32, error) {
	t, ok := byName[name]
	if !ok {
		return nil, nil
	}
	if t.DType != dtype.F32 || !slices.Equal(t.Shape, p.Shape()) {
		return nil, fmt.Errorf("optim: saved %s is %v %v, parameter %s is f32 %v", name, t.DType, t.Shape, p.Name, p.Shape())
	}
	return t.F32, nil
}

func index(tensors []safetensors.Tensor) map[string]*safetensors.Tensor {
	m := make(map[string]*safetensors.Tensor, len(tensors))
	for i := range tensors {
		m[tensors[i].Name] = &tensors[i]
	}
	return m
}

// restore makes a state tensor for p holding vals.
func restore(p *autograd.Var, vals []float32) *tensor.Tensor {
	t := state(p)
	t.Buffer().Device().CopyFromHost(t.Buffer(), vals)
	return t
}

// StateDict returns the momentum buffers ("state.I.momentum_buffer" for
// parameters that have one) and the hyper-parameters.
func (o *SGD) StateDict() ([]safetensors.Tensor, map[string]string) {
	var ts []safetensors.Tensor
	for i, m := range o.mom {
		if m != nil {
			ts = append(ts, toNamed(fmt.Sprintf("state.%d.momentum_buffer", i), m))
		}
	}
	return ts, o.meta("sgd")
}

// LoadStateDict restores what StateDict saved. Nothing changes unless all
// of it fits this optimiser.
func (o *SGD) LoadStateDict(tensors []safetensors.Tensor, meta map[string]string) error {
	lr, err := o.checkMeta("sgd", meta)
	if err != nil {
		return err
	}
	byName := index(tensors)
	vals := make([][]float32, len(o.params))
	for i, p := range o.params {
		if vals[i], err = pick(byName, fmt.Sprintf("state.%d.momentum_buffer", i), p); err != nil {
			return err
		}
	}
	if n := countNonNil(vals); n != len(tensors) {
		return fmt.Errorf("optim: saved state has %d tensors, %d of them this optimiser's", len(tensors), n)
	}
	for i, p := range o.params {
		if o.mom[i] != nil {
			o.mom[i].Release()
			o.mom[i] = nil
		}
		if vals[i] != nil {
			o.mom[i] = restore(p, vals[i])
		}
	}
	o.cfg.LR = lr
	return nil
}

func countNonNil(vals [][]float32) int {
	n := 0
	for _, v := range vals {
		if v != nil {
			n++
		}
	}
	return n
}

// StateDict returns the moments ("state.I.exp_avg", "state.I.exp_avg_sq"),
// each parameter's step count ("state.I.step" in the metadata) and the
// hyper-parameters.
func (o *Adam) StateDict() ([]safetensors.Tensor, map[string]string) {
	kind := "adam"
	if o.decoupled {
		kind = "adamw"
	}
	meta := o.meta(kind)
	var ts []safetensors.Tensor
	for i := range o.params {
		if o.m[i] != nil {
			ts = append(ts, toNamed(fmt.Sprintf("state.%d.exp_avg", i), o.m[i]), toNamed(fmt.Sprintf("state.%d.exp_avg_sq", i), o.v[i]))
		}
		meta[fmt.Sprintf("state.%d.step", i)] = strconv.Itoa(o.steps[i])
	}
	return ts, meta
}

// LoadStateDict restores what StateDict saved. Nothing changes unless all
// of it fits this optimiser.
func (o *Adam) LoadStateDict(tensors []safetensors.Tensor, meta map[string]string) error {
	kind := "adam"
	if o.decoupled {
		kind = "adamw"
	}
	lr, err := o.checkMeta(kind, meta)
	if err != nil {
		return err
	}
	byName := index(tensors)
	ms, vs := make([][]float32, len(o.params)), make([][]float32, len(o.params))
	steps := make([]int, len(o.params))
	for i, p := range o.params {
		if ms[i], err = pick(byName, fmt.Sprintf("state.%d.exp_avg", i), p); err != nil {
			return err
		}
		if vs[i], err = pick(byName, fmt.Sprintf("state.%d.exp_avg_sq", i), p); err != nil {
			return err
		}
		if (ms[i] == nil) != (vs[i] == nil) {
			return fmt.Errorf("optim: saved state has one of parameter %d's two moments", i)
		}
		key := fmt.Sprintf("state.%d.step", i)
		if steps[i], err = strconv.Atoi(meta[key]); err != nil || steps[i] < 0 || (steps[i] > 0) != (ms[i] != nil) {
			return fmt.Errorf("optim: saved state has %s %q, which does not fit its moments", key, meta[key])
		}
	}
	if n := 2 * countNonNil(ms); n != len(tensors) {
		return fmt.Errorf("optim: saved state has %d tensors, %d of them this optimiser's", len(tensors), n)
	}
	for i, p := range o.params {
		for _, t := range []*tensor.Tensor{o.m[i], o.v[i]} {
			if t != nil {
				t.Release()
			}
		}
		o.m[i], o.v[i] = nil, nil
		if ms[i] != nil {
			o.m[i], o.v[i] = restore(p, ms[i]), restore(p, vs[i])
		}
	}
	copy(o.steps, steps)
	o.cfg.LR = lr
	return nil
}
