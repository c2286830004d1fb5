package cudaops

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/mixprec/mixprec/dtype"
)

// cuBLAS, loaded at run time like the driver: the newest libcublas.so.N
// (N = 13, 12, 11) that loads, accepts our context and is not newer than
// the driver, from the directories candidateDirs lists. Only GEMM uses it.

// cuBLAS enums.
const (
	cublasOpN = 0
	cublasOpT = 1

	// cudaDataType_t
	cudaR32F  = 0
	cudaR16F  = 2
	cudaR16BF = 14

	// cublasComputeType_t
	cublasCompute32F         = 68
	cublasCompute32FFastTF32 = 77

	// cublasMath_t: the default math mode (no TF32 for F32 inputs; tensor
	// cores for 16-bit ones) with split-K reductions kept in F32 even when
	// C is 16-bit.
	cublasDefaultMath                           = 0
	cublasMathDisallowReducedPrecisionReduction = 16

	cublasGemmDefault = -1

	// libraryPropertyType
	propMajor = 0
	propMinor = 1
	propPatch = 2
)

// cublasVersions are the sonames tried, newest first.
var cublasVersions = []int{13, 12, 11}

// cublas holds one loaded libcublas's entry points.
type cublas struct {
	path                string
	major, minor, patch int

	create, destroyFn, setStream, setMathMode, getProperty, gemmEx, gemmStridedBatchedEx, statusString uintptr
}

// candidateDirs lists where to look for libcublas, in order: $MIXPREC_CUBLAS,
// the dynamic loader's own search (""), $LD_LIBRARY_PATH, the CUDA toolkit's
// default place, and the lib folders of NVIDIA's pip wheels
// (nvidia/cublas/lib for CUDA 11 and 12, nvidia/cu13/lib for 13) in the
// Python environments a machine with PyTorch usually has.
func candidateDirs() []string {
	dirs := []string{}
	if d := os.Getenv("MIXPREC_CUBLAS"); d != "" {
		dirs = append(dirs, d)
	}
	dirs = append(dirs, "")
	for _, d := range filepath.SplitList(os.Getenv("LD_LIBRARY_PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
	var roots []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		roots = append(roots, v)
	}
	if v := os.Getenv("CONDA_PREFIX"); v != "" {
		roots = append(roots, v)
	}
	if h, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(h, ".local"))
	}
	roots = append(roots, "/opt/*/.venv", "/opt/*/venv", "/opt/*", "/opt/conda", "/usr/local", "/usr")
	for _, r := range roots {
		for _, sp := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages"} {
			matches, _ := filepath.Glob(filepath.Join(r, sp, "nvidia", "*", "lib"))
			sort.Sort(sort.Reverse(sort.StringSlice(matches))) // cu13 before cublas, python3.12 before 3.11
			dirs = append(dirs, matches...)
		}
	}
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// loadCublas finds, loads and initialises cuBLAS for the current context,
// returning the library and a handle. driverVersion (1000*major+10*minor)
// rules out libraries newer than the driver, which would fail to
// initialise anyway; every other failure moves on to the next candidate,
// and the error lists them all.
func loadCublas(driverVersion int) (*cublas, uintptr, error) {
	var tried []string
	dirs := candidateDirs()
	for _, v := range cublasVersions {
		if v*1000 > driverVersion {
			tried = append(tried, fmt.Sprintf("libcublas.so.%d: needs a CUDA %d driver, have %d.%d", v, v, driverVersion/1000, driverVersion%1000/10))
			continue
		}
		for _, dir := range dirs {
			name := fmt.Sprintf("libcublas.so.%d", v)
			lt := fmt.Sprintf("libcublasLt.so.%d", v)
			path, ltPath := name, lt
			if dir != "" {
				path, ltPath = filepath.Join(dir, name), filepath.Join(dir, lt)
				if _, err := os.Stat(path); err != nil {
					continue
				}
			}
			// libcublas needs libcublasLt of the same version; load it from
			// the same place first so the loader need not find it alone.
			if _, err := os.Stat(ltPath); err == nil || dir == "" {
				purego.Dlopen(ltPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			}
			lib, err := openCublas(path)
			if err != nil {
				tried = append(tried, err.Error())
				continue
			}
			h, err := lib.newHandle()
			if err != nil {
				tried = append(tried, fmt.Sprintf("%s: %v", lib.path, err))
				continue
			}
			return lib, h, nil
		}
	}
	if len(tried) == 0 {
		tried = append(tried, "no libcublas.so.{13,12,11} on the loader path, $LD_LIBRARY_PATH, /usr/local/cuda/lib64, $MIXPREC_CUBLAS or a Python nvidia/*/lib folder")
	}
	return nil, 0, fmt.Errorf("no usable cuBLAS (set MIXPREC_CUBLAS to the folder holding libcublas.so.N): %s", strings.Join(tried, "; "))
}

func openCublas(path string) (*cublas, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	l := &cublas{path: path}
	if p := mappedPath(filepath.Base(path)); p != "" {
		l.path = p
	}
	for _, s := range []struct {
		fn   *uintptr
		name string
	}{
		{&l.create, "cublasCreate_v2"},
		{&l.destroyFn, "cublasDestroy_v2"},
		{&l.setStream, "cublasSetStream_v2"},
		{&l.setMathMode, "cublasSetMathMode"},
		{&l.getProperty, "cublasGetProperty"},
		{&l.gemmEx, "cublasGemmEx"},
		{&l.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx"},
	} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("%s lacks %s", l.path, s.name)
		}
		*s.fn = p
	}
	// Only for error messages; older cuBLAS 11 releases lack it.
	l.statusString, _ = purego.Dlsym(h, "cublasGetStatusString")
	for _, p := range []struct {
		typ int
		v   *int
	}{{propMajor, &l.major}, {propMinor, &l.minor}, {propPatch, &l.patch}} {
		var v int32
		if err := l.check("cublasGetProperty", l.getProperty, uintptr(p.typ), uintptr(unsafe.Pointer(&v))); err != nil {
			return nil, fmt.Errorf("%s: %v", l.path, err)
		}
		*p.v = int(v)
	}
	return l, nil
}

