package cpu

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

func BenchmarkZZUnscale(b *testing.B) {
	d := New()
	sizes := []int{200704, 256, 32768, 128, 1280, 10}
	var gs, ps, ms, ls []device.Buffer
	for _, n := range sizes {
		h := make([]float32, n)
		for i := range h {
			h[i] = float32(i%7) * 0.01
		}
		for _, l := range []*[]device.Buffer{&gs, &ps, &ms} {
			buf := d.Alloc(dtype.F32, n, device.Activation)
			d.CopyFromHost(buf, h)
			*l = append(*l, buf)
		}
		lb := d.Alloc(dtype.F16, n, device.Activation)
		ls = append(ls, lb)
	}
	b.Run("unscale", func(b *testing.B) {
		for b.Loop() {
			d.UnscaleCheck(gs, 1)
		}
	})
	b.Run("sgd", func(b *testing.B) {
		for b.Loop() {
			for i := range gs {
				d.SGD(ps[i], gs[i], ms[i], device.SGDParams{LR: 0.01, Momentum: 0.9})
			}
		}
	})
	b.Run("sgdcast", func(b *testing.B) {
		for b.Loop() {
			for i := range gs {
				d.SGDCast(ps[i], gs[i], ms[i], ls[i], device.SGDParams{LR: 0.01, Momentum: 0.9})
			}
		}
	})
}
