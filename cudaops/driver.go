package cudaops

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The CUDA driver API, loaded from libcuda.so.1 at run time through purego,
// so that no cgo is needed and a machine without the driver gets an error
// value instead of a failed start. Only the entry points of the driver ABI
// that every driver since CUDA 11 exports are used (the _v2 names where
// cuda.h maps to them), so CUDA 11.8 through 13 drivers all work.

// CUresult codes the package tells apart.
const (
	cudaSuccess           = 0
	cudaErrorOutOfMemory  = 2
	cudaErrorNoDevice     = 100
	cudaErrorInvalidValue = 1
)

// Device attributes (CUdevice_attribute).
const (
	attrMultiprocessorCount = 16
	attrComputeMajor        = 75
	attrComputeMinor        = 76
)

// JIT options for cuModuleLoadDataEx (CUjit_option).
const (
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
)

// cuStreamNonBlocking makes our stream independent of the legacy default
// stream, which other libraries in the process may use.
const cuStreamNonBlocking = 1

// driver holds libcuda's entry points.
type driver struct {
	path string

	cuInit, cuDriverGetVersion, cuDeviceGetCount, cuDeviceGet, cuDeviceGetName,
	cuDeviceTotalMem, cuDeviceGetAttribute,
	cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease, cuCtxSetCurrent,
	cuStreamCreate, cuStreamSynchronize, cuStreamDestroy,
	cuMemAlloc, cuMemFree, cuMemGetInfo,
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync, cuMemsetD8Async, cuMemsetD32Async,
	cuModuleLoadDataEx, cuModuleGetFunction, cuModuleUnload, cuLaunchKernel,
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime, cuEventDestroy,
	cuGetErrorName, cuGetErrorString uintptr
}

var (
	driverOnce sync.Once
	theDriver  *driver
	driverErr  error
)

// loadDriver opens libcuda.so.1 once per process and runs cuInit. Its
// errors start with "no CUDA driver" (the library is missing or too old)
// or "no CUDA device" (the driver found nothing to drive).
func loadDriver() (*driver, error) {
	driverOnce.Do(func() { theDriver, driverErr = openDriver("libcuda.so.1") })
	return theDriver, driverErr
}

// openDriver loads the driver library lib (a soname or a path).
func openDriver(lib string) (*driver, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("no CUDA driver: cannot load %s: %v", lib, err)
	}
	d := &driver{path: mappedPath("libcuda.so")}
	if d.path == "" {
		d.path = lib
	}
	syms := []struct {
		fn    *uintptr
		names []string // the first one found is used
	}{
		{&d.cuInit, []string{"cuInit"}},
		{&d.cuDriverGetVersion, []string{"cuDriverGetVersion"}},
		{&d.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&d.cuDeviceGet, []string{"cuDeviceGet"}},
		{&d.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&d.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&d.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&d.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&d.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&d.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&d.cuStreamCreate, []string{"cuStreamCreate"}},
		{&d.cuStreamSynchronize, []string{"cuStreamSynchronize"}},
		{&d.cuStreamDestroy, []string{"cuStreamDestroy_v2", "cuStreamDestroy"}},
		{&d.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&d.cuMemFree, []string{"cuMemFree_v2"}},
		{&d.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&d.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}},
		{&d.cuMemcpyDtoHAsync, []string{"cuMemcpyDtoHAsync_v2"}},
		{&d.cuMemcpyDtoDAsync, []string{"cuMemcpyDtoDAsync_v2"}},
		{&d.cuMemsetD8Async, []string{"cuMemsetD8Async"}},
		{&d.cuMemsetD32Async, []string{"cuMemsetD32Async"}},
		{&d.cuModuleLoadDataEx, []string{"cuModuleLoadDataEx"}},
		{&d.cuModuleGetFunction, []string{"cuModuleGetFunction"}},
		{&d.cuModuleUnload, []string{"cuModuleUnload"}},
		{&d.cuLaunchKernel, []string{"cuLaunchKernel"}},
		{&d.cuEventCreate, []string{"cuEventCreate"}},
		{&d.cuEventRecord, []string{"cuEventRecord"}},
		{&d.cuEventSynchronize, []string{"cuEventSynchronize"}},
		// CUDA 12.8 added a _v2 with the same signature and CUDA 13's cuda.h
		// maps to it; drivers keep exporting the first for older programs.
		{&d.cuEventElapsedTime, []string{"cuEventElapsedTime", "cuEventElapsedTime_v2"}},
		{&d.cuEventDestroy, []string{"cuEventDestroy_v2", "cuEventDestroy"}},
		{&d.cuGetErrorName, []string{"cuGetErrorName"}},
		{&d.cuGetErrorString, []string{"cuGetErrorString"}},
	}
	for _, s := range syms {
		for _, name := range s.names {
			if p, err := purego.Dlsym(h, name); err == nil && p != 0 {
				*s.fn = p
				break
			}
		}
		if *s.fn == 0 {
			return nil, fmt.Errorf("no CUDA driver: %s lacks %s (driver older than CUDA 11?)", d.path, s.names[0])
		}
	}
	if err := d.check("cuInit", d.cuInit, 0); err != nil {
		return nil, fmt.Errorf("no CUDA device: %w", err)
	}
	return d, nil
}

