package cudaops

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// fakeGPU is a gpu without a GPU: device memory is host memory, cuBLAS is
// a plain column-major GEMM, and every kernel is emulated by a Go
// transliteration of its CUDA source, reading its arguments by position
// from the bytes Device.launch packed, as the GPU would. It lets the whole
// Go side (argument order and layout, index math, the allocator,
// accounting, the row-major to column-major GEMM mapping) and the kernels'
// algorithms run through the conformance suite on any machine. What it
// cannot check is the CUDA code itself compiling to what it says; the
// tests on a GPU do that.
type fakeGPU struct {
	blocks   map[uint64][]byte
	bases    []uint64 // sorted
	next     uint64
	limit    int64 // bytes the fake may hold; 0 means no limit
	used     int64
	allocs   int
	frees    int
	launches map[string]int
	gemms    int
}

const fakeBase = 0x7f00_0000_0000

func newFakeGPU() *fakeGPU {
	return &fakeGPU{blocks: map[uint64][]byte{}, next: fakeBase, launches: map[string]int{}}
}

// newFakeDevice is a Device on a fakeGPU, with the compute_80 kernels.
func newFakeDevice(opts Options) (*Device, *fakeGPU) {
	g := newFakeGPU()
	ks, err := newKernelSet(ptxSM80)
	if err != nil {
		panic(err)
	}
	info := Info{Name: "fake", Major: 8, PTX: "compute_80", Options: opts}
	d, err := newDevice(g, ks, info, opts)
	if err != nil {
		panic(err)
	}
	return d, g
}

func (g *fakeGPU) enter() error { return nil }
func (g *fakeGPU) leave()       {}

func (g *fakeGPU) memAlloc(bytes int64) (uint64, error) {
	if g.limit > 0 && g.used+bytes > g.limit {
		return 0, &cuError{call: "cuMemAlloc", code: cudaErrorOutOfMemory, name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	b := make([]byte, bytes)
	for i := range b {
		b[i] = 0xff // new device memory is garbage, and NaN shows it
	}
	p := g.next
	g.next += uint64(bytes+511)&^255 + 256 // a gap catches overruns
	g.blocks[p] = b
	g.bases = append(g.bases, p)
	g.used += bytes
	g.allocs++
	return p, nil
}

func (g *fakeGPU) memFree(p uint64) error {
	b, ok := g.blocks[p]
	if !ok {
		return fmt.Errorf("cuMemFree of %#x, which is not an allocation", p)
	}
	g.used -= int64(len(b))
	delete(g.blocks, p)
	i := sort.Search(len(g.bases), func(i int) bool { return g.bases[i] >= p })
	g.bases = append(g.bases[:i], g.bases[i+1:]...)
	g.frees++
	return nil
}

// mem returns the n bytes at address p, panicking (as a GPU would fault,
// or worse, not) when they are not inside one allocation.
func (g *fakeGPU) mem(p uint64, n int64) []byte {
	i := sort.Search(len(g.bases), func(i int) bool { return g.bases[i] > p }) - 1
	if i < 0 || p == 0 {
		panic(fmt.Sprintf("fake GPU: access of %d bytes at %#x outside any allocation", n, p))
	}
	base := g.bases[i]
	b := g.blocks[base]
	off := int64(p - base)
	if n < 0 || off+n > int64(len(b)) {
		panic(fmt.Sprintf("fake GPU: access of %d bytes at %#x overruns the allocation of %d bytes at %#x", n, p, len(b), base))
	}
	return b[off : off+n]
}

func (g *fakeGPU) htod(dst uint64, src unsafe.Pointer, n int64) error {
	copy(g.mem(dst, n), unsafe.Slice((*byte)(src), n))
	return nil
}

func (g *fakeGPU) dtoh(dst unsafe.Pointer, src uint64, n int64) error {
	copy(unsafe.Slice((*byte)(dst), n), g.mem(src, n))
	return nil
}

func (g *fakeGPU) dtod(dst, src uint64, n int64) error {
	copy(g.mem(dst, n), g.mem(src, n))
	return nil
}

func (g *fakeGPU) memsetD8(dst uint64, v byte, n int64) error {
	b := g.mem(dst, n)
	for i := range b {
		b[i] = v
	}
	return nil
}

func (g *fakeGPU) memsetD32(dst uint64, v uint32, n int64) error {
	b := g.mem(dst, 4*n)
	for i := int64(0); i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return nil
}

func (g *fakeGPU) sync() error { return nil }
func (g *fakeGPU) close()      {}

type fakeTimer struct{}

func (fakeTimer) start() error              { return nil }
func (fakeTimer) stop() error               { return nil }
func (fakeTimer) elapsed() (float32, error) { return 1, nil }
func (fakeTimer) close()                    {}

func (g *fakeGPU) newTimer() (timer, error) { return fakeTimer{}, nil }

// Element access with the kernels' dtype codes.

func (g *fakeGPU) ld(p uint64, dt, i int) float32 {
	if i < 0 {
		panic(fmt.Sprintf("fake GPU: negative index %d", i))
	}
	switch dt {
	case 0:
		return math.Float32frombits(binary.LittleEndian.Uint32(g.mem(p+4*uint64(i), 4)))
	case 1:
		return dtype.F16ToF32(binary.LittleEndian.Uint16(g.mem(p+2*uint64(i), 2)))
	case 2:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(g.mem(p+2*uint64(i), 2))) << 16)
	}
	panic(fmt.Sprintf("fake GPU: dtype code %d", dt))
}

