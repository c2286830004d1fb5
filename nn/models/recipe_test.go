package models_test

import (
	"slices"
	"testing"

	"github.com/mixprec/mixprec/nn/models"
)

// TestRecipes: every model states a complete recipe the programs can use
// as it is, since each of its settings becomes a flag's default.
func TestRecipes(t *testing.T) {
	for _, s := range models.Specs() {
		r := s.Train
		switch {
		case s.Batch < 1 || r.Epochs < 1:
			t.Errorf("%s: batch %d, epochs %d; want both >= 1", s.Name, s.Batch, r.Epochs)
		case !(r.LR > 0) || r.WeightDecay < 0:
			t.Errorf("%s: lr %v, weight decay %v; want lr > 0 and decay >= 0", s.Name, r.LR, r.WeightDecay)
		case !slices.Contains([]string{"sgd", "adam", "adamw"}, r.Optimizer):
			t.Errorf("%s: optimiser %q; want sgd, adam or adamw", s.Name, r.Optimizer)
		case (r.Momentum != 0 || r.Nesterov) && r.Optimizer != "sgd":
			t.Errorf("%s: momentum %v, Nesterov %v with %s; only SGD takes them", s.Name, r.Momentum, r.Nesterov, r.Optimizer)
		case r.Nesterov && r.Momentum <= 0:
			t.Errorf("%s: Nesterov without momentum", s.Name)
		case r.Schedule > models.Cosine:
			t.Errorf("%s: unknown schedule %d", s.Name, r.Schedule)
		}
	}
	if got := models.Names(); len(got) != len(models.Specs()) {
		t.Errorf("Names() has %d models, Specs() %d", len(got), len(models.Specs()))
	}
}
