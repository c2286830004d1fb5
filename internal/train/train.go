// Package train holds the pieces the example programs share around their
// training loops: evaluation and peak-memory bookkeeping. The loops
// themselves stay in the examples, where a reader can see them.
package train

import (
	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/tensor"
)

// Evaluate returns net's accuracy on d in evaluation mode, without
// recording gradients, under autocast to low when useAMP is set. It leaves
// net in evaluation mode.
func Evaluate(dev device.Device, net nn.Module, d *datasets.Dataset, batch int, useAMP bool, low dtype.DType) float64 {
	nn.SetTraining(net, false)
	correct := 0
	for b := range datasets.Batches(d, batch) {
		g := autograd.NewGraph(dev, autograd.WithoutGrad())
		if useAMP {
			amp.Autocast(g, low)
		}
		logits := net.Forward(g, g.Input(b.X))
		pred := tensor.New(dev, dtype.F32, device.Temp, len(b.Y))
		dev.Argmax(pred.Buffer(), logits.Value.Buffer(), len(b.Y), logits.Shape()[1])
		for i, p := range pred.ToHost() {
			if int32(p) == b.Y[i] {
				correct++
			}
		}
		pred.Release()
		g.Release()
	}
	return float64(correct) / float64(max(d.Len(), 1))
}

// MaxPeak keeps, figure by figure, the larger peak of a and b: the peak
// over several stretches of training with evaluation (and a ResetPeak) in
// between.
func MaxPeak(a, b device.MemStats) device.MemStats {
	a.Peak.Total = max(a.Peak.Total, b.Peak.Total)
	for i := range a.Peak.ByCategory {
		a.Peak.ByCategory[i] = max(a.Peak.ByCategory[i], b.Peak.ByCategory[i])
	}
	for i := range a.Peak.ByDType {
		a.Peak.ByDType[i] = max(a.Peak.ByDType[i], b.Peak.ByDType[i])
	}
	return a
}