func (g *fakeGPU) st(p uint64, dt, i int, v float32) {
	if i < 0 {
		panic(fmt.Sprintf("fake GPU: negative index %d", i))
	}
	switch dt {
	case 0:
		binary.LittleEndian.PutUint32(g.mem(p+4*uint64(i), 4), math.Float32bits(v))
	case 1:
		binary.LittleEndian.PutUint16(g.mem(p+2*uint64(i), 2), dtype.F32ToF16(v))
	case 2:
		binary.LittleEndian.PutUint16(g.mem(p+2*uint64(i), 2), f32ToBF16Bits(v))
	default:
		panic(fmt.Sprintf("fake GPU: dtype code %d", dt))
	}
}

// bnDz is norm.cu's bn_dz: dy, or with relu dy where y > 0 (or NaN), else 0.
func bnDz(g *fakeGPU, dy uint64, gdt int, y uint64, ydt, j int, relu bool) float32 {
	if relu && g.ld(y, ydt, j) <= 0 {
		return 0
	}
	return g.ld(dy, gdt, j)
}

// f32ToBF16Bits is common.cuh's f32_to_bf16.
func f32ToBF16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

func (g *fakeGPU) ldi(p uint64, i int) int32 {
	return int32(binary.LittleEndian.Uint32(g.mem(p+4*uint64(i), 4)))
}

func (g *fakeGPU) sti(p uint64, i int, v int32) {
	binary.LittleEndian.PutUint32(g.mem(p+4*uint64(i), 4), uint32(v))
}

// argv reads a launch's arguments in order, each checked against the size
// the PTX declares.
type argv struct {
	k  *kernel
	ps []unsafe.Pointer
	i  int
}

func (a *argv) next(size int) []byte {
	if a.i >= len(a.ps) {
		panic(fmt.Sprintf("fake GPU: %s: reading argument %d of %d", a.k.name, a.i, len(a.ps)))
	}
	if a.k.params[a.i] != size {
		panic(fmt.Sprintf("fake GPU: %s: argument %d read as %d bytes, declared %d", a.k.name, a.i, size, a.k.params[a.i]))
	}
	b := unsafe.Slice((*byte)(a.ps[a.i]), size)
	a.i++
	return b
}

