// Package cpu is mixprec's CPU backend: every kernel of the device contract
// in Go, parallel across goroutines for large inputs, with an assembly GEMM.
//
// 16-bit buffers are stored as raw bits; kernels widen blocks of them to
// float32, compute there and round once on store, which is how a GPU's
// half-precision kernels behave. Results never depend on the number of
// goroutines: work is split in fixed-size pieces and partial sums are
// combined in a fixed order.
package cpu

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu/internal/gemm"
	"github.com/mixprec/mixprec/dtype"
)

func init() {
	device.Register("cpu", func() (device.Device, error) { return NewWithOptions(OptionsFromEnv()), nil })
}

// Options are the settings of a CPU device that change its memory
// behaviour.
type Options struct {
	// ZeroOnFree zeroes a buffer's storage when it is freed, as the CUDA
	// backend's option of the same name does: no data outlives its buffer
	// in the cache of storage kept for reuse or in memory handed back to
	// Go's collector, and a read through a stale slice of a freed buffer
	// shows zeros, not old values.
	ZeroOnFree bool
}

// OptionsFromEnv reads MIXPREC_CPU_ZERO_ON_FREE=1: the options the device
// that device.Open("cpu") opens takes.
func OptionsFromEnv() Options {
	on, _ := strconv.ParseBool(os.Getenv("MIXPREC_CPU_ZERO_ON_FREE"))
	return Options{ZeroOnFree: on}
}

// Device is the CPU backend. The zero value is not usable; call New.
//
// A Device owns up to GOMAXPROCS-1 helper goroutines that its kernels share
// their work with. They start when a kernel first has work for them and
// stop at Close, or when the Device is no longer referenced and Go's
// collector reclaims it, so a program (or a test) that makes many devices
// and drops them does not accumulate goroutines.
type Device struct {
	// pool accounts memory and caches freed blocks by size in bytes,
	// whatever their dtype: a training step allocates the same sizes every
	// step, and reusing them saves Go from zeroing and collecting
	// megabytes per step.
	pool    device.Pool[[]float32]
	workers int
	helpers *helpers
	opts    Options

	// slab holds Buffer structs not yet handed out, so that Alloc makes
	// one Go allocation per bufSlab buffers instead of one each. A struct
	// is never handed out twice: a stale reference to a freed buffer
	// still finds it freed. mu guards it.
	mu   sync.Mutex
	slab []Buffer
}

// bufSlab is how many Buffer structs Alloc takes from Go at a time.
const bufSlab = 64

// DefaultCacheBytes bounds the memory a CPU device keeps for reuse after
// Free.
const DefaultCacheBytes = 2 << 30

// New returns a CPU device with its own memory accounting, using up to
// GOMAXPROCS goroutines per kernel, and the zero Options.
func New() *Device { return NewWithOptions(Options{}) }

// NewWithOptions returns a CPU device with the given options.
func NewWithOptions(o Options) *Device {
	d := &Device{workers: runtime.GOMAXPROCS(0), opts: o}
	d.pool.Limit = DefaultCacheBytes
	d.pool.Size = func(n int64) int64 { return 4 * int64(blockWords(n)) }
	d.pool.NewBlock = func(size int64) ([]float32, error) { return make([]float32, size/4), nil }
	d.helpers = newHelpers(d.workers - 1)
	// The helpers hold nothing that leads back to d, so an unreferenced
	// Device is collected and its helpers stopped.
	runtime.AddCleanup(d, (*helpers).stop, d.helpers)
	return d
}

// Close stops the device's helper goroutines and waits for them to exit.
// The device stays usable: its kernels then run on the calling goroutine
// alone. Close always returns nil; it never needs to be called for
// correctness, since a Device that is no longer referenced stops its
// helpers when it is collected.
func (d *Device) Close() error {
	d.helpers.stop()
	return nil
}

// EmptyCache returns the memory cached for reuse to Go's collector.
func (d *Device) EmptyCache() { d.pool.EmptyCache() }

// Buffer is CPU memory: float32 values, or the raw bits of 16-bit values,
// both stored in a block of float32 words (so that a freed block serves
// the next buffer of its size in bytes, whatever its dtype).
type Buffer struct {
	device.BufferHeader
	dev *Device
	// dt and n are the header's DType() and Len(), which never change, as
	// fields: the kernels read them (gemm.go, relu.go and convsimd_amd64.go
	// among them).
	dt  dtype.DType
	n   int
	f32 []float32 // F32 storage
	u16 []uint16  // F16 and BF16 storage: a view of the block's words
	// host is set for a buffer over its caller's memory (ViewHost), which
	// Free must not hand to the cache.
	host bool
}

