package gemm

import (
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

func BenchmarkAMXEnc(b *testing.B) {
	if avx512Impl.dot != amxImpl {
		b.Skip("no AMX")
	}
	const steps, n, ldc = 64, 8, 272
	a := make([]float32, n*32*steps)
	bb := make([]float32, 32*steps)
	c := make([]float32, 32*n*ldc)
	dst := make([]uint16, 32*n*32)
	b.Run("run", func(b *testing.B) {
		for b.Loop() {
			amxRun(steps, a, bb, c, ldc, 1, 0, n)
		}
	})
	b.Run("enc", func(b *testing.B) {
		for b.Loop() {
			dtype.EncodeRows(dtype.BF16, dst, 32, c, ldc, 32*n, 32)
		}
	})
	b.Run("run+enc", func(b *testing.B) {
		for b.Loop() {
			amxRun(steps, a, bb, c, ldc, 1, 0, n)
			dtype.EncodeRows(dtype.BF16, dst, 32, c, ldc, 32*n, 32)
		}
	})
}
