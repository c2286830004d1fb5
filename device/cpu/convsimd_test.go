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
// signs), infinities, NaNs of both signs (quiet and signalling) and
// subnormals (of float32, and of F16), which decide which element a window
// picks.
func poolValues(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		switch rng.IntN(16) {
		case 0:
			out[i] = math.Float32frombits(0x7fc00000)
		case 1:
			out[i] = math.Float32frombits(0xffc00000)
		case 2:
			out[i] = float32(math.Copysign(0, -1))
		case 3:
			out[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
		case 4:
			out[i] = math.Float32frombits(0x7fa00000 | uint32(rng.IntN(2))<<31) // signalling
		case 5:
			out[i] = float32(1-2*rng.IntN(2)) * 1e-41
		case 6:
			out[i] = float32(1-2*rng.IntN(2)) * 3e-6
		default:
			out[i] = float32(rng.IntN(5) - 2)
		}
	}
	return out
}

// withConvLevel runs f with the loops of convsimd_amd64.s at level l.
func withConvLevel(l simdLevel, f func()) {
	old := simdConvLevel
	simdConvLevel = l
	defer func() { simdConvLevel = old }()
	f()
}

// convLevels are the levels a conv test checks: the Go loops, then every
// SIMD level this CPU runs.
func convLevels(t *testing.T) []simdLevel {
	ls := levelsUpTo(simdConvLevel)
	if len(ls) == 1 {
		t.Log("no AVX2 on this CPU: only the Go loops run")
	}
	return ls
}

// poolDeclines reports whether maxPoolSIMD and maxPoolGradSIMD are meant
// to leave a 2x2 plane of ow windows a row to the Go loops at level l.
func poolDeclines(l simdLevel, ow int) bool {
	return l == simdGo || (l == simdAVX2 && ow < 8)
}

// checkMaxPool2x2 pools planes 1 and then 0 of x (3 planes of shape s,
// already stored) at the current level and checks them against the Go loop:
// the stored maximum must be the bits of the element the Go loop picks, and
// the position its F16 encoding; plane 2 of y and pos must stay untouched.
func checkMaxPool2x2(t *testing.T, d *Device, l simdLevel, xb *Buffer, s device.PoolShape, withPos bool) {
	t.Helper()
	dt := xb.dt
	hw, ohw := s.H*s.W, s.OH*s.OW
	yb := d.buf(d.Alloc(dt, 3*ohw, device.Temp), "test")
	var pb *Buffer
	if withPos {
		pb = d.buf(d.Alloc(dtype.F16, 3*ohw, device.Temp), "test")
		for i := range pb.u16 {
			pb.u16[i] = 0x7e55
		}
	}
	if dt == dtype.F32 {
		for i := range yb.f32 {
			yb.f32[i] = math.Float32frombits(0x7fc0dead)
		}
	} else {
		for i := range yb.u16 {
			yb.u16[i] = 0x7e55
		}
	}
	xs := make([]float32, 3*hw) // what the Go loop sees
	d.CopyToHost(xs, xb)
	for _, p := range []int{1, 0} {
		if !maxPoolSIMD(yb, pb, xb, p, s) {
			if poolDeclines(l, s.OW) {
				return
			}
			t.Fatalf("%v: maxPoolSIMD(%v, %+v) declined", l, dt, s)
		}
		if poolDeclines(l, s.OW) {
			t.Fatalf("%v: maxPoolSIMD(%v, %+v) ran", l, dt, s)
		}
	}
	for p := range 2 {
		y, pos := make([]float32, ohw), make([]float32, ohw)
		maxPool2x2(y, pos, xs[p*hw:(p+1)*hw], s.W, s.OH, s.OW)
		for o := range ohw {
			k := int(pos[o])
			j := p*hw + (2*(o/s.OW)+k>>1)*s.W + 2*(o%s.OW) + k&1
			if got, want := rawBits(yb, p*ohw+o), rawBits(xb, j); got != want {
				t.Fatalf("%v plane %d y[%d]: stored %#x, Go picks x[%d] = %v (%#x)", l, p, o, got, j, xs[j], want)
			}
			if withPos && pb.u16[p*ohw+o] != dtype.F32ToF16(pos[o]) {
				t.Fatalf("%v plane %d pos[%d]: %#04x, Go %v", l, p, o, pb.u16[p*ohw+o], pos[o])
			}
		}
	}
	for o := 2 * ohw; o < 3*ohw; o++ {
		if g := rawBits(yb, o); g != 0x7fc0dead && g != 0x7e55 {
			t.Fatalf("%v: y[%d] outside the planes pooled was written: %#x", l, o, g)
		}
		if withPos && pb.u16[o] != 0x7e55 {
			t.Fatalf("%v: pos[%d] outside the planes pooled was written: %#x", l, o, pb.u16[o])
		}
	}
}