// Device is the owning device.
func (b *Buffer) Device() device.Device { return b.dev }

// words returns the block holding b's storage.
func (b *Buffer) words() []float32 {
	if b.dt == dtype.F32 {
		return b.f32[:cap(b.f32)]
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b.u16))), blockWords(b.Bytes()))
}

// blockWords is how many float32 words hold size bytes.
func blockWords(size int64) int { return int((size + 3) / 4) }

// Float32s returns the storage of an F32 buffer, for tests and host code
// that want to read it without a copy. It panics for 16-bit buffers.
func (b *Buffer) Float32s() []float32 {
	if b.dt != dtype.F32 {
		panic("cpu: Float32s on a " + b.dt.String() + " buffer")
	}
	return b.f32
}

// Name is "cpu".
func (d *Device) Name() string { return "cpu" }

// Alloc returns a buffer whose contents are undefined: storage freed
// earlier is reused when a block of the same size in bytes is cached.
func (d *Device) Alloc(dt dtype.DType, n int, c device.Category) device.Buffer {
	if n < 0 {
		panic(fmt.Sprintf("cpu: Alloc of %d elements", n))
	}
	device.Bytes(dt, n) // panics on an unknown dtype
	d.mu.Lock()
	b := d.newBuffer(dt, n, c)
	d.mu.Unlock()
	words, _ := d.pool.Alloc(&b.BufferHeader) // Go's heap has no error to return
	if dt == dtype.F32 {
		b.f32 = words[:n]
	} else {
		b.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(words))), n)
	}
	return b
}

// Free returns b's storage to the cache (or to Go's collector when the
// cache is full), zeroed first with Options.ZeroOnFree, and its bytes to
// the accounting.
func (d *Device) Free(buf device.Buffer) {
	b := d.buf(buf, "Free")
	if b.host {
		d.pool.FreeView(&b.BufferHeader)
	} else {
		if d.opts.ZeroOnFree && b.n > 0 {
			clear(b.words()) // the whole block: the next buffer of its size may see all of it
		}
		d.pool.Free(&b.BufferHeader, b.words())
	}
	b.f32, b.u16 = nil, nil
}

// newBuffer takes a Buffer struct from the slab and sets its header, with
// no storage yet; d.mu must be held.
func (d *Device) newBuffer(dt dtype.DType, n int, c device.Category) *Buffer {
	if len(d.slab) == 0 {
		d.slab = make([]Buffer, bufSlab)
	}
	b := &d.slab[0]
	d.slab = d.slab[1:]
	*b = Buffer{BufferHeader: device.NewBufferHeader(dt, n, c), dev: d, dt: dt, n: n}
	return b
}

// ViewHost returns a buffer over f32 (dt F32) or bits (dt F16 or BF16)
// where they are: device.HostViewer. Its kernels read and write that
// memory, and Free leaves it to its owner.
func (d *Device) ViewHost(dt dtype.DType, f32 []float32, bits []uint16, c device.Category) device.Buffer {
	n := len(f32)
	switch {
	case dt == dtype.F32 && bits == nil:
	case (dt == dtype.F16 || dt == dtype.BF16) && f32 == nil:
		n = len(bits)
	default:
		panic(fmt.Sprintf("cpu: ViewHost of %v with %d float32 values and %d 16-bit patterns; want float32 values for f32, patterns for f16 and bf16", dt, len(f32), len(bits)))
	}
	d.mu.Lock()
	b := d.newBuffer(dt, n, c)
	d.mu.Unlock()
	b.host = true
	if dt == dtype.F32 {
		b.f32 = f32[:n:n]
	} else {
		b.u16 = bits[:n:n]
	}
	d.pool.AccountView(&b.BufferHeader)
	return b
}

// SetCategory moves b to category c in the accounting.
func (d *Device) SetCategory(buf device.Buffer, c device.Category) {
	d.pool.Recategorize(&d.buf(buf, "SetCategory").BufferHeader, c)
}