func (a *argv) ptr() uint64  { return binary.LittleEndian.Uint64(a.next(8)) }
func (a *argv) u64() uint64  { return binary.LittleEndian.Uint64(a.next(8)) }
func (a *argv) int() int     { return int(int32(binary.LittleEndian.Uint32(a.next(4)))) }
func (a *argv) f32() float32 { return math.Float32frombits(binary.LittleEndian.Uint32(a.next(4))) }
func (a *argv) ints(n int) []int {
	b := a.next(4 * n)
	v := make([]int, n)
	for i := range v {
		v[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return v
}

// emuDims is common.cuh's Dims.
type emuDims struct {
	nd           int
	size, sa, sb []int
}

func (a *argv) dims() emuDims {
	v := a.ints(1 + 3*maxDims)
	return emuDims{nd: v[0], size: v[1 : 1+maxDims], sa: v[1+maxDims : 1+2*maxDims], sb: v[1+2*maxDims:]}
}

// offsets is dims_offsets.
func (d emuDims) offsets(i int) (int, int) {
	a, b := 0, 0
	for k := maxDims - 1; k >= 0; k-- {
		if k < d.nd {
			n := d.size[k]
			q := i % n
			i /= n
			a += q * d.sa[k]
			b += q * d.sb[k]
		}
	}
	return a, b
}

func f32(x float64) float32 { return float32(x) }

func expf(x float32) float32 { return f32(math.Exp(float64(x))) }

func normcdff(x float32) float32 { return f32(0.5 * math.Erfc(-float64(x)/math.Sqrt2)) }

func isNaN(x float32) bool { return x != x }

func isFinite(x float32) bool { return math.Float32bits(x)&0x7f800000 != 0x7f800000 }

func nanMax(a, b float32) float32 {
	if isNaN(a) {
		return a
	}
	if isNaN(b) {
		return b
	}
	if a > b {
		return a
	}
	return b
}

// treeSum is block_sum over BLOCK partial sums.
func treeSum(v []float32) float32 {
	v = append([]float32(nil), v...)
	for s := len(v) / 2; s > 0; s >>= 1 {
		for t := 0; t < s; t++ {
			v[t] += v[t+s]
		}
	}
	return v[0]
}

// butterfly is the xor-shuffle reduction of 32 lanes with op; it returns
// every lane's result.
func butterfly(v []float32, op func(a, b float32) float32) []float32 {
	v = append([]float32(nil), v...)
	for m := 16; m > 0; m >>= 1 {
		w := make([]float32, 32)
		for l := range 32 {
			w[l] = op(v[l], v[l^m])
		}
		v = w
	}
	return v
}

func (g *fakeGPU) launch(k *kernel, grid int, ps []unsafe.Pointer) error {
	if grid < 1 || grid > maxGrid {
		return fmt.Errorf("launch of %s with %d blocks", k.name, grid)
	}
	g.launches[k.name]++
	a := &argv{k: k, ps: ps}
	run, ok := emulators[k.name]
	if !ok {
		return fmt.Errorf("fake GPU: no emulation of %s", k.name)
	}
	run(g, a, grid)
	if a.i != len(ps) {
		panic(fmt.Sprintf("fake GPU: %s: the emulation read %d of %d arguments", k.name, a.i, len(ps)))
	}
	return nil
}

// emulators transliterate the kernels of kernels/*.cu, in their order;
// the argument reads follow the CUDA signatures.
var emulators = map[string]func(g *fakeGPU, a *argv, grid int){
	// elementwise.cu
	"mp_fill": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, n, v := a.ptr(), a.int(), a.int(), a.f32()
		for i := range n {
			g.st(dst, ddt, i, v)
		}
	},
	"mp_copy": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, doff, dstride := a.ptr(), a.int(), a.int(), a.int()
		src, sdt, soff, sstride := a.ptr(), a.int(), a.int(), a.int()
		cnt, nb := a.int(), a.int()
		for i := range cnt * nb {
			b := i / cnt
			j := i - b*cnt
			g.st(dst, ddt, doff+b*dstride+j, g.ld(src, sdt, soff+b*sstride+j))
		}
	},
	"mp_gemm_scale": func(g *fakeGPU, a *argv, _ int) {
		c, cdt, off, stride, mn, nb, beta := a.ptr(), a.int(), a.int(), a.int(), a.int(), a.int(), a.f32()
		for i := range mn * nb {
			b := i / mn
			j := off + b*stride + (i - b*mn)
			if beta == 0 {
				g.st(c, cdt, j, 0)
			} else {
				g.st(c, cdt, j, beta*g.ld(c, cdt, j))
			}
		}
	},
	"mp_gemm_fold": func(g *fakeGPU, a *argv, _ int) {
		c, cdt, off, t, mn, nb, beta := a.ptr(), a.int(), a.int(), a.ptr(), a.int(), a.int(), a.f32()
		rnd := func(v float32) float32 { // gemm.cu's rnd
			switch cdt {
			case 1:
				return dtype.F16ToF32(dtype.F32ToF16(v))
			case 2:
				return math.Float32frombits(uint32(f32ToBF16Bits(v)) << 16)
			}
			return v
		}
		for i := range mn {
			var v float32
			if beta != 0 {
				v = g.ld(c, cdt, off+i)
			}
			for e := range nb {
				x := g.ld(t, 0, e*mn+i)
				if beta == 0 {
					v = rnd(x)
				} else {
					v = rnd(x + beta*v)
				}
			}
			g.st(c, cdt, off+i, v)
		}
	},
	"mp_gemm": func(g *fakeGPU, a *argv, _ int) {
		ta, tb, m, n, k, alpha := a.int(), a.int(), a.int(), a.int(), a.int(), a.f32()
		pa, adt, lda, sa := a.ptr(), a.int(), a.int(), a.int()
		pb, bdt, ldb, sb := a.ptr(), a.int(), a.int(), a.int()
		beta, pc, cdt, ldc, sc, nb := a.f32(), a.ptr(), a.int(), a.int(), a.int(), a.int()
		for idx := range m * n * nb {
			i, r := idx%m, idx/m
			j, e := r%n, r/n
			ao, bo := e*sa, e*sb
			var s float32
			for l := range k {
				ai, bi := ao+i+l*lda, bo+l+j*ldb
				if ta != 0 {
					ai = ao + l + i*lda
				}
				if tb != 0 {
					bi = bo + j + l*ldb
				}
				s = s + g.ld(pa, adt, ai)*g.ld(pb, bdt, bi)
			}
			ci := e*sc + i + j*ldc
			v := alpha * s
			if beta != 0 {
				v = v + beta*g.ld(pc, cdt, ci)
			}
			g.st(pc, cdt, ci, v)
		}
	},
	"mp_axpby": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, x, xdt, y, ydt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		n, alpha, beta := a.int(), a.f32(), a.f32()
		for i := range n {
			v := alpha * g.ld(x, xdt, i)
			if beta != 0 {
				v = v + beta*g.ld(y, ydt, i)
			}
			g.st(dst, ddt, i, v)
		}
	},
	// The elementwise ops' switches (ops.cuh) are generated from the rows
	// of device's op tables, whose Go functions these run: the kernels'
	// arguments and indexing are emulated, each op's CUDA text is not (the
	// conformance suite on a GPU holds it to the oracle).
	"mp_binary": func(g *fakeGPU, a *argv, _ int) {
		op, dst, ddt, x, xdt, y, ydt := a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		n, d := a.int(), a.dims()
		f := device.BinaryOp(op).Def().F32
		for i := range n {
			oa, ob := d.offsets(i)
			g.st(dst, ddt, i, f(g.ld(x, xdt, oa), g.ld(y, ydt, ob)))
		}
	},
	"mp_unary": func(g *fakeGPU, a *argv, _ int) {
		op, dst, ddt, src, sdt, n, alpha := a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.f32()
		def := device.UnaryOp(op).Def()
		for i := range n {
			g.st(dst, ddt, i, def.Eval(g.ld(src, sdt, i), alpha))
		}
	},
	"mp_unary_grad": func(g *fakeGPU, a *argv, _ int) {
		op, dst, ddt, dy, gdt, in, idt, n, alpha := a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.f32()
		f := device.UnaryOp(op).Def().Grad
		for i := range n {
			var v float32
			if in != 0 {
				v = g.ld(in, idt, i)
			}
			g.st(dst, ddt, i, f(g.ld(dy, gdt, i), v, alpha))
		}
	},
	// reduce.cu
	"mp_reduce_thread": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt := a.ptr(), a.int(), a.ptr(), a.int()
		nkept, kept, nred, red, alpha := a.int(), a.dims(), a.int(), a.dims(), a.f32()
		for k := range nkept {
			ks, kd := kept.offsets(k)
			var s float32
			for r := range nred {
				rs, _ := red.offsets(r)
				s += g.ld(src, sdt, ks+rs)
			}
			g.st(dst, ddt, kd, alpha*s)
		}
	},
	"mp_reduce_block": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt := a.ptr(), a.int(), a.ptr(), a.int()
		nkept, kept, nred, red, alpha := a.int(), a.dims(), a.int(), a.dims(), a.f32()
		for k := range nkept {
			ks, kd := kept.offsets(k)
			part := make([]float32, blockSize)
			for t := range blockSize {
				for r := t; r < nred; r += blockSize {
					rs, _ := red.offsets(r)
					part[t] += g.ld(src, sdt, ks+rs)
				}
			}
			g.st(dst, ddt, kd, alpha*treeSum(part))
		}
	},
	"mp_expand": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt, n, d, alpha := a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.dims(), a.f32()
		for i := range n {
			os, _ := d.offsets(i)
			g.st(dst, ddt, i, alpha*g.ld(src, sdt, os))
		}
	},
	// softmax.cu
	"mp_log_softmax": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt, rows, cols := a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.int()
		for r := range rows {
			base := r * cols
			lse := g.rowLSE(src, sdt, base, cols)
			for j := range cols {
				g.st(dst, ddt, base+j, f32(float64(g.ld(src, sdt, base+j))-lse))
			}
		}
	},
	"mp_log_softmax_grad": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, dy, gdt, y, ydt, rows, cols := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.int()
		for r := range rows {
			base := r * cols
			s := g.warpSum(func(j int) float32 { return g.ld(dy, gdt, base+j) }, cols)
			for j := range cols {
				g.st(dst, ddt, base+j, g.ld(dy, gdt, base+j)-expf(g.ld(y, ydt, base+j))*s)
			}
		}
	},
	"mp_cross_entropy": func(g *fakeGPU, a *argv, _ int) {
		loss, ldt, logits, xdt, labels, ydt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		rows, cols, bad := a.int(), a.int(), a.ptr()
		for r := range rows {
			base := r * cols
			lse := g.rowLSE(logits, xdt, base, cols)
			c := g.label(labels, ydt, r, cols, bad)
			v := float32(math.NaN())
			if c >= 0 {
				v = f32(lse - float64(g.ld(logits, xdt, base+c)))
			}
			g.st(loss, ldt, r, v)
		}
	},
	"mp_cross_entropy_grad": func(g *fakeGPU, a *argv, _ int) {
		dl, ddt, logits, xdt, labels, ydt, dloss, gdt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		rows, cols, bad := a.int(), a.int(), a.ptr()
		for r := range rows {
			base := r * cols
			lse := g.rowLSE(logits, xdt, base, cols)
			c := g.label(labels, ydt, r, cols, bad)
			gv := g.ld(dloss, gdt, r)
			for j := range cols {
				p := expf(f32(float64(g.ld(logits, xdt, base+j)) - lse))
				if j == c {
					p -= 1
				}
				if c < 0 {
					p = float32(math.NaN())
				}
				g.st(dl, ddt, base+j, gv*p)
			}
		}
	},
	"mp_argmax": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt, rows, cols := a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.int()
		take := func(v float32, i int, v2 float32, i2 int) bool {
			n1, n2 := isNaN(v), isNaN(v2)
			if n1 || n2 {
				return n2 && (!n1 || i2 < i)
			}
			return v2 > v || (v2 == v && i2 < i)
		}
		for r := range rows {
			base := r * cols
			vs, is := make([]float32, 32), make([]int, 32)
			for l := range 32 {
				vs[l], is[l] = float32(math.Inf(-1)), math.MaxInt32
				for j := l; j < cols; j += 32 {
					if x := g.ld(src, sdt, base+j); take(vs[l], is[l], x, j) {
						vs[l], is[l] = x, j
					}
				}
			}
			for m := 16; m > 0; m >>= 1 {
				nv, ni := make([]float32, 32), make([]int, 32)
				for l := range 32 {
					nv[l], ni[l] = vs[l], is[l]
					if take(vs[l], is[l], vs[l^m], is[l^m]) {
						nv[l], ni[l] = vs[l^m], is[l^m]
					}
				}
				vs, is = nv, ni
			}
			g.st(dst, ddt, r, float32(is[0]))
		}
	},
	// conv.cu
	"mp_im2col": func(g *fakeGPU, a *argv, _ int) {
		col, cdt, x, xdt := a.ptr(), a.int(), a.ptr(), a.int()
		s, total := a.conv(), a.int()
		for idx := range total {
			t := idx
			q := t % s.ow
			t /= s.ow
			p := t % s.oh
			t /= s.oh
			kx := t % s.kw
			t /= s.kw
			ky := t % s.kh
			i := t / s.kh
			ih, iw := p*s.sh-s.ph+ky, q*s.sw-s.pw+kx
			var v float32
			if ih >= 0 && ih < s.h && iw >= 0 && iw < s.w {
				v = g.ld(x, xdt, (s.n0*s.c+i)*s.h*s.w+ih*s.w+iw)
			}
			g.st(col, cdt, idx, v)
		}
	},
	"mp_col2im": func(g *fakeGPU, a *argv, _ int) {
		dx, ddt, col, cdt := a.ptr(), a.int(), a.ptr(), a.int()
		s, total := a.conv(), a.int()
		hw, ohw := s.h*s.w, s.oh*s.ow
		for idx := range total {
			i := idx / hw
			pix := idx - i*hw
			ih, iw := pix/s.w, pix%s.w
			var sum float32
			for ky := 0; ky < s.kh; ky++ {
				th := ih + s.ph - ky
				if th < 0 || th%s.sh != 0 || th/s.sh >= s.oh {
					continue
				}
				p := th / s.sh
				for kx := 0; kx < s.kw; kx++ {
					tw := iw + s.pw - kx
					if tw < 0 || tw%s.sw != 0 || tw/s.sw >= s.ow {
						continue
					}
					q := tw / s.sw
					sum += g.ld(col, cdt, ((i*s.kh+ky)*s.kw+kx)*ohw+p*s.ow+q)
				}
			}
			g.st(dx, ddt, s.n0*s.c*hw+idx, sum)
		}
	},
	// pool.cu
	"mp_maxpool": func(g *fakeGPU, a *argv, _ int) {
		y, ydt, arg, adt, x, xdt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		s, total := a.pool(), a.int()
		hw, ohw := s.h*s.w, s.oh*s.ow
		for idx := range total {
			i, o := idx/ohw, idx%ohw
			oh, ow := o/s.ow, o%s.ow
			h0, h1, _ := emuWindow(oh, s.sh, s.ph, s.kh, s.h)
			w0, w1, _ := emuWindow(ow, s.sw, s.pw, s.kw, s.w)
			best := g.windowArgmax(x, xdt, i*hw, s.w, h0, h1, w0, w1)
			g.st(y, ydt, idx, g.ld(x, xdt, i*hw+best))
			if arg != 0 {
				kh, kw := best/s.w-(oh*s.sh-s.ph), best%s.w-(ow*s.sw-s.pw)
				g.st(arg, adt, idx, float32(kh*s.kw+kw))
			}
		}
	},
	"mp_maxpool_grad": func(g *fakeGPU, a *argv, _ int) {
		dx, ddt, dy, gdt, arg, adt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		s, total := a.pool(), a.int()
		hw, ohw := s.h*s.w, s.oh*s.ow
		for idx := range total {
			i, pix := idx/hw, idx%hw
			ih, iw := pix/s.w, pix%s.w
			var sum float32
			ohEnd, owEnd := min(s.oh-1, (ih+s.ph)/s.sh), min(s.ow-1, (iw+s.pw)/s.sw)
			for oh := firstCover(ih, s.sh, s.ph, s.kh); oh <= ohEnd; oh++ {
				kh := ih - (oh*s.sh - s.ph)
				if kh < 0 || kh >= s.kh {
					continue
				}
				for ow := firstCover(iw, s.sw, s.pw, s.kw); ow <= owEnd; ow++ {
					kw := iw - (ow*s.sw - s.pw)
					if kw < 0 || kw >= s.kw {
						continue
					}
					o := i*ohw + oh*s.ow + ow
					if g.ld(arg, adt, o) == float32(kh*s.kw+kw) {
						sum += g.ld(dy, gdt, o)
					}
				}
			}
			g.st(dx, ddt, idx, sum)
		}
	},
	"mp_avgpool": func(g *fakeGPU, a *argv, _ int) {
		y, ydt, x, xdt, s, total := a.ptr(), a.int(), a.ptr(), a.int(), a.pool(), a.int()
		hw, ohw := s.h*s.w, s.oh*s.ow
		for idx := range total {
			i, o := idx/ohw, idx%ohw
			oh, ow := o/s.ow, o%s.ow
			h0, h1, eh := emuWindow(oh, s.sh, s.ph, s.kh, s.h)
			w0, w1, ew := emuWindow(ow, s.sw, s.pw, s.kw, s.w)
			var sum float32
			for yy := h0; yy < h1; yy++ {
				for q := w0; q < w1; q++ {
					sum += g.ld(x, xdt, i*hw+yy*s.w+q)
				}
			}
			g.st(y, ydt, idx, sum/float32(eh*ew))
		}
	},
	"mp_avgpool_grad": func(g *fakeGPU, a *argv, _ int) {
		dx, ddt, dy, gdt, s, total := a.ptr(), a.int(), a.ptr(), a.int(), a.pool(), a.int()
		hw, ohw := s.h*s.w, s.oh*s.ow
		for idx := range total {
			i, pix := idx/hw, idx%hw
			ih, iw := pix/s.w, pix%s.w
			var sum float32
			ohEnd, owEnd := min(s.oh-1, (ih+s.ph)/s.sh), min(s.ow-1, (iw+s.pw)/s.sw)
			for oh := firstCover(ih, s.sh, s.ph, s.kh); oh <= ohEnd; oh++ {
				h0, h1, eh := emuWindow(oh, s.sh, s.ph, s.kh, s.h)
				if ih < h0 || ih >= h1 {
					continue
				}
				for ow := firstCover(iw, s.sw, s.pw, s.kw); ow <= owEnd; ow++ {
					w0, w1, ew := emuWindow(ow, s.sw, s.pw, s.kw, s.w)
					if iw < w0 || iw >= w1 {
						continue
					}
					sum += g.ld(dy, gdt, i*ohw+oh*s.ow+ow) / float32(eh*ew)
				}
			}
			g.st(dx, ddt, idx, sum)
		}
	},
	// norm.cu
	"mp_bn_sums": func(g *fakeGPU, a *argv, _ int) {
		part, what, dy, gdt, y, ydt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		x, xdt, mean, invstd, dres, rdt := a.ptr(), a.int(), a.ptr(), a.ptr(), a.ptr(), a.int()
		n, c, hw, parts, relu := a.int(), a.int(), a.int(), a.int(), a.int() != 0
		m := n * hw
		chunk := (m + parts - 1) / parts
		for b := range c * parts {
			ch := b / parts
			t0 := (b - ch*parts) * chunk
			t1 := min(m, t0+chunk)
			var mu, is float32
			if what != 0 {
				mu = g.ld(mean, 0, ch)
			}
			if what == 2 {
				is = g.ld(invstd, 0, ch)
			}
			p1, p2 := make([]float32, blockSize), make([]float32, blockSize)
			for t := range blockSize {
				for e := t0 + t; e < t1; e += blockSize {
					j := chanIndex(e, ch, c, hw)
					switch what {
					case 0:
						p1[t] += g.ld(x, xdt, j)
					case 1:
						d := g.ld(x, xdt, j) - mu
						p1[t] += d * d
					default:
						gv := bnDz(g, dy, gdt, y, ydt, j, relu)
						if dres != 0 {
							g.st(dres, rdt, j, gv)
						}
						p1[t] += gv
						p2[t] += gv * ((g.ld(x, xdt, j) - mu) * is)
					}
				}
			}
			if what == 2 {
				g.st(part, 0, 2*b, treeSum(p1))
				g.st(part, 0, 2*b+1, treeSum(p2))
			} else {
				g.st(part, 0, b, treeSum(p1))
			}
		}
	},
	"mp_bn_combine": func(g *fakeGPU, a *argv, _ int) {
		tot, dbeta, dgamma, part := a.ptr(), a.ptr(), a.ptr(), a.ptr()
		c, parts, pairs, div := a.int(), a.int(), a.int() != 0, a.f32()
		for ch := range c {
			var s, s2 float32
			for p := range parts {
				b := ch*parts + p
				if pairs {
					s += g.ld(part, 0, 2*b)
					s2 += g.ld(part, 0, 2*b+1)
				} else {
					s += g.ld(part, 0, b)
				}
			}
			if !pairs {
				g.st(tot, 0, ch, s/div)
				continue
			}
			g.st(tot, 0, ch, s)
			g.st(tot, 0, c+ch, s2)
			if dbeta != 0 {
				g.st(dbeta, 0, ch, s)
			}
			if dgamma != 0 {
				g.st(dgamma, 0, ch, s2)
			}
		}
	},
	"mp_bn_grad_apply": func(g *fakeGPU, a *argv, _ int) {
		dx, ddt, dy, gdt, y, ydt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		x, xdt, mean, invstd, gamma, tot := a.ptr(), a.int(), a.ptr(), a.ptr(), a.ptr(), a.ptr()
		n, c, hw, relu := a.int(), a.int(), a.int(), a.int() != 0
		fm := float32(n * hw)
		for j := range n * c * hw {
			ch := (j / hw) % c
			is := g.ld(invstd, 0, ch)
			gm := float32(1)
			if gamma != 0 {
				gm = g.ld(gamma, 0, ch)
			}
			k := gm * is / fm
			xhat := (g.ld(x, xdt, j) - g.ld(mean, 0, ch)) * is
			g.st(dx, ddt, j, k*((fm*bnDz(g, dy, gdt, y, ydt, j, relu)-g.ld(tot, 0, ch))-xhat*g.ld(tot, 0, c+ch)))
		}
	},
	"mp_batchnorm_act": func(g *fakeGPU, a *argv, _ int) {
		y, ydt, x, xdt, res, rdt := a.ptr(), a.int(), a.ptr(), a.int(), a.ptr(), a.int()
		mean, invstd, gamma, beta := a.ptr(), a.ptr(), a.ptr(), a.ptr()
		c, hw, total, relu := a.int(), a.int(), a.int(), a.int() != 0
		for idx := range total {
			ch := (idx / hw) % c
			gm, b := float32(1), float32(0)
			if gamma != 0 {
				gm = g.ld(gamma, 0, ch)
			}
			if beta != 0 {
				b = g.ld(beta, 0, ch)
			}
			scale := g.ld(invstd, 0, ch) * gm
			shift := b - g.ld(mean, 0, ch)*scale
			v := g.ld(x, xdt, idx)*scale + shift
			if res != 0 {
				v += g.ld(res, rdt, idx)
			}
			if relu && !(v > 0 || v != v) {
				v = 0
			}
			g.st(y, ydt, idx, v)
		}
	},
	"mp_sgd": func(g *fakeGPU, a *argv, _ int) {
		p, gr, mom, n := a.ptr(), a.ptr(), a.ptr(), a.int()
		lr, momentum, dampening, wd, nesterov, first := a.f32(), a.f32(), a.f32(), a.f32(), a.int(), a.int()
		for i := range n {
			gi := g.ld(gr, 0, i)
			if wd != 0 {
				gi += wd * g.ld(p, 0, i)
			}
			if momentum != 0 {
				var m float32
				if first != 0 {
					m = gi
				} else {
					m = momentum*g.ld(mom, 0, i) + (1-dampening)*gi
				}
				g.st(mom, 0, i, m)
				if nesterov != 0 {
					gi += momentum * m
				} else {
					gi = m
				}
			}
			g.st(p, 0, i, g.ld(p, 0, i)-lr*gi)
		}
	},
	"mp_adam": func(g *fakeGPU, a *argv, _ int) {
		p, gr, m, v, n := a.ptr(), a.ptr(), a.ptr(), a.ptr(), a.int()
		b1, b2, eps, wd, decoupled := a.f32(), a.f32(), a.f32(), a.f32(), a.int()
		stepSize, bc2sqrt, decay := a.f32(), a.f32(), a.f32()
		for i := range n {
			gi, pi := g.ld(gr, 0, i), g.ld(p, 0, i)
			if wd != 0 {
				if decoupled != 0 {
					pi *= decay
				} else {
					gi += wd * pi
				}
			}
			mi := g.ld(m, 0, i)
			mi += (1 - b1) * (gi - mi)
			vi := b2*g.ld(v, 0, i) + (1-b2)*gi*gi
			g.st(m, 0, i, mi)
			g.st(v, 0, i, vi)
			denom := f32(math.Sqrt(float64(vi)))/bc2sqrt + eps
			g.st(p, 0, i, pi-stepSize*mi/denom)
		}
	},
	"mp_unscale": func(g *fakeGPU, a *argv, _ int) {
		gr, n, inv, found := a.ptr(), a.int(), a.f32(), a.ptr()
		for i := range n {
			v := g.ld(gr, 0, i) * inv
			g.st(gr, 0, i, v)
			if !isFinite(v) {
				g.sti(found, 0, 1)
			}
		}
	},
	// random.cu
	"mp_dropout": func(g *fakeGPU, a *argv, _ int) {
		dst, ddt, src, sdt, n, p, scale, seed, offset := a.ptr(), a.int(), a.ptr(), a.int(), a.int(), a.f32(), a.f32(), a.u64(), a.u64()
		for i := range n {
			u := float32(emuMix64(seed, offset+uint64(i))>>40) * (1.0 / 16777216.0)
			x := g.ld(src, sdt, i)
			if u >= p {
				g.st(dst, ddt, i, x*scale)
			} else {
				g.st(dst, ddt, i, 0)
			}
		}
	},
}

