package cpu

import (
	"math"

	"github.com/mixprec/mixprec/dtype"
)

// ReLU and its gradient touch each element once and do no arithmetic, so
// they run on the stored bit patterns: no widening pass, no rounding pass,
// and in SIMD where the CPU has it (relu_amd64.s). The results are those of
// the general path (widen, relu or reluGradMask in float32, round) bit for
// bit, NaNs included: rounding quiets a NaN, so the 16-bit loops set the
// quiet bit of a NaN they pass on.

// half16 describes a 16-bit format for the bit-pattern loops.
type half16 struct {
	inf, quiet uint16 // +Inf's pattern, a NaN's quiet bit
}

var (
	f16Bits  = half16{inf: 0x7c00, quiet: 0x0200}
	bf16Bits = half16{inf: 0x7f80, quiet: 0x0040}
)

func bitsOf(dt dtype.DType) half16 {
	if dt == dtype.BF16 {
		return bf16Bits
	}
	return f16Bits
}

// relu16 is relu on a 16-bit pattern.
func (h half16) relu(b uint16) uint16 {
	if b&0x7fff > h.inf {
		return b | h.quiet
	}
	if b&0x8000 != 0 {
		return 0
	}
	return b
}

// reluGrad is g where y > 0 or y is a NaN, else +0, on 16-bit patterns.
func (h half16) reluGrad(g, y uint16) uint16 {
	if y&0x7fff > h.inf || (y != 0 && y&0x8000 == 0) {
		if g&0x7fff > h.inf {
			return g | h.quiet
		}
		return g
	}
	return 0
}

// reluFast computes dst[lo:hi] = relu(src[lo:hi]) when both have one dtype,
// and reports whether it did.
func reluFast(db, sb *Buffer, lo, hi int) bool {
	if db.dt != sb.dt {
		return false
	}
	if db.dt == dtype.F32 {
		out, x := db.f32[lo:hi], sb.f32[lo:hi]
		n := reluF32SIMD(out, x)
		for i := n; i < len(out); i++ {
			out[i] = relu(x[i])
		}
		return true
	}
	h := bitsOf(db.dt)
	out, x := db.u16[lo:hi], sb.u16[lo:hi]
	n := relu16SIMD(out, x, h)
	for i := n; i < len(out); i++ {
		out[i] = h.relu(x[i])
	}
	return true
}

// reluGradFast computes dst[lo:hi] = dy * relu'(y) when all three have one
// dtype, and reports whether it did.
func reluGradFast(db, gb, yb *Buffer, lo, hi int) bool {
	if db.dt != gb.dt || db.dt != yb.dt {
		return false
	}
	if db.dt == dtype.F32 {
		out, g, y := db.f32[lo:hi], gb.f32[lo:hi], yb.f32[lo:hi]
		n := reluGradF32SIMD(out, g, y)
		for i := n; i < len(out); i++ {
			out[i] = math.Float32frombits(math.Float32bits(g[i]) & reluGradMask(y[i]))
		}
		return true
	}
	h := bitsOf(db.dt)
	out, g, y := db.u16[lo:hi], gb.u16[lo:hi], yb.u16[lo:hi]
	n := reluGrad16SIMD(out, g, y, h)
	for i := n; i < len(out); i++ {
		out[i] = h.reluGrad(g[i], y[i])
	}
	return true
}
