package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// poolValues are pooling inputs with ties (small integers, zeros of both
// signs) and NaNs of both signs, which decide which element a window picks.
func poolValues(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		switch rng.IntN(12) {
		case 0:
			out[i] = math.Float32frombits(0x7fc00000)
		case 1:
			out[i] = math.Float32frombits(0xffc00000)
		case 2:
			out[i] = float32(math.Copysign(0, -1))
		case 3:
			out[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
		default:
			out[i] = float32(rng.IntN(5) - 2)
		}
	}
	return out
}

// withSIMDConv runs f with the AVX-512 loops of conv.go on or off.
func withSIMDConv(on bool, f func()) {
	old := simdConv
	simdConv = on
	defer func() { simdConv = old }()
	f()
}

// TestMaxPool2x2SIMD checks the AVX-512 2x2 pooling of each storage
// dtype against the Go loop: the stored maximum must be the bits of the
// element the Go loop picks, and the position its F16 encoding, for row
// lengths around the 16-window step and odd input widths, with and without
// positions.
func TestMaxPool2x2SIMD(t *testing.T) {
	if !simdConv {
		t.Skip("no AVX-512 on this CPU: only the Go loop runs")
	}
	d := New()
	for _, dt := range dtype.All {
		for _, ow := range []int{1, 2, 7, 12, 15, 16, 17, 31, 32, 33, 50} {
			for _, extra := range []int{0, 1} { // input width 2*ow or 2*ow+1
				for _, withPos := range []bool{true, false} {
					t.Run(fmt.Sprintf("%v/ow%d/w%d/pos=%v", dt, ow, 2*ow+extra, withPos), func(t *testing.T) {
						oh, w := 3, 2*ow+extra
						s := device.NewPoolShape(2, 1, 2*oh+extra, w, 2, 2, 0)
						hw, ohw := s.H*s.W, s.OH*s.OW
						rng := rand.New(rand.NewPCG(uint64(ow), uint64(extra)))
						xb := d.buf(d.Alloc(dt, 2*hw, device.Temp), "test")
						yb := d.buf(d.Alloc(dt, 2*ohw, device.Temp), "test")
						var pb *Buffer
						if withPos {
							pb = d.buf(d.Alloc(dtype.F16, 2*ohw, device.Temp), "test")
						}
						d.CopyFromHost(xb, poolValues(rng, 2*hw))
						xs := make([]float32, 2*hw) // what the Go loop sees
						d.CopyToHost(xs, xb)
						for p := range 2 {
							if !maxPoolSIMD(yb, pb, xb, p, s) {
								t.Fatalf("maxPoolSIMD(%v, %+v) declined", dt, s)
							}
							y, pos := make([]float32, ohw), make([]float32, ohw)
							maxPool2x2(y, pos, xs[p*hw:(p+1)*hw], w, oh, ow)
							for o := range ohw {
								k := int(pos[o])
								j := p*hw + (2*(o/ow)+k>>1)*w + 2*(o%ow) + k&1
								if got, want := rawBits(yb, p*ohw+o), rawBits(xb, j); got != want {
									t.Errorf("plane %d y[%d]: AVX-512 stored %#x, Go picks x[%d] = %v (%#x)", p, o, got, j, xs[j], want)
								}
								if withPos && pb.u16[p*ohw+o] != dtype.F32ToF16(pos[o]) {
									t.Errorf("plane %d pos[%d]: AVX-512 %#04x, Go %v", p, o, pb.u16[p*ohw+o], pos[o])
								}
							}
						}
					})
				}
			}
		}
	}
}

// rawBits is element i of b's storage.
func rawBits(b *Buffer, i int) uint32 {
	if b.dt == dtype.F32 {
		return math.Float32bits(b.f32[i])
	}
	return uint32(b.u16[i])
}

