package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/safetensors"
)

// Weights returns m's parameters and buffers as safetensors tensors named as
// in a PyTorch state_dict ("0.weight", "layers.3.bias"), in F32: the master
// weights, whatever dtype a step computed in.
func Weights(m Module) []safetensors.Tensor {
	st := State(m)
	out := make([]safetensors.Tensor, len(st))
	for i, e := range st {
		h := hostValue(e)
		out[i] = safetensors.Tensor{Name: e.Name, DType: dtype.F32, Shape: slices.Clone(h.Shape), F32: h.Data}
	}
	return out
}

// SetWeights loads tensors into m as PyTorch's load_state_dict(strict=True)
// does: every entry of m must be there with its shape, and nothing else. F16
// and BF16 tensors are widened to F32. The error names the first tensor
// that does not fit and both shapes; m is changed only when all fit.
func SetWeights(m Module, tensors []safetensors.Tensor) error {
	st := State(m)
	byName := make(map[string]*safetensors.Tensor, len(tensors))
	for i := range tensors {
		byName[tensors[i].Name] = &tensors[i]
	}
	var missing, unexpected []string
	vals := make([][]float32, len(st))
	known := make(map[string]bool, len(st))
	for i, e := range st {
		known[e.Name] = true
		t, ok := byName[e.Name]
		if !ok {
			missing = append(missing, e.Name)
			continue
		}
		if !slices.Equal(t.Shape, e.Var.Shape()) {
			return fmt.Errorf("nn: tensor %q has shape %v in the file, %v in the model", e.Name, t.Shape, e.Var.Shape())
		}
		vals[i] = t.Floats()
	}
	for _, t := range tensors {
		if !known[t.Name] {
			unexpected = append(unexpected, t.Name)
		}
	}
	if len(missing) > 0 || len(unexpected) > 0 {
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, "missing from the file: "+strings.Join(missing, ", "))
		}
		if len(unexpected) > 0 {
			parts = append(parts, "not in the model: "+strings.Join(unexpected, ", "))
		}
		return fmt.Errorf("nn: the weights do not match the model (%s)", strings.Join(parts, "; "))
	}
	for i, e := range st {
		e.Var.SetValues(vals[i])
	}
	return nil
}

// SaveWeights writes m's weights to path as safetensors (see [Weights]),
// with metadata, replacing the file only once the new one is complete.
func SaveWeights(path string, m Module, metadata map[string]string) error {
	if err := safetensors.WriteFile(path, Weights(m), metadata); err != nil {
		return fmt.Errorf("nn: saving weights: %w", err)
	}
	return nil
}

// LoadWeights reads the safetensors file at path into m (see [SetWeights])
// and returns the file's metadata.
func LoadWeights(path string, m Module) (map[string]string, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nn: loading weights: %w", err)
	}
	if err := SetWeights(m, f.Tensors); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Metadata, nil
}

// NamedRNG is a module's random stream with its path in the module tree,
// e.g. "5.rng" for the dropout at index 5, for saving a run's state.
type NamedRNG struct {
	Name string
	RNG  *autograd.RNG
}

// RNGs lists the random streams of m's modules (each Dropout's) by path.
// Their seeds and counters are all of m's randomness after initialisation,
// so restoring them restores every mask a resumed run will draw.
func RNGs(m Module) []NamedRNG {
	var out []NamedRNG
	var walk func(prefix string, m Module)
	walk = func(prefix string, m Module) {
		if d, ok := m.(*Dropout); ok {
			out = append(out, NamedRNG{prefix + "rng", d.RNG})
		}
		if c, ok := m.(Container); ok {
			for i, ch := range c.Children() {
				walk(childPrefix(prefix, c, i), ch)
			}
		}
	}
	walk("", m)
	return out
}
