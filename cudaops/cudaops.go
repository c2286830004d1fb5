// Package cudaops is mixprec's CUDA backend: the device contract on an
// NVIDIA GPU, with the driver API and cuBLAS loaded at run time and our own
// F32/F16/BF16 kernels as embedded PTX.
//
// No cgo is involved: libcuda.so.1 and libcublas.so.N are opened with
// purego when a device is opened, so every program links this package and
// still runs on a machine without a GPU, where Open returns an error ("no
// CUDA driver: ..." or "no CUDA device: ...") and device.Default falls back
// to the CPU. A program links the backend in with a blank import:
//
//	import _ "github.com/mixprec/mixprec/cudaops"
//
// after which device.Open("cuda") (and -device auto) finds it.
//
// GEMM goes to cuBLAS (cublasGemmEx with F32 accumulation: tensor cores
// for F16 and BF16 inputs, plain SGEMM without TF32 for F32 ones, unless
// Options.TF32 is set). Every other kernel is ours, in kernels/*.cu,
// compiled by `make kernels` to PTX for compute_70 and compute_80 and
// JIT-compiled by the driver for the GPU present. The kernels reproduce the
// CPU backend's semantics (tie rules, padding divisors, the dropout
// stream), are deterministic (fixed reduction trees, no float atomics), and
// accumulate in float32 or wider.
//
// Memory comes from a caching allocator with size-bucketed free lists, as
// PyTorch's does, so a training step does not call cuMemAlloc per op;
// MemStats reports the bytes buffers hold by category and dtype exactly as
// the CPU backend does, and Reserved the memory held from the driver.
//
// Work is queued on one stream and runs asynchronously to the host: the
// copies to the host and Sync wait for it, and so do CrossEntropy(+Grad)
// (to check the labels), Embedding(+Grad) (to check the ids) and
// UnscaleCheck (to return its answer). A device is safe for use by several
// goroutines; its calls are serialised.
//
// The environment of device.Open("cuda"): MIXPREC_CUDA_DEVICE (the device
// number, default 0), MIXPREC_CUBLAS (a folder holding libcublas.so.N, when
// the search of the loader path, /usr/local/cuda and Python's nvidia wheels
// misses it), MIXPREC_CUDA_TF32=1 and MIXPREC_CUDA_ZERO_ON_FREE=1 (see
// Options).
package cudaops

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

func init() {
	device.Register("cuda", func() (device.Device, error) {
		ordinal := 0
		if s := os.Getenv("MIXPREC_CUDA_DEVICE"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("MIXPREC_CUDA_DEVICE=%q: want a device number", s)
			}
			ordinal = n
		}
		d, err := Open(ordinal, OptionsFromEnv())
		if err != nil {
			return nil, err
		}
		return d, nil
	})
}

// maxElems bounds a buffer's length: the kernels index with 32-bit ints,
// and an index plus a grid stride (at most maxGrid*blockSize) must not
// overflow.
const maxElems = 1<<31 - 1<<24

// Options are the settings of a device that change its results or its
// memory behaviour.
type Options struct {
	// ZeroOnFree zeroes a buffer's memory when it is freed, so no data
	// outlives its buffer in the allocator's cache (and a read of freed
	// memory through a stale pointer shows zeros, not old values).
	ZeroOnFree bool
	// TF32 lets F32 GEMMs use TF32 tensor cores (10-bit mantissa products),
	// which is faster and less exact. Off by default, as in PyTorch since
	// 1.12.
	TF32 bool
}

// OptionsFromEnv reads MIXPREC_CUDA_ZERO_ON_FREE=1 and MIXPREC_CUDA_TF32=1.
func OptionsFromEnv() Options {
	on := func(k string) bool {
		v, _ := strconv.ParseBool(os.Getenv(k))
		return v
	}
	return Options{ZeroOnFree: on("MIXPREC_CUDA_ZERO_ON_FREE"), TF32: on("MIXPREC_CUDA_TF32")}
}

// Info describes an opened device and the libraries behind it.
type Info struct {
	Ordinal         int
	Name            string // e.g. "NVIDIA H200"
	Major, Minor    int    // compute capability
	Multiprocessors int
	TotalMemory     int64 // bytes
	DriverVersion   int   // CUDA version the driver supports, 1000*major + 10*minor
	DriverPath      string
	CUBLASVersion   string // major.minor.patch
	CUBLASPath      string
	PTX             string // the virtual architecture of the loaded module, e.g. "compute_80"
	Options         Options
	// Warning says what the device does without, when it opened short of
	// something: no cuBLAS, so that its GEMMs run on mixprec's own kernel.
	Warning string
}

