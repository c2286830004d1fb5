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
// the driver, from the system's places or a Python environment's NVIDIA
// wheels (see searchPlaces.dirs). Only GEMM uses it.

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

// candidateDirs lists where to look for libcublas on this machine; see
// searchPlaces.
func candidateDirs() []string {
	home, _ := os.UserHomeDir()
	return searchPlaces{getenv: os.Getenv, home: home}.dirs()
}

// searchPlaces is what the cuBLAS search reads from its surroundings: the
// environment, the home directory, and root, the folder that stands for /
// (empty in use; a temporary tree in tests).
type searchPlaces struct {
	getenv func(string) string
	home   string
	root   string
}

// dirs lists the folders to look for libcublas in, in order:
// $MIXPREC_CUBLAS (one folder or a list), the dynamic loader's own search
// (""), $LD_LIBRARY_PATH, the CUDA toolkit's places, and the lib folders of
// NVIDIA's pip wheels (nvidia/cublas/lib for CUDA 11 and 12, nvidia/cu13/lib
// for 13) in the site-packages and dist-packages of the Python
// environments a machine with PyTorch usually has: $VIRTUAL_ENV,
// $CONDA_PREFIX, the prefix of every python3 on $PATH (and of the
// interpreter a venv's python3 links to), ~/.local, pyenv's versions, and
// /opt, /usr/local and /usr.
func (p searchPlaces) dirs() []string {
	dirs := []string{}
	dirs = append(dirs, splitList(p.getenv("MIXPREC_CUBLAS"))...)
	dirs = append(dirs, "")
	dirs = append(dirs, splitList(p.getenv("LD_LIBRARY_PATH"))...)
	for _, g := range []string{"/usr/local/cuda/lib64", "/usr/local/cuda/targets/*/lib", "/usr/local/cuda-*/lib64", "/opt/cuda/lib64"} {
		dirs = append(dirs, newestFirst(p.glob(p.at(g)))...)
	}
	var prefixes []string
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if d := p.getenv(v); d != "" {
			prefixes = append(prefixes, d)
		}
	}
	prefixes = append(prefixes, p.pythonPrefixes()...)
	if p.home != "" {
		prefixes = append(prefixes, filepath.Join(p.home, ".local"))
		prefixes = append(prefixes, newestFirst(p.glob(filepath.Join(p.home, ".pyenv", "versions", "*")))...)
	}
	for _, g := range []string{"/opt/*/.venv", "/opt/*/venv", "/opt/*", "/opt/conda", "/usr/local", "/usr"} {
		prefixes = append(prefixes, p.glob(p.at(g))...)
	}
	for _, pre := range prefixes {
		for _, sp := range []string{"lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages", "lib64/python3*/site-packages"} {
			dirs = append(dirs, newestFirst(p.glob(filepath.Join(pre, sp, "nvidia", "*", "lib")))...)
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

// at places an absolute path under p.root.
func (p searchPlaces) at(path string) string {
	if p.root == "" {
		return path
	}
	return filepath.Join(p.root, path)
}

func (p searchPlaces) glob(pattern string) []string {
	m, _ := filepath.Glob(pattern) // the only error is a malformed pattern
	return m
}

// pythonPrefixes returns the installation prefix (the parent of bin/) of
// every python3 on $PATH, and, where it is a link (a venv's is), the
// prefix of the interpreter it leads to: pip installs the wheels under the
// prefix of the Python that runs it.
func (p searchPlaces) pythonPrefixes() []string {
	var out []string
	for _, dir := range splitList(p.getenv("PATH")) {
		py := filepath.Join(dir, "python3")
		fi, err := os.Lstat(py)
		if err != nil {
			continue
		}
		out = append(out, filepath.Dir(filepath.Clean(dir)))
		if fi.Mode()&os.ModeSymlink != 0 {
			if real, err := filepath.EvalSymlinks(py); err == nil {
				out = append(out, filepath.Dir(filepath.Dir(real)))
			}
		}
	}
	return out
}

// splitList splits a colon-separated list of folders, dropping empty ones.
func splitList(s string) []string {
	var out []string
	for _, d := range filepath.SplitList(s) {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

// newestFirst sorts paths so that the higher version number comes first
// wherever two differ in one (python3.12 before python3.9, cuda-12.4
// before cuda-11.8), and otherwise by name, for a search order that does
// not depend on the order of directory entries.
func newestFirst(paths []string) []string {
	sort.SliceStable(paths, func(i, j int) bool { return versionLess(paths[j], paths[i]) })
	return paths
}

// versionLess compares a and b as strings in which runs of digits compare
// as numbers.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// cublasCandidate is one libcublas to try.
type cublasCandidate struct {
	version    int
	path       string // a path, or a bare soname for the loader's own search
	ltPath     string // its libcublasLt of the same version
	loaderOnly bool   // path is a bare soname
}

// cublasCandidates lists the libraries to try, newest soname first and, for
// each, in the order of dirs, keeping only files that exist (exists is
// os.Stat's verdict; tests pass their own). Versions newer than the driver
// (driverVersion is 1000*major+10*minor) are left out, each with a note
// saying why, since they would fail to initialise anyway.
func cublasCandidates(dirs []string, driverVersion int, exists func(string) bool) (cs []cublasCandidate, notes []string) {
	for _, v := range cublasVersions {
		if v*1000 > driverVersion {
			notes = append(notes, fmt.Sprintf("libcublas.so.%d: needs a CUDA %d driver, have %d.%d", v, v, driverVersion/1000, driverVersion%1000/10))
			continue
		}
		name, lt := fmt.Sprintf("libcublas.so.%d", v), fmt.Sprintf("libcublasLt.so.%d", v)
		for _, dir := range dirs {
			if dir == "" {
				cs = append(cs, cublasCandidate{version: v, path: name, ltPath: lt, loaderOnly: true})
				continue
			}
			path := filepath.Join(dir, name)
			if exists(path) {
				cs = append(cs, cublasCandidate{version: v, path: path, ltPath: filepath.Join(dir, lt)})
			}
		}
	}
	return cs, notes
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loadCublas finds, loads and initialises cuBLAS for the current context,
// returning the library and a handle. Every failure moves on to the next
// candidate, and the error lists them all.
func loadCublas(driverVersion int) (*cublas, uintptr, error) {
	dirs := candidateDirs()
	cs, tried := cublasCandidates(dirs, driverVersion, fileExists)
	for _, c := range cs {
		// libcublas needs libcublasLt of the same version; load it from
		// the same place first so the loader need not find it alone.
		if c.loaderOnly || fileExists(c.ltPath) {
			purego.Dlopen(c.ltPath, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		}
		lib, err := openCublas(c.path)
		if err != nil {
			// A soname the loader cannot find is the common case, not news.
			if !c.loaderOnly || !strings.Contains(err.Error(), "cannot open shared object file") {
				tried = append(tried, err.Error())
			}
			continue
		}
		h, err := lib.newHandle()
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", lib.path, err))
			continue
		}
		return lib, h, nil
	}
	searched := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if d != "" && fileExists(d) {
			searched = append(searched, d)
		}
	}
	tried = append(tried, fmt.Sprintf("no loadable libcublas.so.{13,12,11} through the loader's search path or in %d folders (%s), which include $MIXPREC_CUBLAS, $LD_LIBRARY_PATH, the CUDA toolkit's and the nvidia/*/lib folders of NVIDIA's pip wheels in the Python environments found",
		len(searched), strings.Join(searched, ", ")))
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
	code := result32(r)
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
