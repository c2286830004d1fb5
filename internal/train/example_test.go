package train_test

import (
	"fmt"

	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/nn/models"
)

// A model's recipe names its optimiser and schedule; the programs build
// them here, at the learning rate the command line settled on.
func ExampleNewSchedule() {
	spec, _ := models.Lookup("resnet20")
	total := train.TotalSteps(390, spec.Train.Epochs, 0)
	lr := train.NewSchedule(spec.Train, spec.Train.LR, 390, total)
	fmt.Println(total, lr(0) < lr(389), lr(389), lr(total-1) < 1e-5)
	// Output: 11700 true 0.1 true
}
