package cpu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// forPlanes runs fn(i) for i in [0, planes), each plane about size
// elements. fn goes to the helpers in a pooled planeRunner rather than a
// closure of its own.
func (d *Device) forPlanes(planes, size int, fn func(i int)) {
	pr := planeRunners.Get().(*planeRunner)
	pr.fn = fn
	d.parallelRunner(planes, planeGrain(size), pr)
	pr.fn = nil
	planeRunners.Put(pr)
}

// planeGrain is how many planes of size elements make a parallel piece.
func planeGrain(size int) int { return max(1, grain/max(size, 1)) }

// planeRunner runs forPlanes' fn over a piece of planes (pieceRunner).
type planeRunner struct{ fn func(i int) }

func (p *planeRunner) runPieces(lo, hi int) {
	for i := lo; i < hi; i++ {
		p.fn(i)
	}
}

var planeRunners = sync.Pool{New: func() any { return new(planeRunner) }}

// ConvChunkBytes is the im2col chunk this backend prefers
// (device.ConvChunker): twice a core's L2 cache, between 1 and 8 MiB, or 1
// MiB where the L2's size is unknown. On a Zen machine with a 1 MiB L2,
// 1 MiB chunks took 40% less CPU time than 16 MiB ones on the MNIST CNN's
// second layer. On an Emerald Rapids Xeon with a 2 MiB L2, 4 MiB chunks
// against 1 MiB (alternated runs, medians): MNIST CNN 1.11x in FP32, 1.04x
// in BF16, 0.99x in F16; ResNet-20 1.09x in FP32, 1.04x in BF16. Fewer,
// larger chunks mean fewer parallel im2col passes (a single ResNet-20
// first-stage image is 590 KB of columns).
func (d *Device) ConvChunkBytes() int { return convChunk() }

// convChunk reads the L2's size the first time a convolution asks, not at
// start-up.
var convChunk = sync.OnceValue(func() int { return convChunkFor(l2Bytes()) })

// convChunkFor is ConvChunkBytes for an L2 of l2 bytes (0: unknown).
func convChunkFor(l2 int) int {
	if l2 <= 0 {
		return 1 << 20
	}
	return min(max(2*l2, 1<<20), 8<<20)
}

// l2Bytes reads the size of CPU 0's level-2 data or unified cache from
// Linux's sysfs; 0 where it cannot (another OS, or no such entry).
func l2Bytes() int {
	for i := 0; i < 8; i++ {
		dir := fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/", i)
		level, err1 := os.ReadFile(dir + "level")
		typ, err2 := os.ReadFile(dir + "type")
		size, err3 := os.ReadFile(dir + "size")
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if t := strings.TrimSpace(string(typ)); strings.TrimSpace(string(level)) != "2" || (t != "Unified" && t != "Data") {
			continue
		}
		return parseCacheSize(strings.TrimSpace(string(size)))
	}
	return 0
}

// parseCacheSize reads sysfs's "2048K" (or "2M", or bytes); 0 if malformed.
func parseCacheSize(s string) int {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0
	}
	return v * mult
}

var _ device.ConvChunker = (*Device)(nil)

func checkConv(s device.ConvShape) {
	if !s.Valid() {
		panic(fmt.Sprintf("cpu: bad conv shape %+v", s))
	}
}

// Im2Col unrolls images [N0, N0+NB) of x into col (NB, C*KH*KW, OH*OW).
// It moves values without arithmetic, so when x and col share a dtype it
// copies raw storage, 16-bit included, without widening.
func (d *Device) Im2Col(col, x device.Buffer, s device.ConvShape) {
	cb, xb := d.buf(col, "Im2Col"), d.buf(x, "Im2Col")
	checkConv(s)
	hw, ohw, kk := s.H*s.W, s.OH*s.OW, s.KH*s.KW
	d.checkLen("Im2Col", s.N*s.C*hw, xb)
	d.checkLen("Im2Col", s.NB*s.C*kk*ohw, cb)
	j := convJobs.Get().(*convJob)
	*j = convJob{cb: cb, xb: xb, s: s, taps: convTapsFor(s)}
	d.parallelRunner(s.NB*s.C, planeGrain(kk*ohw), j)
	*j = convJob{}
	convJobs.Put(j)
}