// Driver formats DriverVersion as major.minor.
func (i Info) Driver() string {
	return fmt.Sprintf("%d.%d", i.DriverVersion/1000, i.DriverVersion%1000/10)
}

// Device is one CUDA GPU. Make it with Open, or through
// device.Open("cuda").
type Device struct {
	g    gpu
	ks   *kernelSet
	info Info
	opts Options

	mu      sync.Mutex          // serialises everything below and all use of g
	pool    device.Pool[uint64] // accounting and the caching allocator (see alloc.go)
	flag    uint64              // 4 bytes of device memory for kernels' error flags
	closed  bool
	ownGemm bool // no cuBLAS: GEMMs launch mp_gemm
}

var _ device.Device = (*Device)(nil)

// Open opens CUDA device ordinal: it loads the driver and cuBLAS, retains
// the device's primary context, makes a stream and loads the kernels. The
// error says why when any of that is impossible; its text starts with "no
// CUDA driver" or "no CUDA device" when the machine has no usable GPU.
// Without a usable cuBLAS the device still opens: its GEMMs run on
// mixprec's own kernel (mp_gemm, right and far slower), and Info's Warning
// says so and why.
func Open(ordinal int, opts Options) (*Device, error) {
	drv, err := loadDriver()
	if err != nil {
		return nil, err
	}
	n, err := drv.deviceCount()
	if err != nil {
		return nil, fmt.Errorf("no CUDA device: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("no CUDA device: the driver (%s) reports none", drv.path)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("no CUDA device %d: the driver reports %d", ordinal, n)
	}
	dev, info, err := drv.deviceProps(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	info.Ordinal, info.DriverPath, info.Options = ordinal, drv.path, opts
	if info.DriverVersion, err = drv.version(); err != nil {
		return nil, err
	}
	ptx, arch := ptxFor(info.Major, info.Minor)
	info.PTX = arch
	ks, err := newKernelSet(ptx)
	if err != nil {
		return nil, err
	}

	g := &cudaGPU{drv: drv, dev: dev, tf32: opts.TF32}
	// Everything from here runs with the context current on this thread.
	ok := false
	defer func() {
		if !ok {
			g.close()
		}
		g.leave()
	}()
	runtime.LockOSThread() // released by g.leave
	if err := drv.check("cuDevicePrimaryCtxRetain", drv.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&g.ctx)), uintptr(dev)); err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	if err := drv.check("cuCtxSetCurrent", drv.cuCtxSetCurrent, g.ctx); err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	if err := drv.check("cuStreamCreate", drv.cuStreamCreate, uintptr(unsafe.Pointer(&g.stream)), cuStreamNonBlocking); err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	if err := g.loadModule(ptx, ks.all); err != nil {
		return nil, fmt.Errorf("cuda:%d: loading the %s kernels: %w", ordinal, arch, err)
	}
	ownGemm := false
	if g.blas, g.handle, err = loadCublas(info.DriverVersion); err != nil {
		g.blas, g.handle, ownGemm = nil, 0, true
		info.Warning = fmt.Sprintf("GEMMs run on mixprec's own kernel, far slower than cuBLAS: %v", err)
	} else {
		if err := g.blas.check("cublasSetStream", g.blas.setStream, g.handle, g.stream); err != nil {
			return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
		}
		info.CUBLASVersion, info.CUBLASPath = g.blas.version(), g.blas.path
	}
	d, err := newDevice(g, ks, info, opts)
	if err != nil {
		return nil, fmt.Errorf("cuda:%d: %w", ordinal, err)
	}
	d.ownGemm = ownGemm
	ok = true
	return d, nil
}

// newDevice wraps an opened gpu. The caller has entered g.
func newDevice(g gpu, ks *kernelSet, info Info, opts Options) (*Device, error) {
	d := &Device{g: g, ks: ks, info: info, opts: opts}
	d.initPool()
	flag, err := g.memAlloc(256)
	if err != nil {
		return nil, err
	}
	d.flag = flag
	return d, nil
}

// Info describes the device and the libraries it uses.
func (d *Device) Info() Info { return d.info }

// Name is "cuda:N".
func (d *Device) Name() string { return "cuda:" + strconv.Itoa(d.info.Ordinal) }

// enter takes the device for one call: the lock, and the context on this
// thread.
func (d *Device) enter() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		panic("cudaops: " + d.Name() + " used after Close")
	}
	if err := d.g.enter(); err != nil {
		d.mu.Unlock()
		panic("cudaops: " + d.Name() + ": " + err.Error())
	}
}

func (d *Device) leave() {
	d.g.leave()
	d.mu.Unlock()
}

// Buffer is device memory holding Len elements: float32 values, or the raw
// bits of F16 and BF16 values.
type Buffer struct {
	device.BufferHeader
	dev *Device
	ptr uint64 // 0 for an empty buffer
}

