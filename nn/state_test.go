package nn_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	dev := cpu.New()
	a := models.ResNet20(rand.New(rand.NewPCG(1, 1)), 10)
	b := models.ResNet20(rand.New(rand.NewPCG(2, 2)), 10)
	nn.To(a, dev)
	defer nn.Release(a)
	defer nn.Release(b) // b stays on the host until loaded into: Load works either way
	var buf bytes.Buffer
	if err := nn.Save(&buf, a); err != nil {
		t.Fatal(err)
	}
	if err := nn.Load(bytes.NewReader(buf.Bytes()), b); err != nil {
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
}

func TestLoadErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	mlp := models.MLP(rng, 4, 3, 2)
	var buf bytes.Buffer
	if err := nn.Save(&buf, mlp); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	for _, c := range []struct {
		name string
		data []byte
		m    nn.Module
		want string
	}{
		{"not a state file", []byte("hello"), mlp, "bad header"},
		{"truncated", good[:len(good)-5], mlp, "unexpected EOF"},
		{"other model", good, models.MLP(rng, 4, 5, 2), "shape"},
		{"other depth", good, models.MLP(rng, 4, 3, 3, 2), "entries"},
	} {
		err := nn.Load(bytes.NewReader(c.data), c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}
