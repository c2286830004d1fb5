package nn_test

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
)

// TestSaveLoadRoundTrip saves a ResNet-20, whose batch norms have buffers
// besides parameters, and loads it into a model on the host.
func TestSaveLoadRoundTrip(t *testing.T) {
	dev := cpu.New()
	a := models.ResNet20(rand.New(rand.NewPCG(1, 1)), 10)
	b := models.ResNet20(rand.New(rand.NewPCG(2, 2)), 10)
	nn.To(a, dev)
	defer nn.Release(a)
	defer nn.Release(b) // b stays on the host until loaded into: loading works either way
	path := filepath.Join(t.TempDir(), "resnet20.safetensors")
	if err := nn.SaveWeights(path, a, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := nn.LoadWeights(path, b); err != nil {
		t.Fatal(err)
	}
	nn.To(b, dev)
	sa, sb := nn.State(a), nn.State(b)
	for i := range sa {
		if sa[i].Name != sb[i].Name || !slices.Equal(sa[i].Var.Value.ToHost(), sb[i].Var.Value.ToHost()) {
			t.Fatalf("entry %s differs after a round trip", sa[i].Name)
		}
	}
	if !strings.Contains(sa[len(sa)-1].Name, "bias") {
		t.Errorf("last entry %q; want the classifier's bias", sa[len(sa)-1].Name)
	}
	if _, err := nn.LoadWeights(path, models.MLP(rand.New(rand.NewPCG(1, 1)), 4, 3, 2)); err == nil {
		t.Error("ResNet-20's weights loaded into an MLP")
	}
}
