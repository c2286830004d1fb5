package models_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/safetensors"
)

// The GPT against PyTorch: testdata/torch_gpt_* and torch_gpt.json, made
// by tools/reference/torch_gpt.py (its doc describes every file), hold a
// small model's weights and the float64 values of its logits, loss and
// gradients, ten AdamW steps, BF16 autocast logits and nanoGPT's learning
// rates.

// refFile reads a fixture into a map by tensor name, with its metadata.
func refFile(t *testing.T, name string) (map[string]safetensors.Tensor, map[string]string) {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]safetensors.Tensor{}
	for _, tn := range f.Tensors {
		m[tn.Name] = tn
	}
	return m, f.Metadata
}

// refGPT builds the GPT a weights fixture holds: its shape from the
// tensors, its heads from the metadata.
func refGPT(t *testing.T, dev device.Device, name string) *models.GPT {
	t.Helper()
	f, err := safetensors.ReadFile(filepath.Join("..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := models.GPTWeights(f.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := models.GPTConfigOf(ws)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Heads, err = strconv.Atoi(f.Metadata["n_head"]); err != nil {
		t.Fatalf("%s: n_head %q: %v", name, f.Metadata["n_head"], err)
	}
	m := models.NewGPT(cfg, rand.New(rand.NewPCG(0, 0)))
	if err := nn.SetWeights(m, ws); err != nil {
		t.Fatal(err)
	}
	nn.To(m, dev)
	return m
}

func ids(t safetensors.Tensor) []int32 {
	out := make([]int32, len(t.F32))
	for i, v := range t.F32 {
		out[i] = int32(v)
	}
	return out
}

// closeTo checks got against want within atol + rtol·|want| elementwise,
// reporting the largest excess.
func closeTo(t *testing.T, what string, got, want []float32, atol, rtol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, 0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if r := d / (atol + rtol*math.Abs(float64(want[i]))); r > worst || r != r {
			worst, at = r, i
		}
	}
	if !(worst <= 1) {
		t.Errorf("%s[%d] = %v, want %v: %.3g times the tolerance (%g + %g·|want|)", what, at, got[at], want[at], worst, atol, rtol)
	}
}

// scaleOf is the largest magnitude in v.
func scaleOf(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		m = math.Max(m, math.Abs(float64(x)))
	}
	return m
}

// TestGPTMatchesPyTorch compares the FP32 logits, loss and every gradient
// of a 2-layer GPT, with and without biases, at T = 8 (the block) and
// T = 5, with PyTorch's, to 1e-5 of each value plus 1e-6 of its tensor's
// largest (the float64 reference is exact to F32's precision; near zero
// every float32 implementation differs by its own roundings: the key part
// of c_attn's bias has a gradient of 0 in exact arithmetic and about 1e-8
// in float32, in PyTorch's too); and the BF16 autocast logits and loss
// within the BF16 tolerance.
func TestGPTMatchesPyTorch(t *testing.T) {
	dev := cpu.New()
	for _, variant := range []string{"nobias", "bias"} {
		m := refGPT(t, dev, "torch_gpt_"+variant+".safetensors")
		ref, _ := refFile(t, "torch_gpt_"+variant+"_io.safetensors")
		for _, prefix := range []string{"", "short."} {
			name := variant + "/" + strings.TrimSuffix("T8"+prefix, ".")
			x, y := ids(ref[prefix+"ids"]), ids(ref[prefix+"targets"])
			b, tt := ref[prefix+"ids"].Shape[0], ref[prefix+"ids"].Shape[1]
			g := autograd.NewGraph(dev)
			logits := m.Forward(g, g.InputIDs(x, b, tt))
			loss := m.Loss(g, logits, y)
			g.Backward(loss)
			want := ref[prefix+"logits"].F32
			closeTo(t, name+" logits", logits.Value.ToHost(), want, 1e-6*scaleOf(want), 1e-5)
			closeTo(t, name+" loss", []float32{loss.Value.Item()}, ref[prefix+"loss"].F32, 0, 1e-5)
			for _, e := range nn.State(m) {
				w, ok := ref[prefix+"grad."+e.Name]
				if !ok {
					t.Fatalf("%s: the fixture has no gradient for %s", name, e.Name)
				}
				closeTo(t, name+" grad "+e.Name, e.Var.Grad.ToHost(), w.F32, 1e-6*scaleOf(w.F32), 1e-5)
				e.Var.FreeGrad()
			}
			g.Release()

			g = autograd.NewGraph(dev, autograd.WithoutGrad())
			amp.Autocast(g, dtype.BF16)
			logits = m.Forward(g, g.InputIDs(x, b, tt))
			loss = m.Loss(g, logits, y)
			closeTo(t, name+" bf16 logits", logits.Value.ToHost(), ref[prefix+"bf16.logits"].F32, 1e-3, 2e-2)
			closeTo(t, name+" bf16 loss", []float32{loss.Value.Item()}, ref[prefix+"bf16.loss"].F32, 1e-3, 2e-2)
			g.Release()
		}
		nn.Release(m)
	}
}