// TestMaxPool2x2SIMD checks the 2x2 pooling of each storage dtype at every
// SIMD level against the Go loop, for row lengths around the 8- and
// 16-window steps and odd input widths, with and without positions.
func TestMaxPool2x2SIMD(t *testing.T) {
	d := New()
	for _, l := range convLevels(t) {
		withConvLevel(l, func() {
			for _, dt := range dtype.All {
				for _, ow := range []int{1, 2, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 31, 32, 33, 50} {
					for _, extra := range []int{0, 1} { // input width 2*ow or 2*ow+1
						for _, withPos := range []bool{true, false} {
							t.Run(fmt.Sprintf("%v/%v/ow%d/w%d/pos=%v", l, dt, ow, 2*ow+extra, withPos), func(t *testing.T) {
								s := device.NewPoolShape(3, 1, 6+extra, 2*ow+extra, 2, 2, 0)
								rng := rand.New(rand.NewPCG(uint64(ow), uint64(extra)))
								xb := d.buf(d.Alloc(dt, 3*s.H*s.W, device.Temp), "test")
								d.CopyFromHost(xb, poolValues(rng, 3*s.H*s.W))
								checkMaxPool2x2(t, d, l, xb, s, withPos)
							})
						}
					}
				}
			}
		})
	}
}

// TestMaxPool2x2SIMDAllPatterns pools planes holding every 16-bit pattern
// (each of F16 and BF16; shuffled, so that each meets many others in its
// windows, and again sorted, so that neighbours are close) at every SIMD
// level against the Go loop.
func TestMaxPool2x2SIMDAllPatterns(t *testing.T) {
	d := New()
	rng := rand.New(rand.NewPCG(3, 5))
	s := device.NewPoolShape(3, 1, 256, 256, 2, 2, 0)
	for _, l := range convLevels(t) {
		withConvLevel(l, func() {
			for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
				for _, order := range []string{"shuffled", "sorted"} {
					xb := d.buf(d.Alloc(dt, 3*s.H*s.W, device.Temp), "test")
					for p := range 3 {
						plane := xb.u16[p*65536 : (p+1)*65536]
						for i := range plane {
							plane[i] = uint16(i)
						}
						if order == "shuffled" {
							rng.Shuffle(len(plane), func(i, j int) { plane[i], plane[j] = plane[j], plane[i] })
						}
					}
					t.Run(fmt.Sprintf("%v/%v/%s", l, dt, order), func(t *testing.T) {
						checkMaxPool2x2(t, d, l, xb, s, true)
					})
				}
			}
		})
	}
}

// sameF32 compares a float32 result of level l with the Go loops': bit for
// bit, except that the AVX-512 loops (checked so since before the AVX2
// ones) may give a NaN of the other operand's payload where both operands
// of an addition are NaNs.
func sameF32(l simdLevel, a, b uint32) bool {
	nan := func(v uint32) bool { return v&0x7fffffff > 0x7f800000 }
	return a == b || (l == simdAVX512 && nan(a) && nan(b))
}

// rawBits is element i of b's storage.
func rawBits(b *Buffer, i int) uint32 {
	if b.dt == dtype.F32 {
		return math.Float32bits(b.f32[i])
	}
	return uint32(b.u16[i])
}