// CopyFromHost writes src into dst, rounding to dst's dtype.
func (d *Device) CopyFromHost(dst device.Buffer, src []float32) {
	b := d.buf(dst, "CopyFromHost")
	if len(src) != b.n {
		panic(fmt.Sprintf("cpu: CopyFromHost of %d values into a buffer of %d", len(src), b.n))
	}
	if b.dt == dtype.F32 {
		copy(b.f32, src)
		return
	}
	if b.n <= convGrain {
		dtype.Encode(b.dt, b.u16, src)
		return
	}
	d.parallelGrain(b.n, convGrain, func(lo, hi int) { dtype.Encode(b.dt, b.u16[lo:hi], src[lo:hi]) })
}

// CopyBitsFromHost copies the 16-bit patterns src into dst.
func (d *Device) CopyBitsFromHost(dst device.Buffer, src []uint16) {
	b := d.buf(dst, "CopyBitsFromHost")
	device.CheckBits("cpu", b.dt, b.n, len(src))
	copy(b.u16, src)
}

// CopyToHost reads src into dst as float32.
func (d *Device) CopyToHost(dst []float32, src device.Buffer) {
	b := d.buf(src, "CopyToHost")
	if len(dst) != b.n {
		panic(fmt.Sprintf("cpu: CopyToHost of a buffer of %d into %d values", b.n, len(dst)))
	}
	if b.dt == dtype.F32 {
		copy(dst, b.f32)
		return
	}
	if b.n <= convGrain {
		dtype.Decode(b.dt, dst, b.u16)
		return
	}
	d.parallelGrain(b.n, convGrain, func(lo, hi int) { dtype.Decode(b.dt, dst[lo:hi], b.u16[lo:hi]) })
}

// MemStats reports the accounting; Reserved adds the bytes cached for reuse.
func (d *Device) MemStats() device.MemStats { return d.pool.MemStats() }

// ResetPeak sets every peak to its live value.
func (d *Device) ResetPeak() { d.pool.ResetPeak() }

// Sync returns nil: CPU kernels finish before they return.
func (d *Device) Sync() error { return nil }

// buf checks that b is a live buffer of this device.
func (d *Device) buf(b device.Buffer, op string) *Buffer { return device.Own[Buffer](d, b, "cpu", op) }

// grain is the number of elements below which a kernel does not bother to
// share its work, and the size of the pieces it splits larger work into.
const grain = 1 << 14

// convGrain is grain for conversions between dtypes (Copy across dtypes,
// CopyFromHost and CopyToHost of 16-bit storage). A conversion is a
// stream through memory that one core converts at about 0.04 ns an
// element when it is in cache; the ones of a training step are not (the
// MNIST MLP's largest, its 200,704-element weight gradient under f16
// autocast, took 54 µs on one core in the step). It was 1 << 18 while
// waking a helper took tens of microseconds; now that the GEMM's helpers
// poll for the device's kernels too, four pieces of 1 << 16 took that
// conversion to 42 µs, and with minParallel the f16 epoch 1.03x (12
// alternated pairs).
const convGrain = 1 << 16

// minParallel is the size below which an elementwise kernel (parallel)
// runs its pieces on the calling goroutine alone: for a ReLU or an
// optimiser step of a few tens of thousands of elements, a couple of
// microseconds of work, handing half to a helper costs more than it saves.
// The pieces stay those of grain, so the bits do not change. With the
// convGrain above, one-epoch MNIST MLP, 12 alternated pairs against both
// at their old values (1 << 18 and grain): f16 1.03x, FP32 1.005x.
const minParallel = 1 << 16

// parallel runs fn over [0, n) in pieces of at least grain elements, on up to
// d.workers goroutines (one when n is at most minParallel), and returns when
// all pieces are done.
func (d *Device) parallel(n int, fn func(lo, hi int)) {
	if n <= minParallel {
		for lo := 0; lo < n; lo += grain {
			fn(lo, min(lo+grain, n))
		}
		return
	}
	d.parallelGrain(n, grain, fn)
}

// parallelGrain is parallel with a piece size g: each piece is [i*g, (i+1)*g).
// Pieces depend only on n and g, never on the number of workers.
//
// fn escapes to the helpers, so the closure a kernel passes is allocated
// even when there turns out to be a single piece; kernels called on small
// buffers every step therefore run a single piece themselves and create
// the closure only on the path that calls parallelGrain.
//
// The calling goroutine offers the work to the device's helpers and starts
// on the pieces at once; each goroutine claims the next piece until none is
// left, and the caller then waits only for pieces a helper has begun. On a
// loaded machine, where a helper may take longer to wake than the kernel
// takes to run, the caller simply does more of the pieces itself.
func (d *Device) parallelGrain(n, g int, fn func(lo, hi int)) { d.parallelRunner(n, g, pieceFunc(fn)) }