// emuMix64 is random.cu's mix64, written out again rather than calling
// device.Mix64, so the emulated mask is checked against the CPU's.
func emuMix64(seed, counter uint64) uint64 {
	z := seed ^ (counter * 0x9e3779b97f4a7c15)
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// rowLSE is softmax.cu's row_lse over 32 lanes.
func (g *fakeGPU) rowLSE(x uint64, xdt, base, cols int) float64 {
	ms := make([]float32, 32)
	for l := range 32 {
		ms[l] = float32(math.Inf(-1))
		for j := l; j < cols; j += 32 {
			ms[l] = nanMax(ms[l], g.ld(x, xdt, base+j))
		}
	}
	m := butterfly(ms, nanMax)[0]
	if !isFinite(m) {
		return float64(m)
	}
	s := g.warpSum(func(j int) float32 { return expf(g.ld(x, xdt, base+j) - m) }, cols)
	return float64(m) + math.Log(float64(s))
}

// warpSum is a strided per-lane sum of f(j), j < cols, then warp_sum.
func (g *fakeGPU) warpSum(f func(j int) float32, cols int) float32 {
	v := make([]float32, 32)
	for l := range 32 {
		for j := l; j < cols; j += 32 {
			v[l] += f(j)
		}
	}
	return butterfly(v, func(a, b float32) float32 { return a + b })[0]
}

// label is softmax.cu's label.
func (g *fakeGPU) label(labels uint64, ldt, r, cols int, bad uint64) int {
	l := g.ld(labels, ldt, r)
	// cvt.rzi.s32.f32: truncation, saturating, NaN to 0.
	var c int32
	switch {
	case isNaN(l):
		c = 0
	case l >= math.MaxInt32:
		c = math.MaxInt32
	case l <= math.MinInt32:
		c = math.MinInt32
	default:
		c = int32(l)
	}
	if float32(c) != l || c < 0 || int(c) >= cols {
		if old := g.ldi(bad, 0); int32(r) < old {
			g.sti(bad, 0, int32(r))
		}
		return -1
	}
	return int(c)
}

type emuConv struct{ n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow, n0, nb int }

func (a *argv) conv() emuConv {
	v := a.ints(14)
	return emuConv{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13]}
}

