package nn_test

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/reftest"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/safetensors"
	"github.com/mixprec/mixprec/tensor"
)

func buildModel(t *testing.T, name string, seed uint64) (*nn.Sequential, []int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	switch name {
	case "mlp":
		return models.MLP(rng, 784, 256, 128, 10), []int{784}
	case "cnn":
		return models.CNN(rng), []int{1, 28, 28}
	}
	t.Fatalf("no model %s", name)
	return nil, nil
}

// logits runs m in evaluation mode on x (N, shape...).
func logits(m nn.Module, x tensor.Host) []float32 {
	dev := cpu.New()
	nn.To(m, dev)
	defer nn.Release(m)
	nn.SetTraining(m, false)
	g := autograd.NewGraph(dev, autograd.WithoutGrad())
	defer g.Release()
	return m.Forward(g, g.Input(x)).Value.ToHost()
}

func TestWeightsRoundTrip(t *testing.T) {
	for _, name := range []string{"mlp", "cnn"} {
		a, _ := buildModel(t, name, 1)
		b, _ := buildModel(t, name, 2)
		path := filepath.Join(t.TempDir(), "model.safetensors")
		if err := nn.SaveWeights(path, a, map[string]string{"model": name}); err != nil {
			t.Fatal(err)
		}
		meta, err := nn.LoadWeights(path, b)
		if err != nil {
			t.Fatal(err)
		}
		if meta["model"] != name {
			t.Errorf("%s: metadata = %v, want model=%s", name, meta, name)
		}
		sa, sb := nn.State(a), nn.State(b)
		for i := range sa {
			va, vb := sa[i].Var.InitialValues(), sb[i].Var.InitialValues()
			for j := range va {
				if math.Float32bits(va[j]) != math.Float32bits(vb[j]) {
					t.Fatalf("%s: %s[%d] = %v after loading, want %v", name, sa[i].Name, j, vb[j], va[j])
				}
			}
		}
	}
}

func TestLoadWeightsMismatch(t *testing.T) {
	m, _ := buildModel(t, "mlp", 1)
	good := nn.Weights(m)
	before := nn.State(m)[0].Var.InitialValues()[0]
	other := models.MLP(rand.New(rand.NewPCG(1, 1)), 784, 200, 128, 10)
	tests := []struct {
		name    string
		tensors []safetensors.Tensor
		want    []string
	}{
		{"shape", nn.Weights(other), []string{`"0.weight"`, "[200 784] in the file", "[256 784] in the model"}},
		{"missing", good[1:], []string{"missing from the file: 0.weight"}},
		{"unexpected", append(nn.Weights(m), safetensors.Tensor{Name: "5.weight", DType: dtype.F32, Shape: []int{1}, F32: []float32{0}}),
			[]string{"not in the model: 5.weight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Put a changed value first, so that a partial load would show.
			ts := tt.tensors
			if len(ts) > 0 && ts[0].Name == "0.weight" && ts[0].F32 != nil {
				ts[0].F32[0] = 42
			}
			err := nn.SetWeights(m, ts)
			if err == nil {
				t.Fatal("SetWeights accepted weights that do not fit")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
			if got := nn.State(m)[0].Var.InitialValues()[0]; got != before {
				t.Errorf("a failed load changed 0.weight[0] to %v", got)
			}
		})
	}
	// 16-bit files load, widened.
	half := nn.Weights(m)
	for i := range half {
		half[i].U16 = make([]uint16, len(half[i].F32))
		dtype.Encode(dtype.BF16, half[i].U16, half[i].F32)
		half[i].F32, half[i].DType = nil, dtype.BF16
	}
	if err := nn.SetWeights(m, half); err != nil {
		t.Fatalf("loading BF16 weights: %v", err)
	}
	if got, want := nn.State(m)[0].Var.InitialValues()[0], dtype.Round(dtype.BF16, before); got != want {
		t.Errorf("BF16 weight loaded as %v, want %v", got, want)
	}
}

// TestTorchWeights loads weights that PyTorch trained and saved
// (testdata/torch_*.safetensors, made by `make reference`) and requires
// PyTorch's logits.
func TestTorchWeights(t *testing.T) {
	for _, name := range []string{"mlp", "cnn"} {
		t.Run(name, func(t *testing.T) {
			m, shape := buildModel(t, name, 9)
			if _, err := nn.LoadWeights(reftest.Path("torch_"+name+".safetensors"), m); err != nil {
				t.Fatal(err)
			}
			io, err := safetensors.ReadFile(reftest.Path("torch_" + name + "_io.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			x, want := io.Tensor("input"), io.Tensor("logits")
			if x == nil || want == nil || x.Shape[0] == 0 || len(x.Shape) != len(shape)+1 {
				t.Fatalf("io file lacks input %v or logits", x)
			}
			got := logits(m, tensor.Host{Shape: x.Shape, Data: x.F32})
			w64 := make([]float64, len(want.F32))
			for i, v := range want.F32 {
				w64[i] = float64(v)
			}
			reftest.Compare(t, name+" logits", got, reftest.Array{Shape: want.Shape, Data: w64}, dtype.F32)
		})
	}
}

// TestWeightsIntoTorch saves our weights and logits and has PyTorch load
// them with load_state_dict(strict=True) and compare its logits. It finds
// its script from its source path, as it finds testdata, so that it runs
// from the CUDA bundle too.
func TestWeightsIntoTorch(t *testing.T) {
	py := reftest.Python() // $MIXPREC_PYTHON, else python3 on the PATH
	if py == "" || exec.Command(py, "-c", "import torch, numpy").Run() != nil {
		t.Skipf("PyTorch and NumPy are not installed for %q (sh tools/install-peer.sh installs them, or set MIXPREC_PYTHON): not checking that PyTorch loads our weights", py)
	}
	script := reftest.RepoPath("tools/reference/torch_safetensors.py")
	for _, name := range []string{"mlp", "cnn"} {
		t.Run(name, func(t *testing.T) {
			m, shape := buildModel(t, name, 5)
			dir := t.TempDir()
			weights := filepath.Join(dir, "model.safetensors")
			if err := nn.SaveWeights(weights, m, nil); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 7))
			x := tensor.NormalHost(rng, 0, 1, append([]int{3}, shape...)...)
			got := logits(m, x)
			io := []safetensors.Tensor{
				{Name: "input", DType: dtype.F32, Shape: x.Shape, F32: x.Data},
				{Name: "logits", DType: dtype.F32, Shape: []int{3, 10}, F32: got},
			}
			ioPath := filepath.Join(dir, "io.safetensors")
			if err := safetensors.WriteFile(ioPath, io, nil); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(py, script, "check", name, weights, ioPath)
			cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("PyTorch did not accept our %s weights: %v\n%s", name, err, out)
			}
			t.Logf("%s", strings.TrimSpace(string(out)))
		})
	}
}
