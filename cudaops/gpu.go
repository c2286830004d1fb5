package cudaops

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"
)

// gpu is what Device needs from the hardware: memory, copies, launches,
// GEMM and timing on one stream. cudaGPU implements it with the driver and
// cuBLAS; the package's tests implement it without a GPU, to check
// everything the Go side decides (allocation, accounting, launch arguments
// against the PTX, GEMM operand layout) on any machine.
//
// Every call is made with Device.mu held, between enter and leave.
type gpu interface {
	// enter makes the device's context current on this goroutine's thread
	// (locked to it until leave, or not at all when it fails).
	enter() error
	leave()
	memAlloc(bytes int64) (uint64, error)
	memFree(ptr uint64) error
	// htod and dtoh return when the copy is done, so the host memory may
	// be reused at once.
	htod(dst uint64, src unsafe.Pointer, bytes int64) error
	dtoh(dst unsafe.Pointer, src uint64, bytes int64) error
	// dtod and the memsets are queued on the stream.
	dtod(dst, src uint64, bytes int64) error
	memsetD8(dst uint64, v byte, bytes int64) error
	memsetD32(dst uint64, v uint32, n int64) error
	// launch queues kernel k on grid blocks of blockSize threads; params
	// point at each argument's bytes.
	launch(k *kernel, grid int, params []unsafe.Pointer) error
	// gemm queues one cuBLAS GEMM (column-major, as cuBLAS sees it).
	gemm(c *gemmCall) error
	sync() error
	// timer returns a pair of events for timing work on the stream.
	newTimer() (timer, error)
	close()
}

// timer times the work queued between start and stop on the stream.
type timer interface {
	start() error
	stop() error
	// elapsed waits for stop and returns the milliseconds between the two.
	elapsed() (float32, error)
	close()
}

// blockSize is the threads per block of every launch; the kernels' block
// reductions are written for it (BLOCK in common.cuh).
const blockSize = 256

// cudaGPU is a device through the driver API and cuBLAS.
type cudaGPU struct {
	drv    *driver
	dev    int32
	ctx    uintptr
	stream uintptr
	module uintptr
	blas   *cublas
	handle uintptr // cublasHandle_t
	tf32   bool
}

func (g *cudaGPU) enter() error {
	runtime.LockOSThread()
	// Setting the context is a thread-local store in the driver; doing it
	// on every entry is cheaper than tracking which OS thread has it.
	if err := g.drv.check("cuCtxSetCurrent", g.drv.cuCtxSetCurrent, g.ctx); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

func (g *cudaGPU) leave() { runtime.UnlockOSThread() }

func (g *cudaGPU) memAlloc(bytes int64) (uint64, error) {
	var p uint64
	err := g.drv.check("cuMemAlloc", g.drv.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes))
	return p, err
}

func (g *cudaGPU) memFree(ptr uint64) error {
	return g.drv.check("cuMemFree", g.drv.cuMemFree, uintptr(ptr))
}

func (g *cudaGPU) htod(dst uint64, src unsafe.Pointer, bytes int64) error {
	if err := g.drv.check("cuMemcpyHtoDAsync", g.drv.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), g.stream); err != nil {
		return err
	}
	// Pageable host memory is staged before the call returns, but the
	// caller may also free the buffer it came from; waiting keeps the
	// contract simple (CopyFromHost is not on a training step's hot path).
	return g.sync()
}

func (g *cudaGPU) dtoh(dst unsafe.Pointer, src uint64, bytes int64) error {
	if err := g.drv.check("cuMemcpyDtoHAsync", g.drv.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(bytes), g.stream); err != nil {
		return err
	}
	return g.sync()
}

func (g *cudaGPU) dtod(dst, src uint64, bytes int64) error {
	return g.drv.check("cuMemcpyDtoDAsync", g.drv.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(bytes), g.stream)
}

func (g *cudaGPU) memsetD8(dst uint64, v byte, bytes int64) error {
	return g.drv.check("cuMemsetD8Async", g.drv.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(bytes), g.stream)
}

func (g *cudaGPU) memsetD32(dst uint64, v uint32, n int64) error {
	return g.drv.check("cuMemsetD32Async", g.drv.cuMemsetD32Async, uintptr(dst), uintptr(v), uintptr(n), g.stream)
}

func (g *cudaGPU) launch(k *kernel, grid int, params []unsafe.Pointer) error {
	return g.drv.check("cuLaunchKernel "+k.name, g.drv.cuLaunchKernel, k.fn,
		uintptr(grid), 1, 1, blockSize, 1, 1, 0, g.stream,
		uintptr(unsafe.Pointer(&params[0])), 0)
}

