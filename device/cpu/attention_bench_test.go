package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// BenchmarkAttention times the fused attention at the character GPT's
// shape (batch 12, 64 positions, 4 heads of 32), forward and backward.
func BenchmarkAttention(b *testing.B) {
	p := device.AttentionParams{B: 12, T: 64, H: 4, D: 32, Scale: 0.17677669, Causal: true}
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		d := New()
		rng := rand.New(rand.NewPCG(1, 2))
		h := make([]float32, p.QKV())
		for i := range h {
			h[i] = rng.Float32()*2 - 1
		}
		qkv, y, lse := d.Alloc(dt, p.QKV(), device.Temp), d.Alloc(dt, p.Out(), device.Temp), d.Alloc(dtype.F32, p.Rows(), device.Temp)
		dq, dy := d.Alloc(dt, p.QKV(), device.Temp), d.Alloc(dt, p.Out(), device.Temp)
		d.CopyFromHost(qkv, h)
		d.CopyFromHost(dy, h[:p.Out()])
		b.Run(dt.String()+"/forward", func(b *testing.B) {
			for b.Loop() {
				d.Attention(y, lse, qkv, p)
			}
		})
		b.Run(dt.String()+"/backward", func(b *testing.B) {
			for b.Loop() {
				d.AttentionGrad(dq, dy, qkv, y, lse, p)
			}
		})
	}
}

// TestAttentionLevels runs the fused attention with the Go row loops and
// with the AVX-512 ones and compares outputs and gradients: the two sum in
// different orders, so they agree to a few float32 roundings.
func TestAttentionLevels(t *testing.T) {
	if simdTranscend == simdGo {
		t.Skip("no AVX-512 row loops on this CPU")
	}
	for _, p := range []device.AttentionParams{
		{B: 2, T: 70, H: 2, D: 8, Causal: true},
		{B: 1, T: 130, H: 1, D: 16, Causal: true, Dropout: 0.25, Key: device.RandKey{Seed: 3}},
		{B: 1, T: 33, H: 3, D: 5},
	} {
		p.Scale = 0.3
		d := New()
		rng := rand.New(rand.NewPCG(uint64(p.T), 9))
		h := make([]float32, p.QKV())
		for i := range h {
			h[i] = rng.Float32()*4 - 2
		}
		qkv, dy := d.Alloc(dtype.F32, p.QKV(), device.Temp), d.Alloc(dtype.F32, p.Out(), device.Temp)
		d.CopyFromHost(qkv, h)
		d.CopyFromHost(dy, h[:p.Out()])
		run := func(level simdLevel) (y, lse, dq []float32) {
			defer func(l simdLevel) { simdTranscend = l }(simdTranscend)
			simdTranscend = level
			yb, lb, db := d.Alloc(dtype.F32, p.Out(), device.Temp), d.Alloc(dtype.F32, p.Rows(), device.Temp), d.Alloc(dtype.F32, p.QKV(), device.Temp)
			d.Attention(yb, lb, qkv, p)
			d.AttentionGrad(db, dy, qkv, yb, lb, p)
			return yb.(*Buffer).f32, lb.(*Buffer).f32, db.(*Buffer).f32
		}
		yg, lg, dg := run(simdGo)
		ya, la, da := run(simdAVX512)
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"y", ya, yg}, {"lse", la, lg}, {"dqkv", da, dg}} {
			for i := range c.want {
				if d := math.Abs(float64(c.got[i] - c.want[i])); d > 1e-6+1e-5*math.Abs(float64(c.want[i])) {
					t.Fatalf("%v: %s[%d]: avx512 %v, go %v", p, c.what, i, c.got[i], c.want[i])
				}
			}
		}
	}
}