// Device is the owning device.
func (b *Buffer) Device() device.Device { return b.dev }

// Ptr is the buffer's device address (CUdeviceptr), for code that hands it
// to other CUDA libraries. It is valid until Free.
func (b *Buffer) Ptr() uint64 { return b.ptr }

// addr is the address of element i.
func (b *Buffer) addr(i int) uint64 { return b.ptr + uint64(i)*uint64(b.DType().Size()) }

// buf checks that b is a live buffer of this device. The caller holds d.mu.
func (d *Device) buf(b device.Buffer, op string) *Buffer {
	return device.Own[Buffer](d, b, "cudaops", op)
}

// Alloc returns a buffer of n elements with undefined contents. It panics
// when the GPU is out of memory even after the allocator's cache is
// released (the contract has no error for Alloc; a CPU out of memory dies
// too), with a *device.OutOfMemoryError, which the programs report in one
// line.
func (d *Device) Alloc(dt dtype.DType, n int, c device.Category) device.Buffer {
	if n < 0 || n > maxElems {
		panic(fmt.Sprintf("cudaops: Alloc of %d elements (want 0..%d)", n, maxElems))
	}
	if c >= device.NumCategories {
		panic(fmt.Sprintf("cudaops: Alloc with category %v", c))
	}
	device.Bytes(dt, n) // panics on an unknown dtype
	d.enter()
	defer d.leave()
	b := &Buffer{BufferHeader: device.NewBufferHeader(dt, n, c), dev: d}
	var err error
	if b.ptr, err = d.pool.Alloc(&b.BufferHeader); err != nil {
		if isCode(err, cudaErrorOutOfMemory) {
			panic(&device.OutOfMemoryError{Device: d.Name(), Request: device.Bytes(dt, n), Live: d.pool.MemStats().Live.Total, Err: err})
		}
		panic(fmt.Sprintf("cudaops: Alloc(%v, %d, %v): %v (%s reserved)", dt, n, c, err, device.FormatBytes(d.pool.MemStats().Reserved)))
	}
	return b
}

// Free returns b's memory to the allocator's cache (zeroed first with
// Options.ZeroOnFree) and its bytes from the accounting.
func (d *Device) Free(buf device.Buffer) {
	d.enter()
	defer d.leave()
	b := d.buf(buf, "Free")
	if err := d.pool.Free(&b.BufferHeader, b.ptr); err != nil {
		panic("cudaops: Free: " + err.Error())
	}
}

// SetCategory moves b to category c in the accounting.
func (d *Device) SetCategory(buf device.Buffer, c device.Category) {
	if c >= device.NumCategories {
		panic(fmt.Sprintf("cudaops: SetCategory to category %v", c))
	}
	d.enter()
	defer d.leave()
	d.pool.Recategorize(&d.buf(buf, "SetCategory").BufferHeader, c)
}

// CopyFromHost writes src into dst, rounding to dst's dtype on the host
// (so 16-bit data crosses the bus at 2 bytes an element).
func (d *Device) CopyFromHost(dst device.Buffer, src []float32) {
	d.enter()
	defer d.leave()
	b := d.buf(dst, "CopyFromHost")
	if len(src) != b.Len() {
		panic(fmt.Sprintf("cudaops: CopyFromHost of %d values into a buffer of %d", len(src), b.Len()))
	}
	if b.Len() == 0 {
		return
	}
	var err error
	if b.DType() == dtype.F32 {
		err = d.g.htod(b.ptr, unsafe.Pointer(&src[0]), int64(4*b.Len()))
	} else {
		h := make([]uint16, b.Len())
		dtype.Encode(b.DType(), h, src)
		err = d.g.htod(b.ptr, unsafe.Pointer(&h[0]), int64(2*b.Len()))
	}
	if err != nil {
		panic("cudaops: CopyFromHost: " + err.Error())
	}
}

// CopyBitsFromHost uploads the 16-bit patterns src into dst as they are.
func (d *Device) CopyBitsFromHost(dst device.Buffer, src []uint16) {
	d.enter()
	defer d.leave()
	b := d.buf(dst, "CopyBitsFromHost")
	device.CheckBits("cudaops", b.DType(), b.Len(), len(src))
	if b.Len() == 0 {
		return
	}
	if err := d.g.htod(b.ptr, unsafe.Pointer(&src[0]), int64(2*b.Len())); err != nil {
		panic("cudaops: CopyBitsFromHost: " + err.Error())
	}
}