// convJob is an Im2Col or Col2Im call's planes, run by the device's
// parallel pieces (pieceRunner) from a pool: the convolution of a step is
// many such calls, chunk by chunk, and a closure per call would be an
// allocation per call. For Im2Col xb is the input and cb the columns; for
// Col2Im (col2im set) xb is the input's gradient.
type convJob struct {
	col2im bool
	cb, xb *Buffer
	s      device.ConvShape
	taps   []convTap
	plan   *c2iPlan
}

var convJobs = sync.Pool{New: func() any { return new(convJob) }}

func (j *convJob) runPieces(lo, hi int) {
	for i := lo; i < hi; i++ {
		if j.col2im {
			j.col2imPlane(i)
		} else {
			j.im2colPlane(i)
		}
	}
}

// im2colPlane unrolls plane i of the images [N0, N0+NB).
func (j *convJob) im2colPlane(i int) {
	s, cb, xb := &j.s, j.cb, j.xb
	hw, kk, ohw := s.H*s.W, s.KH*s.KW, s.OH*s.OW
	p := (s.N0*s.C + i) * hw
	switch {
	case cb.dt == xb.dt && cb.dt == dtype.F32:
		unrollPlane(cb.f32[i*kk*ohw:(i+1)*kk*ohw], xb.f32[p:p+hw], *s, j.taps, rowsF32)
	case cb.dt == xb.dt:
		unrollPlane(cb.u16[i*kk*ohw:(i+1)*kk*ohw], xb.u16[p:p+hw], *s, j.taps, rowsU16)
	default:
		plane := read(xb, p, p+hw)
		w := writeView(cb, i*kk*ohw, (i+1)*kk*ohw)
		unrollPlane(w.v, plane.v, *s, j.taps, rowsF32)
		plane.done()
		commit(cb, i*kk*ohw, w)
	}
}

// convTap is where kernel tap (kh, kw) reads: the block of output rows
// [oh0, oh1) and columns [lo, hi) whose input pixel is inside the image
// (empty when oh0 == oh1), and that pixel's offset in the plane for (oh0,
// lo). Across, consecutive output rows read input rows StrideH apart;
// along, columns StrideW apart.
type convTap struct{ oh0, oh1, lo, hi, src int }

// convTapsFor returns convTaps(s), worked out once per plane geometry
// (convTapCache); callers only read it.
func convTapsFor(s device.ConvShape) []convTap {
	key := s
	key.N, key.C, key.N0, key.NB = 0, 0, 0, 0 // a plane's geometry only
	convTapCache.Lock()
	taps, ok := convTapCache.m[key]
	convTapCache.Unlock()
	if ok {
		return taps
	}
	taps = convTaps(s)
	convTapCache.Lock()
	if convTapCache.m == nil {
		convTapCache.m = map[device.ConvShape][]convTap{}
	}
	if len(convTapCache.m) < maxC2IPlans {
		convTapCache.m[key] = taps
	}
	convTapCache.Unlock()
	return taps
}

// convTapCache holds the taps of the geometries seen, as c2iPlans holds
// plans, and stops growing at as many.
var convTapCache struct {
	sync.Mutex
	m map[device.ConvShape][]convTap
}

// convTaps returns the taps of s in (kh, kw) order, worked out once per
// geometry rather than per plane: small images have many planes.
func convTaps(s device.ConvShape) []convTap {
	taps := make([]convTap, s.KH*s.KW)
	for kh := range s.KH {
		for kw := range s.KW {
			oh0, oh1 := validRange(s.OH, s.StrideH, s.PadH, kh, s.H)
			lo, hi := validRange(s.OW, s.StrideW, s.PadW, kw, s.W)
			if oh0 < oh1 && lo < hi {
				taps[kh*s.KW+kw] = convTap{oh0, oh1, lo, hi, (oh0*s.StrideH-s.PadH+kh)*s.W + lo*s.StrideW - s.PadW + kw}
			}
		}
	}
	return taps
}