// TestRowsSIMD checks the row copies (stride 1 and 2) and additions at
// every SIMD level against the Go loops bit for bit, for row lengths on
// both sides of each step and move size, additions at several offsets,
// with the elements around each row left untouched and, at stride 2, the
// source ending at the last element read.
func TestRowsSIMD(t *testing.T) {
	levels := convLevels(t)
	for _, n := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 47, 64, 70} {
		for _, rows := range []int{1, 3} {
			for _, off := range []int{0, 1, 3, 7, 8, 9} {
				ds, ss := n+off+2, n+7 // addRows writes from offset off of each dst row
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
				// The stride-2 copies read rows of 2n-1 elements, 2n+1
				// apart, the last one ending src.
				ss2 := 2*n + 1
				src2, src216 := poolValues(rng, max(0, (rows-1)*ss2+2*n-1)), make([]uint16, max(0, (rows-1)*ss2+2*n-1))
				for i := range src216 {
					src216[i] = uint16(rng.Uint32())
				}
				t.Run(fmt.Sprintf("n%d/rows%d/off%d", n, rows, off), func(t *testing.T) {
					var f32 [3][][]float32
					var u16 [2][][]uint16
					for _, l := range levels {
						withConvLevel(l, func() {
							a := append([]float32(nil), dst0...)
							copyRowsF32(a, src, n, rows, ds, ss)
							f32[0] = append(f32[0], a)
							a = append([]float32(nil), dst0...)
							addRows(a, src, off, n, rows, ds, ss)
							f32[1] = append(f32[1], a)
							a = append([]float32(nil), dst0...)
							copyStride2F32(a, src2, n, rows, ds, ss2)
							f32[2] = append(f32[2], a)
							b := append([]uint16(nil), dst16...)
							copyRowsU16(b, src16, n, rows, ds, ss)
							u16[0] = append(u16[0], b)
							b = append([]uint16(nil), dst16...)
							copyStride2U16(b, src216, n, rows, ds, ss2)
							u16[1] = append(u16[1], b)
						})
					}
					for li, l := range levels[1:] {
						for k, name := range []string{"copyRowsF32", "addRows", "copyStride2F32"} {
							for j, b := range f32[k][0] {
								a := f32[k][li+1][j]
								if !sameF32(l, math.Float32bits(a), math.Float32bits(b)) {
									t.Errorf("%v %s [%d]: %v (%#08x), Go %v (%#08x)", l, name, j, a, math.Float32bits(a), b, math.Float32bits(b))
								}
							}
						}
						for k, name := range []string{"copyRowsU16", "copyStride2U16"} {
							for j, b := range u16[k][0] {
								if a := u16[k][li+1][j]; a != b {
									t.Errorf("%v %s [%d]: %#04x, Go %#04x", l, name, j, a, b)
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestCol2ImSIMD checks Col2Im's SIMD paths (rows summed in registers for
// widths up to 64, row blocks added in memory beyond) at every level
// against its Go loops bit for bit, on values with NaNs, infinities and
// zeros of both signs, for every width up to 64 (so that each lane starts
// and ends a run), paddings, strides across and chunks of images.
func TestCol2ImSIMD(t *testing.T) {
	levels := convLevels(t)
	sub := device.NewConvShape(3, 2, 9, 9, 3, 3, 1, 1)
	sub.N0, sub.NB = 1, 2
	rect := device.ConvShape{N: 1, C: 2, H: 9, W: 17, KH: 3, KW: 2, StrideH: 2, StrideW: 1, PadH: 1, PadW: 1}
	rect.OH, rect.OW, rect.NB = (9+2-3)/2+1, (17+2-2)+1, 1
	shapes := []device.ConvShape{
		device.NewConvShape(2, 3, 26, 26, 3, 3, 1, 0),
		device.NewConvShape(2, 3, 28, 28, 3, 3, 1, 0),
		device.NewConvShape(1, 2, 32, 32, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 16, 16, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 8, 8, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 3, 3, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 5, 33, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 5, 40, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 5, 64, 3, 3, 1, 1),
		device.NewConvShape(1, 2, 5, 70, 3, 3, 1, 1), // wider than the registers hold
		device.NewConvShape(1, 2, 9, 9, 5, 5, 1, 2),
		device.NewConvShape(1, 2, 7, 7, 1, 1, 1, 0),
		sub, rect,
	}
	for w := 1; w <= 64; w++ { // every lane boundary of the register rows
		shapes = append(shapes, device.NewConvShape(1, 1, 3, w, 3, 3, 1, 1))
	}
	for _, s := range shapes {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			t.Run(fmt.Sprintf("%v/%dx%d/k%dx%d/s%d,%d/p%d,%d/n%d+%d", dt, s.H, s.W, s.KH, s.KW, s.StrideH, s.StrideW, s.PadH, s.PadW, s.N0, s.NB), func(t *testing.T) {
				d := New()
				rng := rand.New(rand.NewPCG(uint64(s.W), uint64(s.H)))
				n := s.NB * s.C * s.KH * s.KW * s.OH * s.OW
				col := d.buf(d.Alloc(dt, n, device.Temp), "test")
				d.CopyFromHost(col, optimValues(rng, n)) // many magnitudes: the order of the sums shows
				var got [][]float32
				for _, l := range levels {
					dx := d.buf(d.Alloc(dt, s.N*s.C*s.H*s.W, device.Temp), "test")
					d.Fill(dx, float32(math.NaN()))
					withConvLevel(l, func() { d.Col2Im(dx, col, s) })
					g := make([]float32, s.N*s.C*s.H*s.W)
					d.CopyToHost(g, dx)
					got = append(got, g)
				}
				for li, l := range levels[1:] {
					for j, b := range got[0] {
						a := got[li+1][j]
						if !sameF32(l, math.Float32bits(a), math.Float32bits(b)) {
							t.Fatalf("%v dx[%d]: %v (%#08x), Go %v (%#08x)", l, j, a, math.Float32bits(a), b, math.Float32bits(b))
						}
					}
				}
			})
		}
	}
}

// TestMaxPoolGrad2x2SIMD checks the 2x2 pooling gradient at every SIMD
// level against the Go loops bit for bit in each storage dtype (dy with
// NaNs and zeros of both signs, in 16 bits every pattern; odd widths and
// heights, whose last column and row no window covers; dx pre-filled with
// garbage it must overwrite), and that a position none of 0-3 panics.
func TestMaxPoolGrad2x2SIMD(t *testing.T) {
	d := New()
	levels := convLevels(t)
	for _, dt := range dtype.All {
		for _, ow := range []int{1, 5, 7, 8, 9, 12, 15, 16, 17, 24, 33} {
			for _, extra := range []int{0, 1} {
				t.Run(fmt.Sprintf("%v/ow%d/odd=%d", dt, ow, extra), func(t *testing.T) {
					oh := 3
					if dt != dtype.F32 {
						oh = (65536 + ow - 1) / ow // every 16-bit dy
					}
					s := device.NewPoolShape(2, 1, 2*oh+extra, 2*ow+extra, 2, 2, 0)
					hw, ohw := s.H*s.W, s.OH*s.OW
					rng := rand.New(rand.NewPCG(uint64(ow), uint64(extra)+9))
					dy := d.buf(d.Alloc(dt, 2*ohw, device.Temp), "test")
					if dt == dtype.F32 {
						d.CopyFromHost(dy, poolValues(rng, 2*ohw))
					} else {
						for i := range dy.u16 {
							dy.u16[i] = uint16(i)
						}
						rng.Shuffle(len(dy.u16), func(i, j int) { dy.u16[i], dy.u16[j] = dy.u16[j], dy.u16[i] })
					}
					pos := d.buf(d.Alloc(dtype.F16, 2*ohw, device.Temp), "test")
					ps := make([]float32, 2*ohw)
					for i := range ps {
						ps[i] = float32(rng.IntN(4))
					}
					d.CopyFromHost(pos, ps)
					var got [][]uint32
					for _, l := range levels {
						dx := d.buf(d.Alloc(dt, 2*hw, device.Temp), "test")
						d.Fill(dx, float32(math.NaN()))
						withConvLevel(l, func() { d.MaxPoolGrad(dx, dy, pos, s) })
						g := make([]uint32, 2*hw)
						for j := range g {
							g[j] = rawBits(dx, j)
						}
						got = append(got, g)
					}
					for li, l := range levels[1:] {
						for j, b := range got[0] {
							if a := got[li+1][j]; a != b && !(dt == dtype.F32 && sameF32(l, a, b)) {
								t.Fatalf("%v dx[%d]: %#08x, Go %#08x", l, j, a, b)
							}
						}
					}
					// A bad position panics (on a plane small enough that the
					// panic comes in this goroutine).
					s = device.NewPoolShape(2, 1, 6+extra, 2*ow+extra, 2, 2, 0)
					hw, ohw = s.H*s.W, s.OH*s.OW
					dy = d.buf(d.Alloc(dt, 2*ohw, device.Temp), "test")
					d.CopyFromHost(dy, poolValues(rng, 2*ohw))
					pos = d.buf(d.Alloc(dtype.F16, 2*ohw, device.Temp), "test")
					ps = ps[:2*ohw]
					for _, l := range levels {
						for _, bad := range []float32{4, 0.5, -1, float32(math.NaN())} {
							ps[len(ps)/2] = bad
							d.CopyFromHost(pos, ps)
							dx := d.Alloc(dt, 2*hw, device.Temp)
							func() {
								defer func() {
									if recover() == nil {
										t.Errorf("%v: MaxPoolGrad with a position of %v in a 2x2 window did not panic", l, bad)
									}
								}()
								withConvLevel(l, func() { d.MaxPoolGrad(dx, dy, pos, s) })
							}()
							d.Free(dx)
						}
						ps[len(ps)/2] = 0
					}
				})
			}
		}
	}
}

// BenchmarkConvSIMD times the loops of convsimd_amd64.s at each level on
// the MNIST CNN's shapes (a plane each): pooling 24x24 to 12x12 and its
// gradient, Im2Col's row copies of 26x26 into 24 columns, Col2Im of 24x24
// (3x3, 64 channels' worth of col) into 26x26.
func BenchmarkConvSIMD(b *testing.B) {
	d := New()
	for _, l := range levelsUpTo(simdConvLevel) {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			s := device.NewPoolShape(64, 1, 24, 24, 2, 2, 0)
			hw, ohw := s.H*s.W, s.OH*s.OW
			rng := rand.New(rand.NewPCG(1, 2))
			x := d.buf(d.Alloc(dt, 64*hw, device.Temp), "bench")
			d.CopyFromHost(x, poolValues(rng, 64*hw))
			y := d.buf(d.Alloc(dt, 64*ohw, device.Temp), "bench")
			pos := d.buf(d.Alloc(dtype.F16, 64*ohw, device.Temp), "bench")
			dx := d.buf(d.Alloc(dt, 64*hw, device.Temp), "bench")
			b.Run(fmt.Sprintf("MaxPool/%v/%v", dt, l), func(b *testing.B) {
				withConvLevel(l, func() {
					for b.Loop() {
						d.MaxPool(y, pos, x, s)
					}
				})
			})
			b.Run(fmt.Sprintf("MaxPoolGrad/%v/%v", dt, l), func(b *testing.B) {
				withConvLevel(l, func() {
					for b.Loop() {
						d.MaxPoolGrad(dx, y, pos, s)
					}
				})
			})
			cs := device.NewConvShape(64, 1, 26, 26, 3, 3, 1, 0)
			img := d.buf(d.Alloc(dt, 64*26*26, device.Temp), "bench")
			d.CopyFromHost(img, poolValues(rng, 64*26*26))
			col := d.buf(d.Alloc(dt, 64*9*24*24, device.Temp), "bench")
			b.Run(fmt.Sprintf("Im2Col/%v/%v", dt, l), func(b *testing.B) {
				withConvLevel(l, func() {
					for b.Loop() {
						d.Im2Col(col, img, cs)
					}
				})
			})
			b.Run(fmt.Sprintf("Col2Im/%v/%v", dt, l), func(b *testing.B) {
				withConvLevel(l, func() {
					for b.Loop() {
						d.Col2Im(img, col, cs)
					}
				})
			})
		}
	}
}

// BenchmarkRowLoopsSIMD times the row helpers at each level on the MNIST
// CNN's second convolution: 24 rows of 24 columns out of 26-wide planes,
// at offsets 0-2 (Col2Im's taps), and the stride-2 copy of a ResNet
// downsampling layer (16 of 32).
func BenchmarkRowLoopsSIMD(b *testing.B) {
	const w, n, rows = 26, 24, 24
	plane := make([]float32, w*rows+2)
	src := poolValues(rand.New(rand.NewPCG(1, 1)), n*rows)
	plane16, src16 := make([]uint16, len(plane)), make([]uint16, len(src))
	big := poolValues(rand.New(rand.NewPCG(1, 2)), 32*32)
	for _, l := range levelsUpTo(simdConvLevel) {
		withConvLevel(l, func() {
			b.Run("addRows/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					for off := range 3 {
						addRows(plane, src, off, n, rows, w, n)
					}
				}
			})
			b.Run("copyRowsF32/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					for off := range 3 {
						copyRowsF32(src, plane[off:], n, rows, n, w)
					}
				}
			})
			b.Run("copyRowsU16/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					for off := range 3 {
						copyRowsU16(src16, plane16[off:], n, rows, n, w)
					}
				}
			})
			b.Run("copyStride2F32/"+l.String(), func(b *testing.B) {
				for b.Loop() {
					copyStride2F32(src, big, 16, 16, 16, 64)
				}
			})
		})
	}
}