// CopyToHost waits for the work queued so far and reads src into dst as
// float32.
func (d *Device) CopyToHost(dst []float32, src device.Buffer) {
	d.enter()
	defer d.leave()
	b := d.buf(src, "CopyToHost")
	if len(dst) != b.Len() {
		panic(fmt.Sprintf("cudaops: CopyToHost of a buffer of %d into %d values", b.Len(), len(dst)))
	}
	if b.Len() == 0 {
		return
	}
	var err error
	if b.DType() == dtype.F32 {
		err = d.g.dtoh(unsafe.Pointer(&dst[0]), b.ptr, int64(4*b.Len()))
	} else {
		h := make([]uint16, b.Len())
		err = d.g.dtoh(unsafe.Pointer(&h[0]), b.ptr, int64(2*b.Len()))
		dtype.Decode(b.DType(), dst, h)
	}
	if err != nil {
		panic("cudaops: CopyToHost: " + err.Error())
	}
}

// MemStats reports the accounting, with Reserved the bytes held from the
// driver (in buffers or cached for reuse).
func (d *Device) MemStats() device.MemStats { return d.pool.MemStats() }

// ResetPeak sets every peak to its live value.
func (d *Device) ResetPeak() { d.pool.ResetPeak() }

// Sync waits for all queued work and reports an error the GPU raised
// while running it.
func (d *Device) Sync() error {
	d.enter()
	defer d.leave()
	if err := d.g.sync(); err != nil {
		return fmt.Errorf("%s: %w", d.Name(), err)
	}
	return nil
}

// FreeMemory reports the device's free and total memory as the driver
// counts them (cuMemGetInfo; device.MemInfo). Blocks this device's
// allocator caches count as used there: MemStats' Reserved says how many.
func (d *Device) FreeMemory() (free, total int64, err error) {
	d.enter()
	defer d.leave()
	m, ok := d.g.(interface {
		memInfo() (free, total int64, err error)
	})
	if !ok {
		return 0, 0, fmt.Errorf("%s: free memory: not known to this backend", d.Name())
	}
	free, total, err = m.memInfo()
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", d.Name(), err)
	}
	return free, total, nil
}

// EmptyCache returns the allocator's cached blocks to the driver, as
// torch.cuda.empty_cache does; buffers in use are unaffected.
func (d *Device) EmptyCache() error {
	d.enter()
	defer d.leave()
	return d.pool.EmptyCache()
}

// Time runs fn, which queues work on d, and returns the GPU time between
// the start of that work and its end, measured with CUDA events.
func (d *Device) Time(fn func()) (time.Duration, error) {
	d.enter()
	t, err := d.g.newTimer()
	if err == nil {
		err = t.start()
	}
	d.leave()
	if err != nil {
		return 0, fmt.Errorf("%s: timing: %w", d.Name(), err)
	}
	fn()
	d.enter()
	defer d.leave()
	defer t.close()
	if err := t.stop(); err != nil {
		return 0, fmt.Errorf("%s: timing: %w", d.Name(), err)
	}
	ms, err := t.elapsed()
	if err != nil {
		return 0, fmt.Errorf("%s: timing: %w", d.Name(), err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close waits for queued work and releases the device: the cached memory,
// the kernels, cuBLAS and the context. Buffers still live are lost; using
// the device afterwards panics. A device from device.Open is shared by the
// whole program and is not closed.
func (d *Device) Close() error {
	d.enter()
	defer func() {
		d.closed = true
		d.g.leave()
		d.mu.Unlock()
	}()
	err := d.g.sync()
	if e := d.pool.EmptyCache(); err == nil {
		err = e
	}
	d.g.memFree(d.flag)
	d.g.close()
	return err
}

// readFlag copies the first int32 of the flag buffer to the host (waiting
// for the work queued before it).
func (d *Device) readFlag(op string) int32 {
	var v int32
	if err := d.g.dtoh(unsafe.Pointer(&v), d.flag, 4); err != nil {
		panic(fmt.Sprintf("cudaops: %s: %v", op, err))
	}
	return v
}

// element copies b's element i to the host as a float32 (waiting for the
// work queued before it), for a panic that names a bad label or id.
func (d *Device) element(b *Buffer, i int) float32 {
	if b.DType() == dtype.F32 {
		var v float32
		d.g.dtoh(unsafe.Pointer(&v), b.addr(i), 4)
		return v
	}
	var h uint16
	d.g.dtoh(unsafe.Pointer(&h), b.addr(i), 2)
	if b.DType() == dtype.F16 {
		return dtype.F16ToF32(h)
	}
	return dtype.BF16ToF32(h)
}

// setFlag queues flag = v.
func (d *Device) setFlag(op string, v uint32) {
	if err := d.g.memsetD32(d.flag, v, 1); err != nil {
		panic(fmt.Sprintf("cudaops: %s: %v", op, err))
	}
}