// unrollPlane writes the KH*KW rows of one input plane's im2col block. A
// tap whose rows read contiguous input (StrideW 1) or every other element
// (StrideW 2) is moved a block of rows at a time; other strides element by
// element.
func unrollPlane[T float32 | uint16](dst, plane []T, s device.ConvShape, taps []convTap, rc rowCopier[T]) {
	ohw := s.OH * s.OW
	for k, t := range taps {
		row := dst[k*ohw : (k+1)*ohw]
		if t.oh0 == t.oh1 {
			clear(row)
			continue
		}
		if t.lo > 0 || t.hi < s.OW {
			// Padding on the left or right of every row: one clear of the
			// whole block costs less than two small ones per row.
			clear(row)
		} else {
			clear(row[:t.oh0*s.OW])
			clear(row[t.oh1*s.OW:])
		}
		switch s.StrideW {
		case 1:
			rc.stride1(row[t.oh0*s.OW+t.lo:], plane[t.src:], t.hi-t.lo, t.oh1-t.oh0, s.OW, s.StrideH*s.W)
			continue
		case 2:
			rc.stride2(row[t.oh0*s.OW+t.lo:], plane[t.src:], t.hi-t.lo, t.oh1-t.oh0, s.OW, s.StrideH*s.W)
			continue
		}
		for oh := t.oh0; oh < t.oh1; oh++ {
			out := row[oh*s.OW+t.lo : oh*s.OW+t.hi]
			in := plane[t.src+(oh-t.oh0)*s.StrideH*s.W:]
			for j := range out {
				out[j] = in[j*s.StrideW]
			}
		}
	}
}

// rowCopier moves blocks of rows for unrollPlane: input runs read at
// stride 1 or 2.
type rowCopier[T float32 | uint16] struct {
	stride1, stride2 func(dst, src []T, n, rows, ds, ss int)
}

var (
	rowsF32 = rowCopier[float32]{copyRowsF32, copyStride2F32}
	rowsU16 = rowCopier[uint16]{copyRowsU16, copyStride2U16}
)

// copyStride2F32 copies rows of n elements taken every other element of
// src: dst[r*ds+j] = src[r*ss+2j].
func copyStride2F32(dst, src []float32, n, rows, ds, ss int) {
	checkRows("copyRows", dst, src, n, rows, ds, ss, 2)
	if n == 0 || rows == 0 || copyStride2F32SIMD(dst, src, n, rows, ds, ss) {
		return
	}
	copyStride2Go(dst, src, n, rows, ds, ss)
}

// copyStride2U16 is copyStride2F32 for 16-bit storage.
func copyStride2U16(dst, src []uint16, n, rows, ds, ss int) {
	checkRows("copyRows", dst, src, n, rows, ds, ss, 2)
	if n == 0 || rows == 0 || copyStride2U16SIMD(dst, src, n, rows, ds, ss) {
		return
	}
	copyStride2Go(dst, src, n, rows, ds, ss)
}

// copyStride2Go is copyStride2F32's Go loop, for either storage.
func copyStride2Go[T float32 | uint16](dst, src []T, n, rows, ds, ss int) {
	for r := range rows {
		out, in := dst[r*ds:r*ds+n], src[r*ss:]
		for j := range out {
			out[j] = in[2*j]
		}
	}
}

// checkRows panics unless rows of n elements, ds apart in dst, fit dst,
// and rows read every step-th element of src, ss apart, fit src: the
// assembly loops check nothing.
func checkRows[T float32 | uint16](op string, dst, src []T, n, rows, ds, ss, step int) {
	if n < 0 || rows < 0 || (rows > 0 && n > 0 && ((rows-1)*ds+n > len(dst) || (rows-1)*ss+step*(n-1)+1 > len(src))) {
		panic(fmt.Sprintf("cpu: %s: %d rows of %d (strides %d, %d, step %d) out of range of %d and %d elements", op, rows, n, ds, ss, step, len(dst), len(src)))
	}
}

// copyRowsF32 copies rows of n elements from src to dst, dst rows ds and
// src rows ss elements apart.
func copyRowsF32(dst, src []float32, n, rows, ds, ss int) {
	checkRows("copyRows", dst, src, n, rows, ds, ss, 1)
	if n == 0 || rows == 0 || copyRowsF32SIMD(dst, src, n, rows, ds, ss) {
		return
	}
	for r := range rows {
		copy(dst[r*ds:r*ds+n], src[r*ss:r*ss+n])
	}
}

// copyRowsU16 is copyRowsF32 for 16-bit storage.
func copyRowsU16(dst, src []uint16, n, rows, ds, ss int) {
	checkRows("copyRows", dst, src, n, rows, ds, ss, 1)
	if n == 0 || rows == 0 || copyRowsU16SIMD(dst, src, n, rows, ds, ss) {
		return
	}
	for r := range rows {
		copy(dst[r*ds:r*ds+n], src[r*ss:r*ss+n])
	}
}