// cuError is a failed driver call.
type cuError struct {
	call       string
	code       int
	name, desc string
}

func (e *cuError) Error() string {
	if e.desc != "" {
		return fmt.Sprintf("%s: %s (%d): %s", e.call, e.name, e.code, e.desc)
	}
	return fmt.Sprintf("%s: %s (%d)", e.call, e.name, e.code)
}

// isCode reports whether err is a driver error with the given CUresult.
func isCode(err error, code int) bool {
	var e *cuError
	return errors.As(err, &e) && e.code == code
}

// check calls fn and turns a CUresult other than CUDA_SUCCESS into an error
// naming the call.
//
// The go:uintptrescapes directive moves whatever the uintptr arguments
// point at to the heap and keeps it alive for the call, as for SyscallN,
// so callers may write uintptr(unsafe.Pointer(&x)) in the argument list.
//
//go:uintptrescapes
func (d *driver) check(call string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if code := result32(r); code != cudaSuccess {
		return d.errorOf(call, code)
	}
	return nil
}

// result32 is the status a C function returned in r: CUresult and
// cublasStatus_t are 32-bit enums, returned in the low half of the 64-bit
// register, whose high half the calling convention leaves undefined, so
// only the low half may be compared.
func result32(r uintptr) int { return int(int32(r)) }

// errorOf describes a CUresult with the driver's own name and text.
func (d *driver) errorOf(call string, code int) error {
	e := &cuError{call: call, code: code, name: fmt.Sprintf("CUDA error %d", code)}
	var s *byte
	if r, _, _ := purego.SyscallN(d.cuGetErrorName, uintptr(code), uintptr(unsafe.Pointer(&s))); result32(r) == cudaSuccess && s != nil {
		e.name = goString(s)
	}
	s = nil
	if r, _, _ := purego.SyscallN(d.cuGetErrorString, uintptr(code), uintptr(unsafe.Pointer(&s))); result32(r) == cudaSuccess && s != nil {
		e.desc = goString(s)
	}
	return e
}

// goString copies a NUL-terminated C string that p points at.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// cString returns s as a NUL-terminated byte slice for C.
func cString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// version reports the CUDA version the driver supports, as 1000*major +
// 10*minor (12040 for 12.4).
func (d *driver) version() (int, error) {
	var v int32
	err := d.check("cuDriverGetVersion", d.cuDriverGetVersion, uintptr(unsafe.Pointer(&v)))
	return int(v), err
}

// deviceCount is the number of CUDA devices the driver sees.
func (d *driver) deviceCount() (int, error) {
	var n int32
	err := d.check("cuDeviceGetCount", d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

// deviceProps reads what Info reports about device ordinal.
func (d *driver) deviceProps(ordinal int) (dev int32, info Info, err error) {
	if err = d.check("cuDeviceGet", d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal)); err != nil {
		return
	}
	name := make([]byte, 256)
	if err = d.check("cuDeviceGetName", d.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), uintptr(dev)); err != nil {
		return
	}
	info.Name = goString(&name[0])
	var total uint64
	if err = d.check("cuDeviceTotalMem", d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&total)), uintptr(dev)); err != nil {
		return
	}
	info.TotalMemory = int64(total)
	attr := func(a int) (int, error) {
		var v int32
		err := d.check("cuDeviceGetAttribute", d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev))
		return int(v), err
	}
	if info.Major, err = attr(attrComputeMajor); err != nil {
		return
	}
	if info.Minor, err = attr(attrComputeMinor); err != nil {
		return
	}
	info.Multiprocessors, err = attr(attrMultiprocessorCount)
	return
}
