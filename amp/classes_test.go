package amp

import (
	"testing"

	"github.com/mixprec/mixprec/autograd"
)

// TestClassesTotal checks that the class table decides every op autograd
// has: a new op must be placed on PyTorch's lists, not fall into Promote by
// default.
func TestClassesTotal(t *testing.T) {
	for _, op := range autograd.Ops() {
		if _, ok := classes[op]; !ok {
			t.Errorf("autograd op %v has no autocast class: add it to amp's classes", op)
		}
	}
	if got, want := len(classes), len(autograd.Ops()); got != want {
		t.Errorf("the class table has %d entries for %d ops", got, want)
	}
}