// TestGPTAdamWMatchesPyTorch takes PyTorch's ten AdamW steps (nanoGPT's
// decay groups, betas 0.9 and 0.99, clipping to norm 1) and compares each
// step's loss and gradient norm, and the final weights.
func TestGPTAdamWMatchesPyTorch(t *testing.T) {
	dev := cpu.New()
	m := refGPT(t, dev, "torch_gpt_nobias.safetensors")
	defer nn.Release(m)
	ref, _ := refFile(t, "torch_gpt_adamw_io.safetensors")
	opt := optim.NewAdamWGroups(optim.DecayGroups(m.Params(), 0.1), optim.LR(1e-3), optim.Betas(0.9, 0.99), optim.Eps(1e-8))
	defer opt.Release()
	steps, b, tt := ref["ids"].Shape[0], ref["ids"].Shape[1], ref["ids"].Shape[2]
	all, targets := ids(ref["ids"]), ids(ref["targets"])
	n := b * tt
	for s := range steps {
		g := autograd.NewGraph(dev)
		loss := m.Loss(g, m.Forward(g, g.InputIDs(all[s*n:(s+1)*n], b, tt)), targets[s*n:(s+1)*n])
		g.Backward(loss)
		closeTo(t, fmt.Sprintf("step %d loss", s), []float32{loss.Value.Item()}, ref["losses"].F32[s:s+1], 0, 1e-5)
		norm := optim.ClipGradNorm(opt.Params(), 1)
		closeTo(t, fmt.Sprintf("step %d gradient norm", s), []float32{float32(norm)}, ref["grad_norms"].F32[s:s+1], 0, 1e-5)
		opt.Step()
		opt.ZeroGrad()
		g.Release()
	}
	want, _ := refFile(t, "torch_gpt_adamw.safetensors")
	for _, e := range nn.State(m) {
		w := want[e.Name].F32
		closeTo(t, "after 10 steps "+e.Name, e.Var.Value.ToHost(), w, 1e-5, 1e-4)
	}
}

// refJSON reads torch_gpt.json.
func refJSON(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "torch_gpt.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestWarmupCosineMatchesNanoGPT compares optim.WarmupCosine with
// nanoGPT's get_lr at the table's iterations.
func TestWarmupCosineMatchesNanoGPT(t *testing.T) {
	var s struct {
		Iters  []int
		Lrs    []float64
		LR     float64 `json:"lr"`
		Warmup int     `json:"warmup_iters"`
		Decay  int     `json:"lr_decay_iters"`
		Min    float64 `json:"min_lr"`
	}
	if err := json.Unmarshal(refJSON(t)["lr_schedule"], &s); err != nil {
		t.Fatal(err)
	}
	f := optim.WarmupCosine(float32(s.LR), float32(s.Min), s.Warmup, s.Decay)
	for i, it := range s.Iters {
		if got := float64(f(it)); math.Abs(got-s.Lrs[i]) > 1e-7*s.Lrs[i] {
			t.Errorf("lr at iteration %d = %v, nanoGPT's %v", it, got, s.Lrs[i])
		}
	}
}

// valLoss is examples/gpt's deterministic validation loss of m on text.
func valLoss(dev device.Device, m *models.GPT, text *datasets.Text, windows int) float64 {
	nn.SetTraining(m, false)
	block := m.Config.Block
	w := datasets.EvalWindows(text.Val, block, windows)
	x, y := make([]int32, w*block), make([]int32, w*block)
	for i := range w {
		datasets.EvalWindow(text.Val, block, i, x[i*block:(i+1)*block], y[i*block:(i+1)*block])
	}
	g := autograd.NewGraph(dev, autograd.WithoutGrad())
	defer g.Release()
	return float64(m.Loss(g, m.Forward(g, g.InputIDs(x, w, block)), y).Value.Item())
}

// TestGPTWeightsInterop loads a model PyTorch initialised and trained
// (its state_dict with lm_head.weight beside transformer.wte.weight) and
// finds PyTorch's validation loss on Opticks; then saves it, and when
// PyTorch is installed has it load mixprec's file and find the same loss.
func TestGPTWeightsInterop(t *testing.T) {
	dev := cpu.New()
	var init struct {
		ValLoss     float64 `json:"val_loss"`
		EvalWindows int     `json:"eval_windows"`
	}
	if err := json.Unmarshal(refJSON(t)["init"], &init); err != nil {
		t.Fatal(err)
	}
	text, err := datasets.LoadText("opticks")
	if err != nil {
		t.Fatal(err)
	}
	m := refGPT(t, dev, "torch_gpt_init.safetensors")
	defer nn.Release(m)
	got := valLoss(dev, m, text, init.EvalWindows)
	if math.Abs(got-init.ValLoss) > 1e-5*init.ValLoss {
		t.Errorf("validation loss of PyTorch's weights: %v, PyTorch's %v", got, init.ValLoss)
	}
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch, numpy").Run(); err != nil {
		t.Skip("PyTorch is not installed for /usr/bin/python3 (sh tools/install-peer.sh installs it): not checking that PyTorch loads mixprec's GPT weights")
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := nn.SaveWeights(path, m, map[string]string{"n_head": strconv.Itoa(m.Config.Heads)}); err != nil {
		t.Fatal(err)
	}
	opticks, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "../../tools/reference/torch_gpt.py", "check", path,
		filepath.Join(strings.TrimSpace(string(opticks)), datasets.OpticksPath), "--eval-windows", strconv.Itoa(init.EvalWindows),
		"--want", strconv.FormatFloat(got, 'g', -1, 64))
	cmd.Env = append(os.Environ(), "OMP_NUM_THREADS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("PyTorch did not find mixprec's loss %v with mixprec's weights: %v\n%s", got, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