// memInfo is cuMemGetInfo: the bytes free on the device and its total.
func (g *cudaGPU) memInfo() (free, total int64, err error) {
	var f, t uint64 // size_t
	err = g.drv.check("cuMemGetInfo", g.drv.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	return int64(f), int64(t), err
}

func (g *cudaGPU) sync() error {
	return g.drv.check("cuStreamSynchronize", g.drv.cuStreamSynchronize, g.stream)
}

func (g *cudaGPU) gemm(c *gemmCall) error { return g.blas.gemm(g.handle, c, g.tf32) }

type cudaTimer struct {
	g          *cudaGPU
	start0, e1 uintptr
}

func (g *cudaGPU) newTimer() (timer, error) {
	t := &cudaTimer{g: g}
	if err := g.drv.check("cuEventCreate", g.drv.cuEventCreate, uintptr(unsafe.Pointer(&t.start0)), 0); err != nil {
		return nil, err
	}
	if err := g.drv.check("cuEventCreate", g.drv.cuEventCreate, uintptr(unsafe.Pointer(&t.e1)), 0); err != nil {
		g.drv.check("cuEventDestroy", g.drv.cuEventDestroy, t.start0)
		return nil, err
	}
	return t, nil
}

func (t *cudaTimer) start() error {
	return t.g.drv.check("cuEventRecord", t.g.drv.cuEventRecord, t.start0, t.g.stream)
}

func (t *cudaTimer) stop() error {
	return t.g.drv.check("cuEventRecord", t.g.drv.cuEventRecord, t.e1, t.g.stream)
}

func (t *cudaTimer) elapsed() (float32, error) {
	if err := t.g.drv.check("cuEventSynchronize", t.g.drv.cuEventSynchronize, t.e1); err != nil {
		return 0, err
	}
	var ms float32
	err := t.g.drv.check("cuEventElapsedTime", t.g.drv.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), t.start0, t.e1)
	return ms, err
}

func (t *cudaTimer) close() {
	t.g.drv.check("cuEventDestroy", t.g.drv.cuEventDestroy, t.start0)
	t.g.drv.check("cuEventDestroy", t.g.drv.cuEventDestroy, t.e1)
}

// close releases the stream, module, cuBLAS handle and context. The caller
// has entered.
func (g *cudaGPU) close() {
	if g.handle != 0 {
		g.blas.destroy(g.handle)
		g.handle = 0
	}
	if g.module != 0 {
		g.drv.check("cuModuleUnload", g.drv.cuModuleUnload, g.module)
		g.module = 0
	}
	if g.stream != 0 {
		g.drv.check("cuStreamDestroy", g.drv.cuStreamDestroy, g.stream)
		g.stream = 0
	}
	if g.ctx != 0 {
		g.drv.check("cuDevicePrimaryCtxRelease", g.drv.cuDevicePrimaryCtxRelease, uintptr(g.dev))
		g.ctx = 0
	}
}

// loadModule JIT-compiles ptx for the device and looks up every kernel.
func (g *cudaGPU) loadModule(ptx string, ks []*kernel) error {
	logBuf := make([]byte, 16<<10)
	opts := []uint32{jitErrorLogBuffer, jitErrorLogBufferSize}
	// An option's value is a pointer, or for a size the number stored in
	// the pointer's bits (cuda.h's convention). logBuf is heap memory, which
	// does not move, kept alive below.
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	err := g.drv.check("cuModuleLoadDataEx", g.drv.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&g.module)),
		uintptr(unsafe.Pointer(cString(ptx))), uintptr(len(opts)),
		uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
	runtime.KeepAlive(logBuf)
	if err != nil {
		if msg := strings.TrimSpace(goString(&logBuf[0])); msg != "" {
			return fmt.Errorf("%w: JIT log: %s", err, msg)
		}
		return err
	}
	for _, k := range ks {
		if err := g.drv.check("cuModuleGetFunction "+k.name, g.drv.cuModuleGetFunction,
			uintptr(unsafe.Pointer(&k.fn)), g.module, uintptr(unsafe.Pointer(cString(k.name)))); err != nil {
			return err
		}
	}
	return nil
}

// mappedPath returns the path of the first library mapped into this process
// whose file name contains name, from /proc/self/maps, or "" when none is.
func mappedPath(name string) string {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		p := fields[len(fields)-1]
		if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.Contains(p[i+1:], name) {
			return p
		}
	}
	return ""
}