// addRows adds rows of n elements of src into dst at offset off in each
// row: dst[r*ds+off+j] += src[r*ss+j].
func addRows(dst, src []float32, off, n, rows, ds, ss int) {
	checkRows("addRows", dst[min(off, len(dst)):], src, n, rows, ds, ss, 1)
	if n == 0 || rows == 0 || addRowsSIMD(dst, src, off, n, rows, ds, ss) {
		return
	}
	for r := range rows {
		d := dst[r*ds+off : r*ds+off+n]
		for j, v := range src[r*ss : r*ss+n] {
			d[j] += v
		}
	}
}

// Col2Im overwrites images [N0, N0+NB) of dx with the adjoint of Im2Col:
// each pixel gets the col entries that read it added in (kh, kw, oh, ow)
// order, whatever the path.
func (d *Device) Col2Im(dx, col device.Buffer, s device.ConvShape) {
	db, cb := d.buf(dx, "Col2Im"), d.buf(col, "Col2Im")
	checkConv(s)
	hw, ohw, kk := s.H*s.W, s.OH*s.OW, s.KH*s.KW
	d.checkLen("Col2Im", s.N*s.C*hw, db)
	d.checkLen("Col2Im", s.NB*s.C*kk*ohw, cb)
	j := convJobs.Get().(*convJob)
	*j = convJob{col2im: true, cb: cb, xb: db, s: s, taps: convTapsFor(s)}
	if simdConv && s.StrideW == 1 && s.W <= 64 && cb.dt == dtype.F32 {
		j.plan = c2iPlanFor(s, j.taps)
	}
	d.parallelRunner(s.NB*s.C, planeGrain(kk*ohw), j)
	*j = convJob{}
	convJobs.Put(j)
}

// col2imPlane sums plane i of the images [N0, N0+NB) back from its
// columns.
func (j *convJob) col2imPlane(i int) {
	s, cb, db := &j.s, j.cb, j.xb
	hw, kk, ohw := s.H*s.W, s.KH*s.KW, s.OH*s.OW
	n, c := s.N0+i/s.C, i%s.C
	acc := writeView(db, (n*s.C+c)*hw, (n*s.C+c+1)*hw)
	if j.plan != nil && col2imSIMD(acc.v, cb.f32[i*kk*ohw:(i+1)*kk*ohw], j.plan) {
		commit(db, (n*s.C+c)*hw, acc)
		return
	}
	clear(acc.v)
	for k, t := range j.taps {
		if t.oh0 == t.oh1 {
			continue
		}
		row := (i*kk + k) * ohw
		r := read(cb, row+t.oh0*s.OW, row+t.oh1*s.OW)
		if s.StrideW == 1 {
			// Rows are passed from their start, so that every tap adds
			// into them in the same sixteen-element steps.
			col0 := t.src % s.W
			addRows(acc.v[t.src-col0:], r.v[t.lo:], col0, t.hi-t.lo, t.oh1-t.oh0, s.StrideH*s.W, s.OW)
		} else {
			for oh := range t.oh1 - t.oh0 {
				out := acc.v[t.src+oh*s.StrideH*s.W:]
				for j, v := range r.v[oh*s.OW+t.lo : oh*s.OW+t.hi] {
					out[j*s.StrideW] += v
				}
			}
		}
		r.done()
	}
	commit(db, (n*s.C+c)*hw, acc)
}

// c2iEntry is one kernel tap's contribution to one row of a Col2Im plane:
// the col float (in the plane's block) that lands in lane 0 of the row,
// and the lanes of each sixteen-float register of the row it adds to.
// 16 bytes, as col2imRowsAVX512 reads it.
type c2iEntry struct {
	src  int32
	mask [4]uint16
	_    [2]uint16
}

// c2iPlan is Col2Im at StrideW 1 worked out row by row for planes of s:
// the entries of row r are ent[end[r-1]:end[r]], in tap order, so that
// each pixel gets its contributions in the order the row-block loop of
// Col2Im adds them. wmask holds the lanes of a row (16 bits a register).
type c2iPlan struct {
	ent   []c2iEntry
	end   []int32
	w     int
	wmask uint64
}

// c2iPlans caches plans by geometry: a network has a few convolutions,
// each called once per chunk of images, and a plan takes microseconds to
// make. The cache stops growing at maxC2IPlans geometries.
var c2iPlans struct {
	sync.Mutex
	m map[device.ConvShape]*c2iPlan
}

const maxC2IPlans = 256