// TestRowsSIMD checks the AVX-512 row copies (stride 1 and 2) and additions
// against the Go loops bit for bit, for row lengths on both sides of the
// 16- and 32-lane steps, with the elements around each row left untouched
// and, at stride 2, the source ending at the last element read.
func TestRowsSIMD(t *testing.T) {
	if !simdConv {
		t.Skip("no AVX-512 on this CPU: only the Go loops run")
	}
	for _, n := range []int{0, 1, 5, 15, 16, 17, 24, 31, 32, 33, 47, 64, 70} {
		for _, rows := range []int{1, 3} {
			ds, ss := n+3, n+7 // addRows writes from offset 3 of each dst row
			rng := rand.New(rand.NewPCG(uint64(n), uint64(rows)))
			src := poolValues(rng, rows*ss)
			dst0 := poolValues(rng, rows*ds)
			src16, dst16 := make([]uint16, len(src)), make([]uint16, len(dst0))
			for i := range src16 {
				src16[i] = uint16(rng.Uint32())
			}
			for i := range dst16 {
				dst16[i] = uint16(rng.Uint32())
			}
			t.Run(fmt.Sprintf("n%d/rows%d", n, rows), func(t *testing.T) {
				var f32 [3][2][]float32
				var u16 [2][2][]uint16
				// The stride-2 copies read rows of 2n-1 elements, 2n+1
				// apart, the last one ending src.
				ss2 := 2*n + 1
				src2, src216 := poolValues(rng, max(0, (rows-1)*ss2+2*n-1)), make([]uint16, max(0, (rows-1)*ss2+2*n-1))
				for i := range src216 {
					src216[i] = uint16(rng.Uint32())
				}
				for i, on := range []bool{true, false} {
					withSIMDConv(on, func() {
						f32[0][i] = append([]float32(nil), dst0...)
						copyRowsF32(f32[0][i], src, n, rows, ds, ss)
						f32[1][i] = append([]float32(nil), dst0...)
						addRows(f32[1][i], src, 3, n, rows, ds, ss)
						f32[2][i] = append([]float32(nil), dst0...)
						copyStride2F32(f32[2][i], src2, n, rows, ds, ss2)
						u16[0][i] = append([]uint16(nil), dst16...)
						copyRowsU16(u16[0][i], src16, n, rows, ds, ss)
						u16[1][i] = append([]uint16(nil), dst16...)
						copyStride2U16(u16[1][i], src216, n, rows, ds, ss2)
					})
				}
				for k, name := range []string{"copyRowsF32", "addRows", "copyStride2F32"} {
					for j := range f32[k][0] {
						a, b := f32[k][0][j], f32[k][1][j]
						if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
							t.Errorf("%s [%d]: AVX-512 %v, Go %v", name, j, a, b)
						}
					}
				}
				for k, name := range []string{"copyRowsU16", "copyStride2U16"} {
					for j := range u16[k][0] {
						if u16[k][0][j] != u16[k][1][j] {
							t.Errorf("%s [%d]: AVX-512 %#04x, Go %#04x", name, j, u16[k][0][j], u16[k][1][j])
						}
					}
				}
			})
		}
	}
}

