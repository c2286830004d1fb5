package cpu

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// BenchmarkRowKernels times the row-by-row kernels on a Linear layer's bias
// shapes (batch 128, 256 features): the forward pass's bias broadcast
// (Expand), the backward pass's bias gradient (Reduce) and a broadcast add
// (Binary), in F32 and in the 16-bit dtypes whose rows are widened.
func BenchmarkRowKernels(b *testing.B) {
	const rows, cols = 128, 256
	d := New()
	defer d.Close()
	for _, dt := range dtype.All {
		big, small := d.Alloc(dt, rows*cols, device.Temp), d.Alloc(dt, cols, device.Temp)
		d.Fill(big, 0.5)
		d.Fill(small, 0.25)
		bias := device.Strides{Shape: []int{rows, cols}, A: []int{0, 1}, B: []int{cols, 1}}
		b.Run("expand/"+dt.String(), func(b *testing.B) {
			for b.Loop() {
				d.Expand(big, small, bias, 1)
			}
		})
		b.Run("reduce/"+dt.String(), func(b *testing.B) {
			for b.Loop() {
				d.Reduce(small, big, bias, 1)
			}
		})
		b.Run("binary/"+dt.String(), func(b *testing.B) {
			for b.Loop() {
				d.Binary(device.Add, big, small, big, bias)
			}
		})
	}
}
