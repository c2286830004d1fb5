package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// TestLargeConversions checks conversions longer than convGrain, which run
// in pieces on several goroutines, against dtype's converters on the whole
// slice: Copy between every pair of dtypes with offsets, CopyFromHost and
// CopyToHost.
func TestLargeConversions(t *testing.T) {
	d := New()
	defer d.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	n := 2*convGrain + 5
	host := make([]float32, n+3)
	for i := range host {
		host[i] = float32(rng.NormFloat64() * 100)
	}
	round := func(dt dtype.DType, v []float32) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = dtype.Round(dt, x)
		}
		return out
	}
	for _, from := range dtype.All {
		for _, to := range dtype.All {
			if from == to {
				continue
			}
			src := d.Alloc(from, n+3, device.Temp)
			dst := d.Alloc(to, n+1, device.Temp)
			d.CopyFromHost(src, host)
			d.Copy(dst, 1, src, 3, n)
			got := make([]float32, n+1)
			d.CopyToHost(got, dst)
			want := round(to, round(from, host[3:]))
			for i := range n {
				if got[1+i] != want[i] {
					t.Fatalf("Copy %v -> %v of %d: element %d = %v, want %v", from, to, n, i, got[1+i], want[i])
				}
			}
			d.Free(src)
			d.Free(dst)
		}
	}
}