// c2iPlanFor returns the plan for s's geometry, from the cache or new.
func c2iPlanFor(s device.ConvShape, taps []convTap) *c2iPlan {
	key := s
	key.N, key.C, key.N0, key.NB = 0, 0, 0, 0 // a plane's geometry only
	c2iPlans.Lock()
	p := c2iPlans.m[key]
	c2iPlans.Unlock()
	if p != nil {
		return p
	}
	p = newC2IPlan(s, taps)
	c2iPlans.Lock()
	if c2iPlans.m == nil {
		c2iPlans.m = map[device.ConvShape]*c2iPlan{}
	}
	if len(c2iPlans.m) < maxC2IPlans {
		c2iPlans.m[key] = p
	}
	c2iPlans.Unlock()
	return p
}

// newC2IPlan plans Col2Im's rows for s (StrideW 1, W <= 64).
func newC2IPlan(s device.ConvShape, taps []convTap) *c2iPlan {
	p := &c2iPlan{ent: make([]c2iEntry, 0, s.H*len(taps)), end: make([]int32, s.H), w: s.W}
	lanes := func(lo, hi int) (m [4]uint16) { // lanes [lo, hi) of the row
		for q := range m {
			below := func(j int) uint32 { return 1<<min(max(j-16*q, 0), 16) - 1 }
			m[q] = uint16(below(hi) &^ below(lo))
		}
		return m
	}
	wm := lanes(0, s.W)
	for q, m := range wm {
		p.wmask |= uint64(m) << (16 * q)
	}
	ohw := s.OH * s.OW
	for ih := range s.H {
		for k, t := range taps {
			kh, kw := k/s.KW, k%s.KW
			num := ih + s.PadH - kh // oh*StrideH for the output row that reads row ih
			if t.oh0 == t.oh1 || num < 0 || num%s.StrideH != 0 || num/s.StrideH < t.oh0 || num/s.StrideH >= t.oh1 {
				continue
			}
			oh, col := num/s.StrideH, t.lo-s.PadW+kw
			p.ent = append(p.ent, c2iEntry{src: int32(k*ohw + oh*s.OW + t.lo - col), mask: lanes(col, col+t.hi-t.lo)})
		}
		p.end[ih] = int32(len(p.ent))
	}
	return p
}

// validRange returns the output columns [lo, hi) whose input column
// ow*stride - pad + k falls inside [0, size); the rest read padding.
func validRange(outSize, stride, pad, k, size int) (lo, hi int) {
	// ow*stride >= pad-k  and  ow*stride <= size-1+pad-k
	lo = max(0, ceilDiv(pad-k, stride))
	hi = min(outSize, floorDiv(size-1+pad-k, stride)+1)
	return lo, max(lo, hi)
}

func ceilDiv(a, b int) int { return -floorDiv(-a, b) }
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func checkPool(s device.PoolShape) {
	if !s.Valid() {
		panic(fmt.Sprintf("cpu: bad pool shape %+v", s))
	}
}

// window returns the clipped input rows or columns a pooling output o reads,
// and the unclipped extent PyTorch divides by for average pooling.
func window(o, stride, pad, k, size int) (lo, hi, extent int) {
	lo = o*stride - pad
	hi = min(lo+k, size+pad)
	extent = hi - lo
	return max(lo, 0), min(hi, size), extent
}

// MaxPool writes each window's maximum to y and, unless arg is nil, its
// position in the window to arg (see device.Kernels).
func (d *Device) MaxPool(y, arg, x device.Buffer, s device.PoolShape) {
	yb, xb := d.buf(y, "MaxPool"), d.buf(x, "MaxPool")
	checkPool(s)
	hw, ohw := s.H*s.W, s.OH*s.OW
	d.checkLen("MaxPool", s.N*s.C*hw, xb)
	d.checkLen("MaxPool", s.N*s.C*ohw, yb)
	var ab *Buffer
	if arg != nil {
		ab = d.buf(arg, "MaxPool")
		d.checkLen("MaxPool", s.N*s.C*ohw, ab)
		if !s.ArgFits(ab.dt) {
			panic(fmt.Sprintf("cpu: MaxPool: %dx%d window positions do not fit %v exactly", s.KH, s.KW, ab.dt))
		}
	}
	d.forPlanes(s.N*s.C, hw, func(i int) {
		if maxPoolSIMD(yb, ab, xb, i, s) {
			return
		}
		in, out := read(xb, i*hw, (i+1)*hw), writeView(yb, i*ohw, (i+1)*ohw)
		var pos view
		if ab != nil {
			pos = writeView(ab, i*ohw, (i+1)*ohw)
		}
		if is2x2(s) {
			maxPool2x2(out.v, pos.v, in.v, s.W, s.OH, s.OW)
		} else {
			maxPoolPlane(out.v, pos.v, in.v, s)
		}
		in.done()
		commit(yb, i*ohw, out)
		if ab != nil {
			commit(ab, i*ohw, pos)
		}
	})
}

