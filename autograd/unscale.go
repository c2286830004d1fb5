package autograd

import (
	"fmt"
	"math"

	"github.com/mixprec/mixprec/device"
)

// UnscaleAsStored tells the graph that the loss its Backward will start
// from was multiplied by 1/inv, a loss scaler's scale (a power of two), and
// that its gradients will be unscaled once backward ends: a parameter's
// gradient that one product writes whole (the weight gradient of a Linear
// under autocast, on a device.UnscalingGemmer) is then multiplied by inv as
// it is stored, while it is still in cache, instead of in a later pass over
// memory. Unscaled tells the scaler which gradients are done and whether
// any of their values is Inf or NaN; it unscales the others. The bits are
// those of unscaling afterwards. Until then such a gradient holds unscaled
// values where the others hold scaled ones, so code that reads gradients
// between Backward and the scaler's Unscale must not use it; a gradient
// that a later Backward adds to is first scaled back (exactly: inv is a
// power of two). With an OnGradReady hook (data-parallel training averages
// gradients before the scaler sees them) it does nothing.
//
// amp.GradScaler calls it when asked to (amp.UnscaleAsStored).
func (g *Graph) UnscaleAsStored(inv float32) {
	g.check()
	if f, _ := math.Frexp(float64(inv)); f != 0.5 || inv <= 0 || math.IsInf(float64(inv), 0) {
		panic(fmt.Sprintf("autograd.UnscaleAsStored(%v): want a positive power of two", inv))
	}
	if g.backDone {
		panic("autograd.UnscaleAsStored: call it before Backward")
	}
	g.unscale = inv
}

// Unscaled reports whether p's gradient was multiplied by inv as it was
// stored (Graph.UnscaleAsStored) and, if so, whether any unscaled value is
// Inf or NaN; it then forgets that, as the gradient is now like any other
// unscaled one. A gradient unscaled by another factor (the scale changed
// without ZeroGrad in between) is scaled back to the loss's scale first and
// reported as not unscaled.
func Unscaled(p *Var, inv float32) (done, nonFinite bool) {
	m := p.unscaled
	p.unscaled = gradMark{}
	if m.grad == nil || m.grad != p.Grad {
		return false, false
	}
	if m.inv != inv {
		b := p.Grad.Buffer()
		p.Grad.Device().Axpby(b, b, nil, 1/m.inv, 0)
		return false, false
	}
	return true, m.nonFinite
}

// unscaling returns the device's UnscalingGemmer when p's gradient of this
// backward can be unscaled as a product stores it: the graph was told the
// loss's scale, nothing averages gradients before the scaler looks, and p
// has no gradient yet (one that exists holds scaled values).
func (g *Graph) unscaling(p *Var) device.UnscalingGemmer {
	if g.unscale == 0 || g.ready != nil || p.Grad != nil {
		return nil
	}
	ug, _ := g.dev.(device.UnscalingGemmer)
	return ug
}