type emuPool struct{ n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow int }

func (a *argv) pool() emuPool {
	v := a.ints(12)
	return emuPool{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]}
}

func emuWindow(o, stride, pad, k, size int) (lo, hi, extent int) {
	l := o*stride - pad
	h := min(l+k, size+pad)
	return max(l, 0), min(h, size), h - l
}

func firstCover(i, stride, pad, k int) int {
	t := i + pad - k + 1
	if t <= 0 {
		return 0
	}
	return (t + stride - 1) / stride
}

func (g *fakeGPU) windowArgmax(x uint64, xdt, plane, w, h0, h1, w0, w1 int) int {
	best := h0*w + w0
	bv := g.ld(x, xdt, plane+best)
	for y := h0; y < h1; y++ {
		for q := w0; q < w1; q++ {
			j := y*w + q
			if v := g.ld(x, xdt, plane+j); v > bv || isNaN(v) {
				best, bv = j, v
			}
		}
	}
	return best
}

func chanIndex(t, ch, c, hw int) int {
	i := t / hw
	return (i*c+ch)*hw + (t - i*hw)
}

// gemm is cuBLAS's GEMM, column-major, accumulating in float32 in order,
// with cuBLAS's argument checks.
func (g *fakeGPU) gemm(c *gemmCall) error {
	g.gemms++
	ok := c.at == c.bt && (c.ct == dtype.F32 || c.ct == c.at)
	if !ok {
		return fmt.Errorf("cublasGemmEx: unsupported types %v, %v -> %v", c.at, c.bt, c.ct)
	}
	rowsA, rowsB := c.m, c.k
	if c.transA {
		rowsA = c.k
	}
	if c.transB {
		rowsB = c.n
	}
	if c.m < 1 || c.n < 1 || c.k < 1 || c.lda < max(1, rowsA) || c.ldb < max(1, rowsB) || c.ldc < max(1, c.m) {
		return fmt.Errorf("cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (m %d n %d k %d lda %d ldb %d ldc %d)", c.m, c.n, c.k, c.lda, c.ldb, c.ldc)
	}
	nb := max(c.batch, 1)
	for b := range nb {
		ao, bo, co := int(int64(b)*c.sa), int(int64(b)*c.sb), int(int64(b)*c.sc)
		for j := range c.n {
			for i := range c.m {
				var s float32
				for l := range c.k {
					var av, bv float32
					if c.transA {
						av = g.ld(c.a, int(c.at), ao+l+i*c.lda)
					} else {
						av = g.ld(c.a, int(c.at), ao+i+l*c.lda)
					}
					if c.transB {
						bv = g.ld(c.b, int(c.bt), bo+j+l*c.ldb)
					} else {
						bv = g.ld(c.b, int(c.bt), bo+l+j*c.ldb)
					}
					s += av * bv
				}
				v := c.alpha * s
				if c.beta != 0 {
					v += c.beta * g.ld(c.c, int(c.ct), co+i+j*c.ldc)
				}
				g.st(c.c, int(c.ct), co+i+j*c.ldc, v)
			}
		}
	}
	return nil
}