// is2x2 reports the common pooling geometry that gets a fast path: 2x2
// windows, stride 2, no padding.
func is2x2(s device.PoolShape) bool {
	return s.KH == 2 && s.KW == 2 && s.StrideH == 2 && s.StrideW == 2 && s.PadH == 0 && s.PadW == 0
}

// maxPool2x2 pools one plane (rows of w) with 2x2 windows at stride 2 into
// y (oh, ow), writing the positions to pos unless it is nil. It is the
// reference for the AVX-512 kernels (maxPoolSIMD).
func maxPool2x2(y, pos, x []float32, w, oh, ow int) {
	for r := range oh {
		r0, r1 := x[2*r*w:2*r*w+2*ow], x[(2*r+1)*w:(2*r+1)*w+2*ow]
		yr := y[r*ow : (r+1)*ow]
		for c := range yr {
			// The window's elements in row-major order; a later one wins
			// when it is larger, or when it is a NaN (argmaxWindow's rule).
			best, k := r0[2*c], 0
			if v := r0[2*c+1]; v > best || v != v {
				best, k = v, 1
			}
			if v := r1[2*c]; v > best || v != v {
				best, k = v, 2
			}
			if v := r1[2*c+1]; v > best || v != v {
				best, k = v, 3
			}
			yr[c] = best
			if pos != nil {
				pos[r*ow+c] = float32(k)
			}
		}
	}
}

// maxPoolPlane is MaxPool on one plane for any geometry.
func maxPoolPlane(y, pos, x []float32, s device.PoolShape) {
	for oh := range s.OH {
		h0, h1, _ := window(oh, s.StrideH, s.PadH, s.KH, s.H)
		for ow := range s.OW {
			w0, w1, _ := window(ow, s.StrideW, s.PadW, s.KW, s.W)
			j := argmaxWindow(x, s.W, h0, h1, w0, w1)
			y[oh*s.OW+ow] = x[j]
			if pos != nil {
				// Relative to the window's unclipped corner, so that the
				// position alone (with oh, ow) locates the element.
				kh, kw := j/s.W-(oh*s.StrideH-s.PadH), j%s.W-(ow*s.StrideW-s.PadW)
				pos[oh*s.OW+ow] = float32(kh*s.KW + kw)
			}
		}
	}
}

// argmaxWindow returns the index of the first maximum of the window rows
// [h0,h1) x columns [w0,w1), or of its last NaN when it holds any: PyTorch's
// rule (a NaN replaces the running maximum, a number only a smaller one),
// so that the maximum is NaN and its gradient goes where PyTorch sends it.
func argmaxWindow(v []float32, width, h0, h1, w0, w1 int) int {
	best := h0*width + w0
	for h := h0; h < h1; h++ {
		for w := w0; w < w1; w++ {
			j := h*width + w
			if x := v[j]; x > v[best] || x != x {
				best = j
			}
		}
	}
	return best
}

// MaxPoolGrad adds each dy to the element MaxPool chose, found from its
// recorded position in arg, in (oh, ow) order.
func (d *Device) MaxPoolGrad(dx, dy, arg device.Buffer, s device.PoolShape) {
	db, gb, ab := d.buf(dx, "MaxPoolGrad"), d.buf(dy, "MaxPoolGrad"), d.buf(arg, "MaxPoolGrad")
	checkPool(s)
	hw, ohw := s.H*s.W, s.OH*s.OW
	d.checkLen("MaxPoolGrad", s.N*s.C*hw, db)
	d.checkLen("MaxPoolGrad", s.N*s.C*ohw, gb, ab)
	d.forPlanes(s.N*s.C, hw, func(i int) {
		if maxPoolGradSIMD(db, gb, ab, i, s) {
			return
		}
		if is2x2(s) && db.dt == gb.dt && db.dt != dtype.F32 {
			// 16-bit dy lands in dx unchanged (0 + dy is dy), so its bits
			// are moved without widening or rounding.
			pos := read(ab, i*ohw, (i+1)*ohw)
			out := db.u16[i*hw : (i+1)*hw]
			clear(out)
			maxPoolGrad2x2Bits(out, gb.u16[i*ohw:(i+1)*ohw], pos.v, s.W, s.OH, s.OW)
			pos.done()
			return
		}
		g, pos, out := read(gb, i*ohw, (i+1)*ohw), read(ab, i*ohw, (i+1)*ohw), writeView(db, i*hw, (i+1)*hw)
		clear(out.v)
		if is2x2(s) {
			maxPoolGrad2x2(out.v, g.v, pos.v, s.W, s.OH, s.OW)
		} else {
			maxPoolGradPlane(out.v, g.v, pos.v, s)
		}
		g.done()
		pos.done()
		commit(db, i*hw, out)
	})
}

