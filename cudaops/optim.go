package cudaops

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

// SGD is PyTorch's SGD step with momentum, dampening, Nesterov and weight
// decay, on F32 buffers.
func (d *Device) SGD(p, g, mom device.Buffer, h device.SGDParams) {
	d.enter()
	defer d.leave()
	var bs []*Buffer
	if h.Momentum != 0 {
		if mom == nil {
			panic("cudaops: SGD with momentum needs a momentum buffer")
		}
		bs = d.f32("SGD", p, g, mom)
	} else {
		bs = append(d.f32("SGD", p, g), nil)
	}
	n := bs[0].Len()
	if n == 0 {
		return
	}
	d.launch(d.ks.sgd, gridFor(n), ptr(bs[0]), ptr(bs[1]), ptr(bs[2]), pInt(n), pF32(h.LR), pF32(h.Momentum),
		pF32(h.Dampening), pF32(h.WeightDecay), pBool(h.Nesterov), pBool(h.First))
}

// Adam is PyTorch's Adam step, or AdamW's when h.Decoupled, on F32 buffers.
func (d *Device) Adam(p, g, m, v device.Buffer, h device.AdamParams) {
	d.enter()
	defer d.leave()
	bs := d.f32("Adam", p, g, m, v)
	if bs[0] == nil || bs[1] == nil || bs[2] == nil || bs[3] == nil {
		panic("cudaops: Adam: nil operand")
	}
	if h.Step < 1 {
		panic(fmt.Sprintf("cudaops: Adam step %d, want >= 1", h.Step))
	}
	stepSize, bc2sqrt, decay := h.Scalars() // as the CPU backend's, to the bit
	n := bs[0].Len()
	if n == 0 {
		return
	}
	d.launch(d.ks.adam, gridFor(n), ptr(bs[0]), ptr(bs[1]), ptr(bs[2]), ptr(bs[3]), pInt(n),
		pF32(h.Beta1), pF32(h.Beta2), pF32(h.Eps), pF32(h.WeightDecay), pBool(h.Decoupled),
		pF32(stepSize), pF32(bc2sqrt), pF32(decay))
}

// UnscaleCheck multiplies every gradient by inv and reports any Inf or NaN.
// It waits for the kernels, to read the flag they set.
func (d *Device) UnscaleCheck(grads []device.Buffer, inv float32) bool {
	if len(grads) == 0 {
		return false
	}
	d.enter()
	defer d.leave()
	bs := make([]*Buffer, len(grads))
	for i, g := range grads {
		bs[i] = device.OwnF32[Buffer](d, g, "cudaops", "UnscaleCheck", i, -1)
	}
	d.setFlag("UnscaleCheck", 0)
	for _, b := range bs {
		if b.Len() > 0 {
			d.launch(d.ks.unscale, gridFor(b.Len()), ptr(b), pInt(b.Len()), pF32(inv), pPtr(d.flag))
		}
	}
	return d.readFlag("UnscaleCheck") != 0
}