// pieceRunner is a parallel kernel's pieces. A kernel called many times a
// step (a convolution's im2col, chunk by chunk) keeps its state in a
// struct it takes from a pool and passes that, so that it allocates
// nothing; others pass a closure as a pieceFunc, which the helpers' use
// puts on the heap.
type pieceRunner interface{ runPieces(lo, hi int) }

// pieceFunc is a closure as a pieceRunner.
type pieceFunc func(lo, hi int)

func (f pieceFunc) runPieces(lo, hi int) { f(lo, hi) }

// parallelRunner is parallelGrain for r.
func (d *Device) parallelRunner(n, g int, r pieceRunner) {
	if n <= 0 {
		return
	}
	g = max(g, 1)
	pieces := (n + g - 1) / g
	w := min(d.workers, pieces)
	if w <= 1 {
		for lo := 0; lo < n; lo += g {
			r.runPieces(lo, min(lo+g, n))
		}
		return
	}
	if pieces > maxPieces {
		panic(fmt.Sprintf("cpu: parallel work of %d pieces of %d; at most %d", pieces, g, maxPieces))
	}
	t := tasks.Get().(*task)
	t.r, t.n, t.g = r, n, g
	t.done.Add(pieces)
	t.claims.Store(uint64(pieces) << 32) // publishes the fields above
	k := w - 1
	if p := gemm.Polling(); p > 0 {
		// The GEMM's helpers poll for a while after each product, each
		// holding a core: a device helper woken now would wait for one to
		// block, so they take the kernel first.
		k -= gemm.Offer(t, min(k, p))
	}
	d.helpers.offer(t, k)
	t.work()
	t.done.Wait()
	// A helper may still receive t from the queue, or hold it, after its
	// pieces are gone (see task). Dropping r keeps such a stale task from
	// holding the kernel's buffers, and the Device, alive.
	t.r = nil
	tasks.Put(t)
}

// task is one parallelRunner call, shared with the helpers by pointer, and
// reused from call to call (tasks) so that a parallel kernel allocates
// nothing but its closure, if any. A helper reads a task's fields only after
// claiming one of its pieces, and claims are made on claims, which holds
// the number of pieces and the next one to claim: a helper that holds a
// task from an earlier call either finds no piece left, or claims a piece
// of the current call and runs it as any helper would.
type task struct {
	r      pieceRunner
	n, g   int
	claims atomic.Uint64  // pieces<<32 | the next piece to claim
	done   sync.WaitGroup // pieces not yet finished
}

// maxPieces is the most pieces a task's claim counter holds.
const maxPieces = 1<<31 - 1

var tasks = sync.Pool{New: func() any { return new(task) }}

// claim returns the next piece of t to run, or -1 when none is left.
func (t *task) claim() int {
	for {
		c := t.claims.Load()
		next, pieces := uint32(c), uint32(c>>32)
		if next >= pieces {
			return -1
		}
		if t.claims.CompareAndSwap(c, c+1) {
			return int(next)
		}
	}
}

// Work is work, for the GEMM's helpers (gemm.Work).
func (t *task) Work() { t.work() }

// work claims and runs pieces of t until none is left.
func (t *task) work() {
	for p := t.claim(); p >= 0; p = t.claim() {
		lo := p * t.g
		t.r.runPieces(lo, min(lo+t.g, t.n))
		t.done.Done()
	}
}

// helpers are a Device's goroutines for parallel kernels: n of them, blocked
// on a channel receive while idle, so that an idle device costs no CPU and
// a kernel call starts no goroutine.
type helpers struct {
	n       int
	tasks   chan *task
	quit    chan struct{}
	running atomic.Bool // started and not stopped: the fast path of offer
	mu      sync.Mutex  // guards started and stopped
	started bool
	stopped bool
	exited  sync.WaitGroup
}

func newHelpers(n int) *helpers {
	// Room for every helper of a few concurrent calls; when the queue is
	// full, a call just gets less help.
	return &helpers{n: n, tasks: make(chan *task, 4*max(n, 1)), quit: make(chan struct{})}
}