// clearUncovered zeroes the elements of a plane no 2x2 window at stride 2
// covers: the last column when W is odd, the last row when H is.
func clearUncovered[T float32 | uint16](plane []T, s device.PoolShape) {
	if s.W > 2*s.OW {
		for r := range 2 * s.OH {
			clear(plane[r*s.W+2*s.OW : (r+1)*s.W])
		}
	}
	clear(plane[2*s.OH*s.W:])
}

// badPos panics on a position MaxPool cannot have written.
func badPos(p float32, s device.PoolShape) {
	panic(fmt.Sprintf("cpu: MaxPoolGrad: arg holds %v, not a position in a %dx%d window", p, s.KH, s.KW))
}

// maxPoolGrad2x2 is maxPoolGradPlane for 2x2 windows at stride 2: every
// window is disjoint, so each dy lands in its own element of the cleared dx.
func maxPoolGrad2x2(dx, dy, pos []float32, w, oh, ow int) {
	for r := range oh {
		// The window at (r, c) starts at element (2r)*w + 2c; position k is
		// row k>>1 and column k&1 within it.
		base := dx[2*r*w : (2*r+2)*w]
		gr, pr := dy[r*ow:(r+1)*ow], pos[r*ow:(r+1)*ow]
		for c, p := range pr {
			k := uint(int32(p))
			if k > 3 || float32(k) != p {
				badPos(p, device.PoolShape{KH: 2, KW: 2})
			}
			base[(k>>1)*uint(w)+2*uint(c)+k&1] += gr[c]
		}
	}
}

// maxPoolGrad2x2Bits is maxPoolGrad2x2 for 16-bit dx and dy, moving dy's
// bits. A -0 becomes +0, as 0 + -0 does; a NaN keeps its payload.
func maxPoolGrad2x2Bits(dx, dy []uint16, pos []float32, w, oh, ow int) {
	for r := range oh {
		base := dx[2*r*w : (2*r+2)*w]
		gr, pr := dy[r*ow:(r+1)*ow], pos[r*ow:(r+1)*ow]
		for c, p := range pr {
			k := uint(int32(p))
			if k > 3 || float32(k) != p {
				badPos(p, device.PoolShape{KH: 2, KW: 2})
			}
			v := gr[c]
			if v == 0x8000 {
				v = 0
			}
			base[(k>>1)*uint(w)+2*uint(c)+k&1] = v
		}
	}
}

// maxPoolGradPlane is MaxPoolGrad on one plane for any geometry.
func maxPoolGradPlane(dx, dy, pos []float32, s device.PoolShape) {
	kk := s.KH * s.KW
	for oh := range s.OH {
		for ow := range s.OW {
			p := pos[oh*s.OW+ow]
			k := int(int32(p))
			if k < 0 || k >= kk || float32(k) != p {
				badPos(p, s)
			}
			ih, iw := oh*s.StrideH-s.PadH+k/s.KW, ow*s.StrideW-s.PadW+k%s.KW
			if ih < 0 || ih >= s.H || iw < 0 || iw >= s.W {
				badPos(p, s)
			}
			dx[ih*s.W+iw] += dy[oh*s.OW+ow]
		}
	}
}

