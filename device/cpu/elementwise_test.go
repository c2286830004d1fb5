package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// BenchmarkReLU measures ReLU and its gradient on 2^20 elements of random
// sign, where a branch on the sign would mispredict half the time: the NaN
// handling must not make them slower than a plain max.
func BenchmarkReLU(b *testing.B) {
	d := New()
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	h := make([]float32, n)
	for i := range h {
		h[i] = float32(r.NormFloat64())
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		x, y, g := d.Alloc(dt, n, device.Temp), d.Alloc(dt, n, device.Temp), d.Alloc(dt, n, device.Temp)
		d.CopyFromHost(x, h)
		d.CopyFromHost(g, h)
		b.Run(fmt.Sprintf("fwd/%v", dt), func(b *testing.B) {
			b.SetBytes(int64(2 * n * dt.Size()))
			for b.Loop() {
				d.Unary(device.ReLU, y, x, 0)
			}
		})
		d.Unary(device.ReLU, y, x, 0)
		b.Run(fmt.Sprintf("grad/%v", dt), func(b *testing.B) {
			b.SetBytes(int64(3 * n * dt.Size()))
			for b.Loop() {
				d.UnaryGrad(device.ReLU, x, g, y, 0)
			}
		})
		d.Free(x)
		d.Free(y)
		d.Free(g)
	}
}

// BenchmarkDropout times dropout over a CNN activation's 128 x 9216
// elements.
func BenchmarkDropout(b *testing.B) {
	d := New()
	const n = 128 * 9216
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		x, y := d.Alloc(dt, n, device.Temp), d.Alloc(dt, n, device.Temp)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(int64(2 * n * dt.Size()))
			for b.Loop() {
				d.Dropout(y, x, 0.25, device.RandKey{Seed: 1})
			}
		})
		d.Free(x)
		d.Free(y)
	}
}