// Version is major.minor.patch.
func (l *cublas) version() string { return fmt.Sprintf("%d.%d.%d", l.major, l.minor, l.patch) }

// newHandle creates a cuBLAS handle on the current context.
func (l *cublas) newHandle() (uintptr, error) {
	var h uintptr
	if err := l.check("cublasCreate", l.create, uintptr(unsafe.Pointer(&h))); err != nil {
		return 0, err
	}
	if err := l.check("cublasSetMathMode", l.setMathMode, h, cublasDefaultMath|cublasMathDisallowReducedPrecisionReduction); err != nil {
		l.destroy(h)
		return 0, err
	}
	return h, nil
}

func (l *cublas) destroy(h uintptr) { l.check("cublasDestroy", l.destroyFn, h) }

// check calls a cuBLAS function and turns a status other than
// CUBLAS_STATUS_SUCCESS into an error. See driver.check for the directive.
//
//go:uintptrescapes
func (l *cublas) check(call string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	code := int(int32(r))
	if code == 0 {
		return nil
	}
	msg := ""
	if l.statusString != 0 {
		var s *byte
		p, _, _ := purego.SyscallN(l.statusString, uintptr(code))
		// The returned pointer is a static C string; read it through a
		// *byte variable so that no uintptr becomes a pointer.
		*(*uintptr)(unsafe.Pointer(&s)) = p
		msg = goString(s)
	}
	if msg == "" {
		msg = fmt.Sprintf("cublasStatus %d", code)
	}
	return fmt.Errorf("%s: %s (%d)", call, msg, code)
}

// gemmCall is one GEMM as cuBLAS sees it, column-major:
// C = alpha*op(A)*op(B) + beta*C for batch matrices, op(A) (m,k), op(B)
// (k,n), C (m,n) with leading dimension ldc. Device.Gemm builds it from a
// row-major GemmParams by swapping the operands.
type gemmCall struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        uint64 // addresses of the first matrices
	at, bt, ct     dtype.DType
	lda, ldb, ldc  int
	sa, sb, sc     int64 // batch strides in elements
	batch          int
}

func cudaType(dt dtype.DType) uintptr {
	switch dt {
	case dtype.F16:
		return cudaR16F
	case dtype.BF16:
		return cudaR16BF
	}
	return cudaR32F
}

func cublasOp(t bool) uintptr {
	if t {
		return cublasOpT
	}
	return cublasOpN
}

// gemm queues c on the handle's stream. Alpha and beta are host float32s
// (the default pointer mode), read during the call.
func (l *cublas) gemm(h uintptr, c *gemmCall, tf32 bool) error {
	compute := uintptr(cublasCompute32F)
	if tf32 && c.at == dtype.F32 {
		compute = cublasCompute32FFastTF32
	}
	alpha, beta := c.alpha, c.beta
	var algo int32 = cublasGemmDefault // an enum (int) of -1: the low 32 bits of its slot
	algoArg := uintptr(uint32(algo))
	if c.batch <= 1 {
		return l.check("cublasGemmEx", l.gemmEx, h, cublasOp(c.transA), cublasOp(c.transB),
			uintptr(c.m), uintptr(c.n), uintptr(c.k), uintptr(unsafe.Pointer(&alpha)),
			uintptr(c.a), cudaType(c.at), uintptr(c.lda),
			uintptr(c.b), cudaType(c.bt), uintptr(c.ldb),
			uintptr(unsafe.Pointer(&beta)),
			uintptr(c.c), cudaType(c.ct), uintptr(c.ldc),
			compute, algoArg)
	}
	return l.check("cublasGemmStridedBatchedEx", l.gemmStridedBatchedEx, h, cublasOp(c.transA), cublasOp(c.transB),
		uintptr(c.m), uintptr(c.n), uintptr(c.k), uintptr(unsafe.Pointer(&alpha)),
		uintptr(c.a), cudaType(c.at), uintptr(c.lda), uintptr(c.sa),
		uintptr(c.b), cudaType(c.bt), uintptr(c.ldb), uintptr(c.sb),
		uintptr(unsafe.Pointer(&beta)),
		uintptr(c.c), cudaType(c.ct), uintptr(c.ldc), uintptr(c.sc),
		uintptr(c.batch), compute, algoArg)
}
