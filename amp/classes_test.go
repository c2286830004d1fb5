package amp

import (
	"testing"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
)

// TestClassesTotal checks that every op autograd has gets a decision: an
// elementwise op from its row of device's op table (which names no other
// op), every other op from the class table, so that a new op is placed on
// PyTorch's lists instead of falling into Promote by default.
func TestClassesTotal(t *testing.T) {
	for _, op := range autograd.Ops() {
		_, unary := op.Unary()
		_, binary := op.Binary()
		_, listed := classes[op]
		switch {
		case (unary || binary) && listed:
			t.Errorf("autograd op %v is elementwise (its class is in device's op table) and also in amp's classes", op)
		case !unary && !binary && !listed:
			t.Errorf("autograd op %v has no autocast class: add it to amp's classes", op)
		case ClassOf(op) == device.CastUnset:
			t.Errorf("autograd op %v: its class is unset", op)
		}
	}
}