// TestCol2ImSIMD checks Col2Im's AVX-512 paths (rows summed in registers
// for widths up to 64, row blocks added in memory beyond) against its Go
// loops bit for bit, on values with NaNs, infinities and zeros of both
// signs, for paddings, strides across and chunks of images.
func TestCol2ImSIMD(t *testing.T) {
	if !simdConv {
		t.Skip("no AVX-512 on this CPU: only the Go loops run")
	}
	sub := device.NewConvShape(3, 2, 9, 9, 3, 3, 1, 1)
	sub.N0, sub.NB = 1, 2
	rect := device.ConvShape{N: 1, C: 2, H: 9, W: 17, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 1}
	rect.OH, rect.OW, rect.NB = (9+2-3)/2+1, (17+2-2)+1, 1
	for _, s := range []device.ConvShape{
		device.NewConvShape(2, 3, 26, 26, 3, 3, 1, 0),
		device.NewConvShape(1, 2, 32, 32, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 8, 8, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 5, 64, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 5, 70, 3, 3, 1, 1), // wider than the registers hold
		device.NewConvShape(1, 2, 9, 9, 5, 5, 1, 2),
		device.NewConvShape(1, 2, 7, 7, 1, 1, 1, 0),
		sub, rect,
	} {
		t.Run(fmt.Sprintf("%dx%d/k%dx%d/s%d,%d/p%d,%d/n%d+%d", s.H, s.W, s.KH, s.KW, s.StrideH, s.StrideW, s.PadH, s.PadW, s.N0, s.NB), func(t *testing.T) {
			d := New()
			rng := rand.New(rand.NewPCG(uint64(s.W), uint64(s.H)))
			n := s.NB * s.C * s.KH * s.KW * s.OH * s.OW
			col := d.buf(d.Alloc(dtype.F32, n, device.Temp), "test")
			d.CopyFromHost(col, optimValues(rng, n)) // many magnitudes: the order of the sums shows
			var got [2][]float32
			for i, on := range []bool{true, false} {
				dx := d.buf(d.Alloc(dtype.F32, s.N*s.C*s.H*s.W, device.Temp), "test")
				withSIMDConv(on, func() { d.Col2Im(dx, col, s) })
				got[i] = dx.f32
			}
			lo := s.N0 * s.C * s.H * s.W
			for j := lo; j < lo+s.NB*s.C*s.H*s.W; j++ {
				a, b := got[0][j], got[1][j]
				if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
					t.Errorf("dx[%d]: AVX-512 %v (%#08x), Go %v (%#08x)", j, a, math.Float32bits(a), b, math.Float32bits(b))
				}
			}
		})
	}
}

// TestMaxPoolGrad2x2SIMD checks the AVX-512 2x2 pooling gradient against
// the Go loops bit for bit in each storage dtype (dy with NaNs and zeros of
// both signs; odd widths and heights, whose last column and row no window
// covers; dx pre-filled with garbage it must overwrite), and that a
// position none of 0-3 panics.
func TestMaxPoolGrad2x2SIMD(t *testing.T) {
	if !simdConv {
		t.Skip("no AVX-512 on this CPU: only the Go loops run")
	}
	d := New()
	for _, dt := range dtype.All {
		for _, ow := range []int{1, 5, 12, 16, 17, 33} {
			for _, extra := range []int{0, 1} {
				t.Run(fmt.Sprintf("%v/ow%d/odd=%d", dt, ow, extra), func(t *testing.T) {
					oh := 3
					s := device.NewPoolShape(2, 1, 2*oh+extra, 2*ow+extra, 2, 2, 0)
					hw, ohw := s.H*s.W, s.OH*s.OW
					rng := rand.New(rand.NewPCG(uint64(ow), uint64(extra)+9))
					dy := d.buf(d.Alloc(dt, 2*ohw, device.Temp), "test")
					d.CopyFromHost(dy, poolValues(rng, 2*ohw))
					pos := d.buf(d.Alloc(dtype.F16, 2*ohw, device.Temp), "test")
					ps := make([]float32, 2*ohw)
					for i := range ps {
						ps[i] = float32(rng.IntN(4))
					}
					d.CopyFromHost(pos, ps)
					var got [2][]float32
					for i, on := range []bool{true, false} {
						dx := d.buf(d.Alloc(dt, 2*hw, device.Temp), "test")
						d.Fill(dx, float32(math.NaN()))
						withSIMDConv(on, func() { d.MaxPoolGrad(dx, dy, pos, s) })
						got[i] = make([]float32, 2*hw)
						d.CopyToHost(got[i], dx)
					}
					for j := range got[0] {
						a, b := got[0][j], got[1][j]
						if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
							t.Errorf("dx[%d]: AVX-512 %v (%#08x), Go %v (%#08x)", j, a, math.Float32bits(a), b, math.Float32bits(b))
						}
					}
					ps[len(ps)/2] = 4
					d.CopyFromHost(pos, ps)
					dx := d.Alloc(dt, 2*hw, device.Temp)
					defer func() {
						if recover() == nil {
							t.Errorf("MaxPoolGrad with a position of 4 in a 2x2 window did not panic")
						}
					}()
					d.MaxPoolGrad(dx, dy, pos, s)
				})
			}
		}
	}
}
