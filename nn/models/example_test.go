package models_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
)

func Example() {
	rng := rand.New(rand.NewPCG(0, 0))
	for _, name := range models.Names() {
		spec, _ := models.Lookup(name)
		fmt.Printf("%-8s input %v, %d parameters\n", name, spec.Input, nn.CountParams(spec.Build(rng)))
	}
	// Output:
	// mlp      input [784], 235146 parameters
	// wide     input [784], 20037642 parameters
	// deepmlp  input [784], 16558090 parameters
	// cnn      input [1 28 28], 1199882 parameters
	// resnet20 input [3 32 32], 272474 parameters
}
