// Package reftest loads the reference values that
// tools/reference/torch_reference.py computed with PyTorch, and compares
// results against them with docs/design.md §6's tolerance rule.
package reftest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Array is a stored tensor.
type Array struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// Host returns the array as float32 host data.
func (a Array) Host() tensor.Host {
	h := tensor.NewHost(a.Shape...)
	for i, v := range a.Data {
		h.Data[i] = float32(v)
	}
	return h
}

// Path is the absolute path of a file in the repository's testdata folder.
func Path(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", name)
}

// RepoPath is the path of a file of the repository, rel being its path
// from the repository's root (tools/reference/torch_safetensors.py), found
// as Path finds testdata: from this file's source path, which the CUDA
// bundle's tests (built with -trimpath) find under its src/ folder.
func RepoPath(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", filepath.FromSlash(rel))
}

// Python is the Python that reference and interop checks run: the one
// $MIXPREC_PYTHON names, else python3 on the PATH ("" when there is none).
func Python() string {
	if p := os.Getenv("MIXPREC_PYTHON"); p != "" {
		return p
	}
	p, err := exec.LookPath("python3")
	if err != nil {
		return ""
	}
	return p
}

// Load decodes testdata/torch_reference.json's top-level key into v.
func Load(t testing.TB, key string, v any) {
	t.Helper()
	b, err := os.ReadFile(Path("torch_reference.json"))
	if err != nil {
		t.Fatalf("reading reference values: %v (regenerate with make reference)", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("decoding reference values: %v", err)
	}
	raw, ok := all[key]
	if !ok {
		t.Fatalf("reference values have no %q case (regenerate with make reference)", key)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decoding reference case %q: %v", key, err)
	}
}

// Compare checks got against want elementwise with dt's tolerance
// (dtype.Close), reporting at most five mismatches and the largest error.
func Compare(t testing.TB, name string, got []float32, want Array, dt dtype.DType) {
	t.Helper()
	if len(got) != len(want.Data) {
		t.Errorf("%s: %d values, want %d", name, len(got), len(want.Data))
		return
	}
	bad, worst := 0, 0.0
	for i, w := range want.Data {
		g := float64(got[i])
		worst = math.Max(worst, math.Abs(g-w))
		if !dtype.Close(dt, g, w, 0) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.8g, want %.8g (|diff| %.3g)", name, i, g, w, math.Abs(g-w))
			}
			bad++
		}
	}
	if bad > 0 {
		atol, rtol := dtype.Tolerance(dt)
		t.Errorf("%s: %d of %d values outside |got-want| <= %g + %g|want| (largest error %.3g)", name, bad, len(got), atol, rtol, worst)
	}
}

// Describe formats a short description of an array for messages.
func (a Array) String() string { return fmt.Sprintf("Array%v", a.Shape) }