// AvgPool writes each window's mean, padding counted as zeros.
func (d *Device) AvgPool(y, x device.Buffer, s device.PoolShape) {
	yb, xb := d.buf(y, "AvgPool"), d.buf(x, "AvgPool")
	checkPool(s)
	hw, ohw := s.H*s.W, s.OH*s.OW
	d.checkLen("AvgPool", s.N*s.C*hw, xb)
	d.checkLen("AvgPool", s.N*s.C*ohw, yb)
	d.forPlanes(s.N*s.C, hw, func(i int) {
		in, out := read(xb, i*hw, (i+1)*hw), writeView(yb, i*ohw, (i+1)*ohw)
		for oh := range s.OH {
			h0, h1, eh := window(oh, s.StrideH, s.PadH, s.KH, s.H)
			for ow := range s.OW {
				w0, w1, ew := window(ow, s.StrideW, s.PadW, s.KW, s.W)
				var sum float32
				for h := h0; h < h1; h++ {
					for _, v := range in.v[h*s.W+w0 : h*s.W+w1] {
						sum += v
					}
				}
				out.v[oh*s.OW+ow] = sum / float32(eh*ew)
			}
		}
		in.done()
		commit(yb, i*ohw, out)
	})
}

// AvgPoolGrad spreads dy evenly over each window.
func (d *Device) AvgPoolGrad(dx, dy device.Buffer, s device.PoolShape) {
	db, gb := d.buf(dx, "AvgPoolGrad"), d.buf(dy, "AvgPoolGrad")
	checkPool(s)
	hw, ohw := s.H*s.W, s.OH*s.OW
	d.checkLen("AvgPoolGrad", s.N*s.C*hw, db)
	d.checkLen("AvgPoolGrad", s.N*s.C*ohw, gb)
	d.forPlanes(s.N*s.C, hw, func(i int) {
		g, out := read(gb, i*ohw, (i+1)*ohw), writeView(db, i*hw, (i+1)*hw)
		clear(out.v)
		for oh := range s.OH {
			h0, h1, eh := window(oh, s.StrideH, s.PadH, s.KH, s.H)
			for ow := range s.OW {
				w0, w1, ew := window(ow, s.StrideW, s.PadW, s.KW, s.W)
				v := g.v[oh*s.OW+ow] / float32(eh*ew)
				for h := h0; h < h1; h++ {
					row := out.v[h*s.W+w0 : h*s.W+w1]
					for j := range row {
						row[j] += v
					}
				}
			}
		}
		g.done()
		commit(db, i*hw, out)
	})
}

// Moments computes per-channel mean and biased variance over n and hw, in
// float64: each plane's sum in sixteen lanes (sum64), the planes' sums in
// image order. The planes are read in memory order, each plane's sum kept
// apart until its channel's are added.
func (d *Device) Moments(mean, variance, x device.Buffer, n, c, hw int) {
	bs := d.f32("Moments", mean, variance)
	xb := d.buf(x, "Moments")
	d.checkLen("Moments", n*c*hw, xb)
	d.checkLen("Moments", c, bs[0])
	m := float64(n * hw)
	part, mus := getF64(n*c), getF64(c)
	p, mu := *part, *mus
	d.forPlanes(n*c, hw, func(i int) { p[i] = sumPlane(xb, i*hw, hw) })
	for ch := range c {
		var s float64
		for i := range n {
			s += p[i*c+ch]
		}
		mu[ch] = s / m
	}
	d.forPlanes(n*c, hw, func(i int) { p[i] = sumSqDevPlane(xb, i*hw, hw, mu[i%c]) })
	for ch := range c {
		var q float64
		for i := range n {
			q += p[i*c+ch]
		}
		bs[0].f32[ch] = float32(mu[ch])
		bs[1].f32[ch] = float32(q / m)
	}
	putF64(part)
	putF64(mus)
}

// affine returns gamma[ch] and beta[ch], 1 and 0 where the buffers are nil.
func affine(gamma, beta *Buffer, ch int) (float32, float32) {
	g, b := float32(1), float32(0)
	if gamma != nil {
		g = gamma.f32[ch]
	}
	if beta != nil {
		b = beta.f32[ch]
	}
	return g, b
}

// BatchNorm computes y = (x - mean) * invstd * gamma + beta per channel,
// as x*scale + shift.
func (d *Device) BatchNorm(y, x, mean, invstd, gamma, beta device.Buffer, n, c, hw int) {
	d.batchNorm("BatchNorm", d.buf(y, "BatchNorm"), d.buf(x, "BatchNorm"), nil, mean, invstd, gamma, beta, n, c, hw, 0)
}

// BatchNormGrad computes dx, dgamma and dbeta of training-mode BatchNorm,
// its sums in float64 as Moments makes them.
func (d *Device) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma device.Buffer, n, c, hw int) {
	d.batchNormGrad("BatchNormGrad", dx, nil, dgamma, dbeta, dy, nil, x, mean, invstd, gamma, n, c, hw, 0)
}