// offer hands t to up to k helpers without blocking, starting them on first
// use. A task left queued after its pieces are gone costs its eventual
// receiver one atomic add.
func (h *helpers) offer(t *task, k int) {
	k = min(k, h.n)
	if k <= 0 {
		return
	}
	if !h.running.Load() && !h.start() {
		return
	}
	for range k {
		select {
		case h.tasks <- t:
		default:
			return
		}
	}
}

// start starts the helpers unless they were stopped, and reports whether
// they are running.
func (h *helpers) start() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return false
	}
	if !h.started {
		h.started = true
		h.exited.Add(h.n)
		for range h.n {
			go h.run()
		}
		h.running.Store(true)
	}
	return true
}

// run is a helper's loop: it works on tasks until stop.
func (h *helpers) run() {
	defer h.exited.Done()
	for {
		select {
		case t := <-h.tasks:
			t.work()
		case <-h.quit:
			return
		}
	}
}

// stop ends the helpers (for good) and waits until they have exited. A
// helper in the middle of a task finishes its piece first.
func (h *helpers) stop() {
	h.mu.Lock()
	if !h.stopped {
		h.stopped = true
		h.running.Store(false)
		close(h.quit)
	}
	h.mu.Unlock()
	h.exited.Wait()
}

// scratch is a pool of float32 slices for widening 16-bit data.
var scratch = sync.Pool{New: func() any { s := make([]float32, 0, grain); return &s }}

func getScratch(n int) *[]float32 {
	p := scratch.Get().(*[]float32)
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	*p = (*p)[:n]
	return p
}

func putScratch(p *[]float32) { scratch.Put(p) }

// view is a float32 window [lo, hi) onto a buffer: the buffer's own memory
// for F32, a widened copy for 16-bit storage.
type view struct {
	v   []float32
	tmp *[]float32
}

// read returns a float32 view of b[lo:hi].
func read(b *Buffer, lo, hi int) view {
	if b.dt == dtype.F32 {
		return view{v: b.f32[lo:hi]}
	}
	t := getScratch(hi - lo)
	dtype.Decode(b.dt, *t, b.u16[lo:hi])
	return view{v: *t, tmp: t}
}

// writeView returns a float32 window to fill for b[lo:hi]; commit stores it.
func writeView(b *Buffer, lo, hi int) view {
	if b.dt == dtype.F32 {
		return view{v: b.f32[lo:hi]}
	}
	t := getScratch(hi - lo)
	return view{v: *t, tmp: t}
}

// commit rounds a write view into b[lo:hi] (a no-op for F32) and releases it.
func commit(b *Buffer, lo int, w view) {
	if w.tmp != nil {
		dtype.Encode(b.dt, b.u16[lo:lo+len(w.v)], w.v)
		putScratch(w.tmp)
	}
}

// done releases a read view.
func (v view) done() {
	if v.tmp != nil {
		putScratch(v.tmp)
	}
}

// get reads one element as float32.
func get(b *Buffer, i int) float32 {
	switch b.dt {
	case dtype.F32:
		return b.f32[i]
	case dtype.F16:
		return dtype.F16ToF32(b.u16[i])
	}
	return dtype.BF16ToF32(b.u16[i])
}

// set rounds v into element i.
func set(b *Buffer, i int, v float32) {
	switch b.dt {
	case dtype.F32:
		b.f32[i] = v
	case dtype.F16:
		b.u16[i] = dtype.F32ToF16(v)
	default:
		b.u16[i] = dtype.F32ToBF16(v)
	}
}

func (d *Device) checkLen(op string, n int, bufs ...*Buffer) {
	for _, b := range bufs {
		if b.n < n {
			panic(fmt.Sprintf("cpu: %s: buffer of %d elements, need %d", op, b.n, n))
		}
	}
}

// checkLenOf is checkLen for a kernel that takes an operation, naming both;
// the name is only formatted on failure, since a kernel must not allocate
// to check its arguments.
func (d *Device) checkLenOf(kernel string, op fmt.Stringer, n int, bufs ...*Buffer) {
	for _, b := range bufs {
		if b.n < n {
			d.checkLen(kernel+" "+op.String(), n, b)
		}
	}
}

var _ device.StepCaster = (*Device)(nil)
var _ device.UnscalingGemmer = (*Device)(nil)
var _ device.HostViewer = (*Device)(nil)
