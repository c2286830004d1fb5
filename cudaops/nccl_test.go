package cudaops

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ebitengine/purego"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// The tests in this file check the NCCL path without a GPU and without
// NCCL: the Go types of the bindings against their C prototypes (and those
// against nccl.h where one is installed), the calling convention against a
// stand-in libnccl compiled from C here, and the communicator's logic
// (dtypes, averaging, broadcast, barrier, timeouts, abort) over fake
// devices joined by an in-process stand-in for NCCL. nccl_gpu_test.go runs
// the real thing on GPUs.

// cTypeSize is the size in bytes of each C type the prototypes use, on the
// 64-bit Linux targets mixprec builds for.
var cTypeSize = map[string]uintptr{
	"int": 4, "size_t": 8,
	"ncclResult_t": 4, "ncclDataType_t": 4, "ncclRedOp_t": 4, // C enums are int-sized
	"ncclComm_t": 8, "cudaStream_t": 8, // opaque pointers
	"ncclUniqueId": ncclUniqueIDBytes,
}

// goTypeFits reports why the Go type gt cannot carry the C type ct, or ""
// when it can. Pointers travel as uintptr, unsafe.Pointer or a Go pointer
// to a value of the pointee's size; C int and the enums as int32 (purego
// passes them sign-extended in a 64-bit slot, as C does); size_t as
// uintptr or uint64; ncclUniqueId as a struct of its size, by value; a
// returned const char* as a Go string (purego copies it).
func goTypeFits(ct string, gt reflect.Type, isReturn bool) string {
	if strings.HasSuffix(ct, "*") {
		if isReturn && ct == "const char*" {
			if gt.Kind() == reflect.String {
				return ""
			}
			return fmt.Sprintf("a returned %s wants a Go string, not %v", ct, gt)
		}
		switch gt.Kind() {
		case reflect.Uintptr, reflect.UnsafePointer:
			return ""
		case reflect.Pointer:
			pointee := strings.TrimSpace(strings.TrimPrefix(strings.TrimSuffix(ct, "*"), "const "))
			want, ok := cTypeSize[pointee]
			if pointee == "void" || !ok {
				return fmt.Sprintf("%s points at %q, which only uintptr or unsafe.Pointer can carry", ct, pointee)
			}
			if got := gt.Elem().Size(); got != want {
				return fmt.Sprintf("%s points at %d bytes, %v at %d", ct, want, gt, got)
			}
			return ""
		}
		return fmt.Sprintf("the pointer %s cannot travel as %v", ct, gt)
	}
	want, ok := cTypeSize[ct]
	if !ok {
		return fmt.Sprintf("no rule for the C type %q", ct)
	}
	var kinds []reflect.Kind
	switch ct {
	case "int", "ncclResult_t", "ncclDataType_t", "ncclRedOp_t":
		kinds = []reflect.Kind{reflect.Int32}
	case "size_t":
		kinds = []reflect.Kind{reflect.Uintptr, reflect.Uint64}
	case "ncclComm_t", "cudaStream_t":
		kinds = []reflect.Kind{reflect.Uintptr, reflect.UnsafePointer}
	case "ncclUniqueId":
		kinds = []reflect.Kind{reflect.Struct}
	}
	for _, k := range kinds {
		if gt.Kind() == k {
			if gt.Size() != want {
				return fmt.Sprintf("%s is %d bytes, %v is %d", ct, want, gt, gt.Size())
			}
			return ""
		}
	}
	return fmt.Sprintf("%s cannot travel as %v (want one of %v)", ct, gt, kinds)
}

// TestNCCLBindings checks every bound Go function against the C prototype
// ncclProtos gives it: the number of parameters, each type's kind and
// size, the return type; and that purego accepts each signature on this
// platform (it checks argument classes and stack space when registering).
func TestNCCLBindings(t *testing.T) {
	var l ncclLib
	slots := l.slots()
	if len(slots) != len(ncclProtos) {
		t.Fatalf("%d Go functions for %d prototypes", len(slots), len(ncclProtos))
	}
	for i, p := range ncclProtos {
		ft := reflect.TypeOf(slots[i]).Elem()
		if ft.Kind() != reflect.Func {
			t.Errorf("%s: slot is %v, not a function", p.name, ft)
			continue
		}
		if ft.NumIn() != len(p.params) {
			t.Errorf("%s: the Go function takes %d arguments, the C function %d (%v)", p.name, ft.NumIn(), len(p.params), p.params)
			continue
		}
		for j, ct := range p.params {
			if why := goTypeFits(ct, ft.In(j), false); why != "" {
				t.Errorf("%s, argument %d: %s", p.name, j+1, why)
			}
		}
		if ft.NumOut() != 1 {
			t.Errorf("%s: the Go function returns %d values, want 1 (%s)", p.name, ft.NumOut(), p.ret)
		} else if why := goTypeFits(p.ret, ft.Out(0), true); why != "" {
			t.Errorf("%s, result: %s", p.name, why)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: purego refuses the signature %v: %v", p.name, ft, r)
				}
			}()
			purego.RegisterFunc(slots[i], 1) // never called
		}()
	}
	// The Go constants are the ones the table lists.
	for _, e := range ncclEnums {
		if e.value < 0 {
			t.Errorf("%s = %d", e.name, e.value)
		}
	}
}

// cHeader is what parseCHeader reads from a C header.
type cHeader struct {
	protos  map[string]ncclProto
	enums   map[string]int
	defines map[string]string
}

var (
	reBlockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	reLineComment  = regexp.MustCompile(`//[^\n]*`)
	reDefine       = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(.*)$`)
	rePreproc      = regexp.MustCompile(`(?m)^[ \t]*#.*$`)
	reEnumerator   = regexp.MustCompile(`\b(nccl\w+)\s*=\s*(-?(?:0[xX][0-9a-fA-F]+|\d+))\s*[,}\n]`)
	rePrototype    = regexp.MustCompile(`([A-Za-z_][\w\s*]*?)\b(nccl\w+)\s*\(([^()]*)\)\s*;`)
	reCToken       = regexp.MustCompile(`[A-Za-z_]\w*|\*`)
)

// parseCHeader reads a C header's function prototypes (types normalised
// as ncclProtos writes them), integer enumerators and macros. It knows
// just enough C for nccl.h: comments, line continuations and preprocessor
// lines are removed (so both branches of an #if are read, the first value
// of a name winning), and a prototype is a return type, a name, and a
// parenthesised list without nested parentheses, ending in a semicolon.
func parseCHeader(src string) cHeader {
	h := cHeader{protos: map[string]ncclProto{}, enums: map[string]int{}, defines: map[string]string{}}
	src = reBlockComment.ReplaceAllString(src, " ")
	src = reLineComment.ReplaceAllString(src, "")
	src = strings.ReplaceAll(src, "\\\n", " ")
	for _, m := range reDefine.FindAllStringSubmatch(src, -1) {
		if _, ok := h.defines[m[1]]; !ok {
			h.defines[m[1]] = strings.TrimSpace(m[2])
		}
	}
	src = rePreproc.ReplaceAllString(src, "")
	for _, m := range reEnumerator.FindAllStringSubmatch(src, -1) {
		if _, ok := h.enums[m[1]]; ok {
			continue
		}
		if v, err := strconv.ParseInt(m[2], 0, 64); err == nil {
			h.enums[m[1]] = int(v)
		}
	}
	for _, m := range rePrototype.FindAllStringSubmatch(src, -1) {
		if _, ok := h.protos[m[2]]; ok {
			continue
		}
		p := ncclProto{name: m[2], ret: cType(reCToken.FindAllString(m[1], -1))}
		if args := strings.TrimSpace(m[3]); args != "" && args != "void" {
			for _, a := range strings.Split(args, ",") {
				toks := reCToken.FindAllString(a, -1)
				ids := 0
				for _, tok := range toks {
					if tok != "*" {
						ids++
					}
				}
				if ids > 1 && toks[len(toks)-1] != "*" {
					toks = toks[:len(toks)-1] // the parameter's name
				}
				p.params = append(p.params, cType(toks))
			}
		}
		h.protos[p.name] = p
	}
	return h
}

// cType writes a type's tokens as ncclProtos does: words separated by
// spaces, stars attached ("const void*").
func cType(toks []string) string {
	var b strings.Builder
	for i, tok := range toks {
		if i > 0 && tok != "*" {
			b.WriteByte(' ')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// TestParseCHeader checks the parser on declarations written the ways C
// allows, so that a failure of TestNCCLHeader means the bindings, not the
// parser.
func TestParseCHeader(t *testing.T) {
	src := `/* a comment with ncclFake(int x); inside */
#define NCCL_UNIQUE_ID_BYTES 128
#define LONG_MACRO { 1, \
   2 }
typedef enum { ncclA = 0, ncclB=0x10,
#if defined(X)
               ncclC   = 9,
               ncclN   = 10
#else
               ncclN   = 9
#endif
} ncclT;
// ncclLine(int);
ncclResult_t  ncclF(const void* sendbuff, void *recvbuff, size_t count,
    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclF(int);
const char*  ncclG(ncclResult_t result);
ncclResult_t ncclH(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclV(void);
ncclResult_t  ncclW(const ncclComm_t comm, ncclResult_t *asyncError);
`
	h := parseCHeader(src)
	want := map[string]ncclProto{
		"ncclF": {name: "ncclF", ret: "ncclResult_t", params: []string{"const void*", "void*", "size_t", "ncclDataType_t", "ncclComm_t", "cudaStream_t"}},
		"ncclG": {name: "ncclG", ret: "const char*", params: []string{"ncclResult_t"}},
		"ncclH": {name: "ncclH", ret: "ncclResult_t", params: []string{"ncclComm_t*", "int", "ncclUniqueId", "int"}},
		"ncclV": {name: "ncclV", ret: "ncclResult_t"},
		"ncclW": {name: "ncclW", ret: "ncclResult_t", params: []string{"const ncclComm_t", "ncclResult_t*"}},
	}
	for name, w := range want {
		if got, ok := h.protos[name]; !ok || !reflect.DeepEqual(got, w) {
			t.Errorf("%s: got %+v (found %v), want %+v", name, got, ok, w)
		}
	}
	for _, name := range []string{"ncclFake", "ncclLine"} {
		if _, ok := h.protos[name]; ok {
			t.Errorf("%s, in a comment, was read as a prototype", name)
		}
	}
	if len(h.protos) != len(want) {
		t.Errorf("read %d prototypes, want %d: %v", len(h.protos), len(want), h.protos)
	}
	for name, v := range map[string]int{"ncclA": 0, "ncclB": 16, "ncclC": 9, "ncclN": 10} {
		if got, ok := h.enums[name]; !ok || got != v {
			t.Errorf("enumerator %s = %d (found %v), want %d", name, got, ok, v)
		}
	}
	if h.defines["NCCL_UNIQUE_ID_BYTES"] != "128" {
		t.Errorf("NCCL_UNIQUE_ID_BYTES = %q, want 128", h.defines["NCCL_UNIQUE_ID_BYTES"])
	}
}

// ncclHeaders lists where an nccl.h may be, in order: $MIXPREC_NCCL_H, the
// system's and the CUDA toolkit's include folders, and the include folder
// beside each lib folder of the library search (NVIDIA's nccl wheel has
// nvidia/nccl/include/nccl.h beside nvidia/nccl/lib).
func ncclHeaders() []string {
	var out []string
	if p := os.Getenv("MIXPREC_NCCL_H"); p != "" {
		out = append(out, p)
	}
	out = append(out, "/usr/include/nccl.h", "/usr/local/include/nccl.h", "/usr/local/cuda/include/nccl.h")
	if m, _ := filepath.Glob("/usr/local/cuda-*/include/nccl.h"); len(m) > 0 {
		out = append(out, newestFirst(m)...)
	}
	for _, d := range candidateDirs() {
		if filepath.Base(d) == "lib" {
			out = append(out, filepath.Join(filepath.Dir(d), "include", "nccl.h"))
		}
	}
	return out
}

// TestNCCLHeader checks ncclProtos, the enumerators and the size of the ID
// against an installed nccl.h (set MIXPREC_NCCL_H to name one), or skips.
func TestNCCLHeader(t *testing.T) {
	path := ""
	for _, p := range ncclHeaders() {
		if fileExists(p) {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no nccl.h here (set MIXPREC_NCCL_H): the bindings were checked against their table only")
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := parseCHeader(string(src))
	if _, ok := h.protos["ncclAllReduce"]; !ok {
		t.Fatalf("%s declares no ncclAllReduce: not NCCL's header", path)
	}
	t.Logf("checking against %s (NCCL %s.%s.%s)", path, h.defines["NCCL_MAJOR"], h.defines["NCCL_MINOR"], h.defines["NCCL_PATCH"])
	for _, p := range ncclProtos {
		got, ok := h.protos[p.name]
		switch {
		case !ok && p.since > 0:
			t.Logf("%s: absent (optional, NCCL %s and later)", p.name, ncclVersionString(p.since))
		case !ok:
			t.Errorf("%s: not declared in %s", p.name, path)
		case got.ret != p.ret || !reflect.DeepEqual(got.params, p.params):
			t.Errorf("%s: nccl.h declares %s %s(%s), the bindings say %s %s(%s)", p.name,
				got.ret, p.name, strings.Join(got.params, ", "), p.ret, p.name, strings.Join(p.params, ", "))
		}
	}
	for _, e := range ncclEnums {
		got, ok := h.enums[e.name]
		switch {
		case !ok && e.name == "ncclInProgress":
			t.Logf("%s: absent (NCCL before 2.14, which has no non-blocking calls)", e.name)
		case !ok:
			t.Errorf("%s: not in %s", e.name, path)
		case got != e.value:
			t.Errorf("%s = %d in nccl.h, %d here", e.name, got, e.value)
		}
	}
	if got := h.defines["NCCL_UNIQUE_ID_BYTES"]; got != strconv.Itoa(ncclUniqueIDBytes) {
		t.Errorf("NCCL_UNIQUE_ID_BYTES is %q in nccl.h, %d here", got, ncclUniqueIDBytes)
	}
}

// standInSource is a stand-in for libnccl.so.2 written from the prototypes
// NVIDIA documents: it records the arguments each call received, so that
// the bindings' calling convention (an ID of 128 bytes by value, size_t
// above 32 bits, enums, pointers) is checked against what a C compiler
// makes of those prototypes.
const standInSource = `
#include <stddef.h>
#include <string.h>
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct standInComm { int nranks, rank; } *ncclComm_t;
typedef void *cudaStream_t;

static struct standInComm theComm;
static long long logv[16];
static ncclResult_t asyncState;

ncclResult_t ncclGetVersion(int *v) { *v = VERSION; return 0; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + 3);
	return 0;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	int ok = 1;
	for (int i = 0; i < 128; i++) if ((unsigned char)id.internal[i] != (unsigned char)(255 - i)) ok = 0;
	logv[0] = nranks; logv[1] = rank; logv[2] = ok;
	if (nranks == 99) return 4;
	theComm.nranks = nranks; theComm.rank = rank; *comm = &theComm;
	return 0;
}
ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
	logv[3] = (long long)s; logv[4] = (long long)r; logv[5] = (long long)count;
	logv[6] = dt; logv[7] = op; logv[8] = comm == &theComm; logv[9] = (long long)stream;
	return 0;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t stream) {
	logv[3] = (long long)s; logv[4] = (long long)r; logv[5] = (long long)count;
	logv[6] = dt; logv[10] = root; logv[8] = comm == &theComm; logv[9] = (long long)stream;
	return 0;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *e) { *e = asyncState; return 0; }
#ifndef NO_ABORT
ncclResult_t ncclCommAbort(ncclComm_t comm) { logv[11]++; return 0; }
#endif
ncclResult_t ncclCommDestroy(ncclComm_t comm) { logv[12]++; return 0; }
const char *ncclGetErrorString(ncclResult_t r) { return r == 4 ? "invalid argument (stand-in)" : "remote process exited or there was a network error (stand-in)"; }
#ifndef NO_LAST_ERROR
const char *ncclGetLastError(ncclComm_t comm) { return "the last error of the stand-in"; }
#endif
void standInLog(long long *out) { memcpy(out, logv, sizeof logv); }
void standInSetAsync(int v) { asyncState = v; }
`

// buildStandIn compiles standInSource with the given -D flags into a
// libnccl.so.2 of its own folder, or skips the test without a C compiler.
func buildStandIn(t *testing.T, defines ...string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("no C compiler: the bindings' calling convention was not checked against C")
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "standin.c")
	if err := os.WriteFile(src, []byte(standInSource), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libnccl.so.2")
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", lib, src}, defines...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, out)
	}
	return lib
}

// standInLog reads what the stand-in's calls recorded.
func standInLog(t *testing.T, lib string) (log [16]int64, setAsync func(int32)) {
	t.Helper()
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	var get func(out *[16]int64)
	purego.RegisterLibFunc(&get, h, "standInLog")
	purego.RegisterLibFunc(&setAsync, h, "standInSetAsync")
	get(&log)
	return log, setAsync
}

// TestNCCLCallingConvention calls every binding of a stand-in libnccl
// compiled here from C and checks what the C side received and returned.
func TestNCCLCallingConvention(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the stand-in is a Linux shared library")
	}
	lib := buildStandIn(t, "-DVERSION=22304")
	l, err := openNCCL(lib)
	if err != nil {
		t.Fatal(err)
	}
	if l.version != 22304 || ncclVersionString(l.version) != "2.23.4" {
		t.Errorf("version %d (%s), want 22304 (2.23.4)", l.version, ncclVersionString(l.version))
	}
	var u ncclUniqueID
	if r := l.getUniqueID(&u); r != ncclSuccess {
		t.Fatalf("ncclGetUniqueId returned %d", r)
	}
	for i, b := range u.internal {
		if b != byte(i*7+3) {
			t.Fatalf("ID byte %d = %d, want %d", i, b, byte(i*7+3))
		}
	}
	// The ID goes by value: 128 bytes on the stack after the register
	// arguments, with rank still in a register.
	for i := range u.internal {
		u.internal[i] = byte(255 - i)
	}
	var comm uintptr
	if r := l.commInitRank(&comm, 3, u, 2); r != ncclSuccess || comm == 0 {
		t.Fatalf("ncclCommInitRank returned %d, comm %#x", r, comm)
	}
	log, setAsync := standInLog(t, lib)
	if log[0] != 3 || log[1] != 2 || log[2] != 1 {
		t.Errorf("ncclCommInitRank received nranks %d, rank %d, ID intact %v; want 3, 2, true", log[0], log[1], log[2] == 1)
	}
	err = l.check("ncclCommInitRank", l.commInitRank(&comm, 99, u, 0), 0)
	if want := "ncclCommInitRank: invalid argument (stand-in) (4)"; err == nil || err.Error() != want {
		t.Errorf("a failing ncclCommInitRank: %v, want %q", err, want)
	}

	// A count above 32 bits, and the engine's calls as the communicator makes them.
	e := &ncclGPU{lib: l, g: &cudaGPU{stream: 0x5eed}, comm: comm}
	const count = 1<<33 + 5
	if err := e.allReduce(0x7f00_0000_1000, count, ncclBfloat16, ncclSum); err != nil {
		t.Fatal(err)
	}
	log, _ = standInLog(t, lib)
	if log[3] != 0x7f00_0000_1000 || log[4] != 0x7f00_0000_1000 || log[5] != count || log[6] != ncclBfloat16 || log[7] != ncclSum || log[8] != 1 || log[9] != 0x5eed {
		t.Errorf("ncclAllReduce received send %#x recv %#x count %d dtype %d op %d comm ok %v stream %#x; want in place at 0x7f0000001000, %d, %d, %d, the comm, 0x5eed",
			log[3], log[4], log[5], log[6], log[7], log[8] == 1, log[9], int64(count), ncclBfloat16, ncclSum)
	}
	if err := e.broadcast(0x7f00_0000_2000, 17, ncclFloat16, 5); err != nil {
		t.Fatal(err)
	}
	log, _ = standInLog(t, lib)
	if log[3] != 0x7f00_0000_2000 || log[4] != 0x7f00_0000_2000 || log[5] != 17 || log[6] != ncclFloat16 || log[10] != 5 || log[8] != 1 || log[9] != 0x5eed {
		t.Errorf("ncclBroadcast received send %#x recv %#x count %d dtype %d root %d comm ok %v stream %#x", log[3], log[4], log[5], log[6], log[10], log[8] == 1, log[9])
	}

	// Asynchronous errors: ncclInProgress is not one; others carry NCCL's
	// text and, where the library has it, the last error's.
	for _, c := range []struct {
		state int32
		want  string
	}{
		{ncclSuccess, ""},
		{ncclInProgress, ""},
		{6, "asynchronous error: remote process exited or there was a network error (stand-in): the last error of the stand-in (6)"},
	} {
		setAsync(c.state)
		err := e.asyncError()
		if (err == nil) != (c.want == "") || (err != nil && err.Error() != c.want) {
			t.Errorf("async state %d: %v, want %q", c.state, err, c.want)
		}
	}
	setAsync(0)
	if r := l.commAbort(comm); r != ncclSuccess {
		t.Errorf("ncclCommAbort returned %d", r)
	}
	if r := l.commDestroy(comm); r != ncclSuccess {
		t.Errorf("ncclCommDestroy returned %d", r)
	}
	log, _ = standInLog(t, lib)
	if log[11] != 1 || log[12] != 1 {
		t.Errorf("ncclCommAbort called %d times, ncclCommDestroy %d; want 1 and 1", log[11], log[12])
	}
}

// TestNCCLLibraryChecks loads stand-ins that fall short: too old, missing
// a required function, missing an optional one.
func TestNCCLLibraryChecks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the stand-in is a Linux shared library")
	}
	old := buildStandIn(t, "-DVERSION=20909")
	if _, err := openNCCL(old); err == nil || !strings.Contains(err.Error(), "is NCCL 2.9.9; mixprec needs 2.10 or newer") {
		t.Errorf("NCCL 2.9.9: %v, want a refusal naming the version", err)
	}
	noAbort := buildStandIn(t, "-DVERSION=21003", "-DNO_ABORT")
	if _, err := openNCCL(noAbort); err == nil || !strings.Contains(err.Error(), "lacks ncclCommAbort") {
		t.Errorf("a library without ncclCommAbort: %v, want an error naming it", err)
	}
	noLast := buildStandIn(t, "-DVERSION=21003", "-DNO_LAST_ERROR")
	l, err := openNCCL(noLast)
	if err != nil {
		t.Fatalf("a library without the optional ncclGetLastError: %v", err)
	}
	if l.getLastError != nil {
		t.Errorf("ncclGetLastError bound though absent")
	}
	if err := l.errorOf("ncclAllReduce", 4, 0x1234); err.Error() != "ncclAllReduce: invalid argument (stand-in) (4)" {
		t.Errorf("errorOf without ncclGetLastError: %v", err)
	}
}

// TestNCCLLoadThroughEnvironment loads a stand-in named by
// $MIXPREC_LIBNCCL, as a program would, and makes an ID with it.
func TestNCCLLoadThroughEnvironment(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the stand-in is a Linux shared library")
	}
	lib := buildStandIn(t, "-DVERSION=22304")
	resetNCCL(t)
	t.Setenv("MIXPREC_LIBNCCL", lib)
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	if id[0] != 3 || id[1] != 10 || id[127] != byte((127*7+3)%256) {
		t.Errorf("NewNCCLID = %v..., want the stand-in's bytes 3, 10, ...", id[:4])
	}
}

// resetNCCL forgets the loaded library before and after a test that loads
// its own.
func resetNCCL(t *testing.T) {
	ncclMu.Lock()
	theNCCL = nil
	ncclMu.Unlock()
	t.Cleanup(func() {
		ncclMu.Lock()
		theNCCL = nil
		ncclMu.Unlock()
	})
}

// TestNCCLMissingLibrary checks the error where the library cannot be
// loaded: it names what was tried and how to fix it.
func TestNCCLMissingLibrary(t *testing.T) {
	resetNCCL(t)
	t.Setenv("MIXPREC_LIBNCCL", "/nonexistent/libnccl.so.2")
	_, err := NewNCCLID()
	if err == nil || !strings.HasPrefix(err.Error(), "no NCCL: cannot load /nonexistent/libnccl.so.2") || !strings.Contains(err.Error(), "MIXPREC_LIBNCCL") {
		t.Errorf("NewNCCLID with MIXPREC_LIBNCCL=/nonexistent/libnccl.so.2: %v; want an error naming the library and the variable", err)
	}
	t.Setenv("MIXPREC_LIBNCCL", "")
	if _, err := loadNCCL(); err == nil {
		t.Log("libnccl.so.2 loads on this machine: the search's error message was not checked")
	} else if !strings.HasPrefix(err.Error(), "no NCCL (install NVIDIA's nvidia-nccl-cu12 wheel or libnccl2, or set MIXPREC_LIBNCCL") {
		t.Errorf("loadNCCL without a library: %v; want it to say what to install", err)
	}
}

// TestNCCLSearch checks the order in which libnccl is looked for: an
// explicit $MIXPREC_LIBNCCL alone; else the loader, then the folders of the
// library search that hold one, among them the nvidia/nccl/lib of NVIDIA's
// wheel in a virtual environment.
func TestNCCLSearch(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root, []string{
		"venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
		"venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/local/cuda/lib64/libnccl.so.2",
	})
	r := func(p string) string { return filepath.Join(root, p) }
	env := map[string]string{"VIRTUAL_ENV": r("venv")}
	dirs := searchPlaces{getenv: func(k string) string { return env[k] }, root: root}.dirs()
	got := ncclCandidates("", dirs, fileExists)
	want := []string{"libnccl.so.2", r("usr/local/cuda/lib64/libnccl.so.2"), r("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates:\ngot  %q\nwant %q", got, want)
	}
	if got := ncclCandidates("/opt/mine/libnccl.so.2", dirs, fileExists); !reflect.DeepEqual(got, []string{"/opt/mine/libnccl.so.2"}) {
		t.Errorf("candidates with MIXPREC_LIBNCCL: %q, want it alone", got)
	}
}

func TestNCCLVersionString(t *testing.T) {
	for code, want := range map[int]string{2804: "2.8.4", 20909: "2.9.9", 21003: "2.10.3", 22304: "2.23.4", 23007: "2.30.7"} {
		if got := ncclVersionString(code); got != want {
			t.Errorf("ncclVersionString(%d) = %s, want %s", code, got, want)
		}
	}
}

func TestNCCLIDText(t *testing.T) {
	var id NCCLID
	for i := range id {
		id[i] = byte(255 - i)
	}
	back, err := ParseNCCLID(id.String())
	if err != nil || back != id {
		t.Errorf("ParseNCCLID(String()) = %v, %v; want the ID back", back[:4], err)
	}
	for _, bad := range []string{"", "abc", strings.Repeat("zz", 128), strings.Repeat("00", 127)} {
		if _, err := ParseNCCLID(bad); err == nil {
			t.Errorf("ParseNCCLID(%.20q) succeeded", bad)
		}
	}
}

// TestNCCLEnv checks how OpenNCCLFromEnv reads its environment.
func TestNCCLEnv(t *testing.T) {
	var id NCCLID
	id[0], id[127] = 7, 9
	cases := []struct {
		env       map[string]string
		rank, n   int
		withID    bool
		errSubstr string
	}{
		{env: map[string]string{"RANK": "1", "WORLD_SIZE": "2", "NCCL_COMM_ID": "10.0.0.1:29500"}, rank: 1, n: 2},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "4", "MIXPREC_NCCL_ID": id.String()}, rank: 0, n: 4, withID: true},
		{env: map[string]string{"WORLD_SIZE": "2", "NCCL_COMM_ID": "h:1"}, errSubstr: "$RANK is not set"},
		{env: map[string]string{"RANK": "x", "WORLD_SIZE": "2", "NCCL_COMM_ID": "h:1"}, errSubstr: `$RANK="x": want a number`},
		{env: map[string]string{"RANK": "2", "WORLD_SIZE": "2", "NCCL_COMM_ID": "h:1"}, errSubstr: "RANK=2 with WORLD_SIZE=2"},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, errSubstr: "set NCCL_COMM_ID=host:port"},
		{env: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MIXPREC_NCCL_ID": "12"}, errSubstr: "$MIXPREC_NCCL_ID: nccl: 256 hexadecimal digits"},
	}
	for _, c := range cases {
		rank, n, got, err := ncclEnv(func(k string) string { return c.env[k] })
		if c.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), c.errSubstr) {
				t.Errorf("%v: %v, want an error containing %q", c.env, err, c.errSubstr)
			}
			continue
		}
		if err != nil || rank != c.rank || n != c.n || (got != nil) != c.withID || (got != nil && *got != id) {
			t.Errorf("%v: rank %d of %d, id %v, %v; want rank %d of %d, id given %v", c.env, rank, n, got != nil, err, c.rank, c.n, c.withID)
		}
	}
}

// fakeNet stands in for NCCL between ranks that each have a fake device,
// in one process: every rank's nth collective is the same operation, and
// it completes once all have queued it. Results are computed in float32
// and rounded once to the dtype.
type fakeNet struct {
	mu   sync.Mutex
	size int
	ops  []*fakeOp
}

type fakeOp struct {
	kind     string
	dt, root int32
	count    int
	in       [][]float32 // per rank, as queued
	arrived  int
	out      []float32 // when all have arrived
	mismatch string    // ranks disagreed on the operation
}

// fakeEngine is one rank's ncclEngine on a fakeNet.
type fakeEngine struct {
	net  *fakeNet
	rank int
	g    *fakeGPU

	mu       sync.Mutex
	seq      int
	pending  []fakePending // queued, not yet written back
	calls    []string
	async    error
	block    chan struct{} // when set, queueing blocks until it is closed (abort closes it)
	aborts   int
	destroys int
}

type fakePending struct {
	op  *fakeOp
	ptr uint64
}

// dtCode is the fake GPU's dtype code of an ncclDataType_t.
func dtCode(dt int32) (int, dtype.DType) {
	switch dt {
	case ncclFloat32:
		return 0, dtype.F32
	case ncclFloat16:
		return 1, dtype.F16
	case ncclBfloat16:
		return 2, dtype.BF16
	}
	panic(fmt.Sprintf("fake NCCL: datatype %d", dt))
}

func (e *fakeEngine) queue(kind string, ptr uint64, count int, dt, root int32) error {
	if e.block != nil {
		<-e.block
		return errors.New("fake NCCL: aborted while queueing")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, fmt.Sprintf("%s %d %d %d", kind, count, dt, root))
	code, _ := dtCode(dt)
	vals := make([]float32, count)
	for i := range vals {
		vals[i] = e.g.ld(ptr, code, i)
	}
	n := e.net
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(n.ops) <= e.seq {
		n.ops = append(n.ops, &fakeOp{kind: kind, dt: dt, root: root, count: count, in: make([][]float32, n.size)})
	}
	op := n.ops[e.seq]
	e.seq++
	if op.kind != kind || op.dt != dt || op.root != root || op.count != count {
		op.mismatch = fmt.Sprintf("rank %d queued %s of %d (dtype %d, root %d) as another rank's %s of %d (dtype %d, root %d)",
			e.rank, kind, count, dt, root, op.kind, op.count, op.dt, op.root)
	}
	op.in[e.rank] = vals
	op.arrived++
	if op.arrived == n.size && op.mismatch == "" {
		op.out = make([]float32, count)
		for i := range op.out {
			if kind == "broadcast" {
				op.out[i] = op.in[root][i]
				continue
			}
			var s float32
			for r := range n.size {
				s += op.in[r][i]
			}
			op.out[i] = s
		}
	}
	e.pending = append(e.pending, fakePending{op: op, ptr: ptr})
	return nil
}

func (e *fakeEngine) allReduce(ptr uint64, count int, dt, op int32) error {
	if op != ncclSum {
		return fmt.Errorf("fake NCCL: op %d", op)
	}
	return e.queue("all-reduce", ptr, count, dt, -1)
}

func (e *fakeEngine) broadcast(ptr uint64, count int, dt, root int32) error {
	return e.queue("broadcast", ptr, count, dt, root)
}

func (e *fakeEngine) mark() error { return nil }

func (e *fakeEngine) reached() (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	for len(e.pending) > 0 {
		p := e.pending[0]
		if p.op.mismatch != "" {
			return false, errors.New(p.op.mismatch)
		}
		if p.op.out == nil {
			return false, nil
		}
		code, _ := dtCode(p.op.dt)
		for i, v := range p.op.out {
			e.g.st(p.ptr, code, i, v)
		}
		e.pending = e.pending[1:]
	}
	return true, nil
}

func (e *fakeEngine) asyncError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.async
}

func (e *fakeEngine) abort() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.aborts++
	if e.block != nil {
		close(e.block)
	}
	return nil
}

func (e *fakeEngine) destroy() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.destroys++
	return nil
}

// fakeRanks makes size communicators on fake devices joined by one fakeNet.
func fakeRanks(size int, timeout time.Duration) ([]*NCCL, []*fakeEngine) {
	net := &fakeNet{size: size}
	comms := make([]*NCCL, size)
	engs := make([]*fakeEngine, size)
	for r := range size {
		d, g := newFakeDevice(Options{})
		engs[r] = &fakeEngine{net: net, rank: r, g: g}
		comms[r] = newNCCL(d, engs[r], r, size, ncclConfig{timeout: timeout})
	}
	return comms, engs
}

// eachRank runs fn for every rank at once, as the processes of a job would,
// and returns their errors.
func eachRank(comms []*NCCL, fn func(c *NCCL) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = fn(c)
		}()
	}
	wg.Wait()
	return errs
}

// TestNCCLCollectivesEmulated runs the communicator's collectives on three
// fake ranks: sums and averages in every dtype (the average scaled on the
// device by 1/size in float32, rounded once), a broadcast from the last
// rank, a barrier, and an empty buffer, which is no collective at all.
func TestNCCLCollectivesEmulated(t *testing.T) {
	const size, n = 3, 300
	comms, engs := fakeRanks(size, 10*time.Second)
	for _, dt := range dtype.All {
		for _, op := range []device.ReduceOp{device.Sum, device.Avg} {
			errs := eachRank(comms, func(c *NCCL) error {
				vals := make([]float32, n)
				for i := range vals {
					vals[i] = float32(c.Rank()+1) + float32(i%50)/4
				}
				b := c.Device().Alloc(dt, n, device.Temp)
				defer c.Device().Free(b)
				c.Device().CopyFromHost(b, vals)
				if err := c.AllReduce(b, op); err != nil {
					return err
				}
				got := make([]float32, n)
				c.Device().CopyToHost(got, b)
				for i, g := range got {
					sum := dtype.Round(dt, 6+3*float32(i%50)/4) // exact in every dtype
					want := sum
					if op == device.Avg {
						want = dtype.Round(dt, sum*(1/float32(size)))
					}
					if g != want {
						return fmt.Errorf("rank %d: %v %v: element %d = %v, want %v", c.Rank(), dt, op, i, g, want)
					}
				}
				return nil
			})
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		}
		errs := eachRank(comms, func(c *NCCL) error {
			b := c.Device().Alloc(dt, 5, device.Temp)
			defer c.Device().Free(b)
			r := float32(c.Rank())
			c.Device().CopyFromHost(b, []float32{r, r + 0.5, r, r, r})
			if err := c.Broadcast(b, size-1); err != nil {
				return err
			}
			got := make([]float32, 5)
			c.Device().CopyToHost(got, b)
			if got[0] != size-1 || got[1] != size-0.5 {
				return fmt.Errorf("rank %d: %v broadcast from rank %d: %v", c.Rank(), dt, size-1, got)
			}
			return nil
		})
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	}
	errs := eachRank(comms, func(c *NCCL) error {
		empty := c.Device().Alloc(dtype.F16, 0, device.Temp)
		defer c.Device().Free(empty)
		if err := c.AllReduce(empty, device.Avg); err != nil {
			return err
		}
		if err := c.Broadcast(empty, 0); err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		return c.Close()
	})
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	// What NCCL was asked: ncclSum (averages are scaled afterwards), the
	// dtype's ncclDataType_t, elements rather than bytes, nothing for the
	// empty buffer, and one element for the barrier.
	want := []string{}
	for _, dt := range []int32{ncclFloat32, ncclFloat16, ncclBfloat16} {
		want = append(want, fmt.Sprintf("all-reduce %d %d -1", n, dt), fmt.Sprintf("all-reduce %d %d -1", n, dt), fmt.Sprintf("broadcast 5 %d %d", dt, size-1))
	}
	want = append(want, fmt.Sprintf("all-reduce 1 %d -1", ncclFloat32))
	for r, e := range engs {
		if !reflect.DeepEqual(e.calls, want) {
			t.Errorf("rank %d queued\n%q\nwant\n%q", r, e.calls, want)
		}
		if e.destroys != 1 || e.aborts != 0 {
			t.Errorf("rank %d: destroyed %d times, aborted %d; want 1 and 0", r, e.destroys, e.aborts)
		}
	}
	if err := comms[0].Barrier(); err == nil || !strings.Contains(err.Error(), "barrier on a closed communicator") {
		t.Errorf("Barrier after Close: %v", err)
	}
	if err := comms[0].Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestNCCLArgumentsEmulated checks the programmer errors (a buffer of
// another device) and the environment errors (a root out of range).
func TestNCCLArgumentsEmulated(t *testing.T) {
	comms, _ := fakeRanks(2, time.Second)
	other, _ := newFakeDevice(Options{})
	b := other.Alloc(dtype.F32, 4, device.Temp)
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), "nccl AllReduce: buffer belongs to") {
				t.Errorf("AllReduce of another device's buffer: panic %v", r)
			}
		}()
		comms[0].AllReduce(b, device.Sum)
	}()
	if err := comms[0].Broadcast(b, 2); err == nil || err.Error() != "nccl: broadcast from rank 2 of 2" {
		t.Errorf("Broadcast from rank 2 of 2: %v", err)
	}
}

// TestNCCLTimeoutEmulated checks what a rank that never joins does to the
// others: a collective whose peer does not come, or whose queueing blocks
// (NCCL connects lazily), ends after the timeout with an error naming the
// rank and the operation; the communicator is aborted, once, which
// releases the blocked call; every later call fails at once with the same
// error, and Close returns it.
func TestNCCLTimeoutEmulated(t *testing.T) {
	const timeout = 100 * time.Millisecond
	t.Run("peer never comes", func(t *testing.T) {
		comms, engs := fakeRanks(2, timeout)
		c := comms[0]
		b := c.Device().Alloc(dtype.F32, 8, device.Temp)
		start := time.Now()
		err := c.AllReduce(b, device.Avg)
		want := "nccl: rank 0 of 2: all-reduce did not complete within 100ms: another rank has stalled or died"
		if err == nil || err.Error() != want {
			t.Fatalf("AllReduce without the other rank: %v, want %q", err, want)
		}
		if d := time.Since(start); d < timeout || d > 20*timeout {
			t.Errorf("it took %v to give up, with a timeout of %v", d, timeout)
		}
		if engs[0].aborts != 1 {
			t.Errorf("aborted %d times, want 1", engs[0].aborts)
		}
		start = time.Now()
		if err2 := c.Barrier(); err2 != err || time.Since(start) > timeout/2 {
			t.Errorf("Barrier after the failure: %v after %v; want the same error at once", err2, time.Since(start))
		}
		if err2 := c.Close(); err2 != err {
			t.Errorf("Close after the failure: %v, want %v", err2, err)
		}
		if engs[0].aborts != 1 || engs[0].destroys != 0 {
			t.Errorf("aborted %d times, destroyed %d; want 1 and 0", engs[0].aborts, engs[0].destroys)
		}
	})
	t.Run("queueing blocks", func(t *testing.T) {
		comms, engs := fakeRanks(2, timeout)
		engs[1].block = make(chan struct{})
		b := comms[1].Device().Alloc(dtype.BF16, 8, device.Temp)
		err := comms[1].Broadcast(b, 0)
		want := "nccl: rank 1 of 2: broadcast did not complete within 100ms: another rank has stalled or died"
		if err == nil || err.Error() != want {
			t.Fatalf("Broadcast that blocks: %v, want %q", err, want)
		}
		if engs[1].aborts != 1 {
			t.Errorf("aborted %d times, want 1", engs[1].aborts)
		}
	})
	t.Run("asynchronous error", func(t *testing.T) {
		comms, engs := fakeRanks(2, 10*time.Second)
		engs[0].async = errors.New("asynchronous error: remote process exited (6)")
		b := comms[0].Device().Alloc(dtype.F16, 8, device.Temp)
		start := time.Now()
		err := comms[0].AllReduce(b, device.Sum)
		want := "nccl: rank 0 of 2: all-reduce failed: asynchronous error: remote process exited (6)"
		if err == nil || err.Error() != want {
			t.Fatalf("AllReduce with an asynchronous error: %v, want %q", err, want)
		}
		if time.Since(start) > time.Second {
			t.Errorf("it took %v to see the error; the timeout is for silence, not for errors", time.Since(start))
		}
		if engs[0].aborts != 1 {
			t.Errorf("aborted %d times, want 1", engs[0].aborts)
		}
	})
	t.Run("ranks disagree", func(t *testing.T) {
		comms, _ := fakeRanks(2, 10*time.Second)
		errs := eachRank(comms, func(c *NCCL) error {
			b := c.Device().Alloc(dtype.F32, 8+c.Rank(), device.Temp)
			return c.AllReduce(b, device.Sum)
		})
		if errs[0] == nil && errs[1] == nil {
			t.Errorf("all-reduces of 8 and 9 elements both succeeded")
		}
	})
}

// bootNet is an in-process device.Comm of host copies, standing in for
// MPI as the communicator the NCCL ID travels through.
type bootNet struct {
	mu     sync.Mutex
	cond   *sync.Cond
	size   int
	round  int
	in     [][]float32 // this round's contributions, by rank
	out    []float32   // the last round's result
	joined int
}

func newBootNet(size int) *bootNet {
	n := &bootNet{size: size, in: make([][]float32, size)}
	n.cond = sync.NewCond(&n.mu)
	return n
}

type bootComm struct {
	net     *bootNet
	rank    int
	aborted error
}

func (c *bootComm) Rank() int      { return c.rank }
func (c *bootComm) Size() int      { return c.net.size }
func (c *bootComm) Barrier() error { return errors.New("not used") }
func (c *bootComm) Close() error   { return nil }

// Abort records the reason and panics with it, standing in for MPI_Abort,
// which does not return.
func (c *bootComm) Abort(reason error) {
	c.aborted = reason
	panic("boot abort: " + reason.Error())
}

// exchange contributes b's values and, once every rank has, replaces them
// with combine's result.
func (c *bootComm) exchange(b device.Buffer, combine func(in [][]float32) []float32) {
	n := c.net
	vals := make([]float32, b.Len())
	b.Device().CopyToHost(vals, b)
	n.mu.Lock()
	defer n.mu.Unlock()
	round := n.round
	n.in[c.rank] = vals
	n.joined++
	if n.joined == n.size {
		n.out = combine(n.in)
		n.in = make([][]float32, n.size)
		n.joined = 0
		n.round++
		n.cond.Broadcast()
	}
	for n.round == round {
		n.cond.Wait()
	}
	b.Device().CopyFromHost(b, n.out)
}

func (c *bootComm) Broadcast(b device.Buffer, root int) error {
	c.exchange(b, func(in [][]float32) []float32 { return in[root] })
	return nil
}

func (c *bootComm) AllReduce(b device.Buffer, op device.ReduceOp) error {
	c.exchange(b, func(in [][]float32) []float32 {
		out := make([]float32, len(in[0]))
		for _, v := range in {
			for i := range out {
				out[i] += v[i]
			}
		}
		return out
	})
	return nil
}

// TestNCCLIDExchange checks how BootstrapNCCL's ranks agree through the
// bootstrap communicator: they count the ranks that failed to load NCCL,
// and rank 0 sends them the ID, holding every byte value, with whether it
// made one, through F32 buffers.
func TestNCCLIDExchange(t *testing.T) {
	const size = 3
	net := newBootNet(size)
	var want NCCLID
	for i := range want {
		want[i] = byte(2*i + 1)
	}
	want[5], want[6] = 0, 255
	ids := make([]NCCLID, size)
	for _, rootOK := range []bool{true, false} {
		var wg sync.WaitGroup
		for r := range size {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, _ := newFakeDevice(Options{})
				boot := &bootComm{net: net, rank: r}
				failed, err := countFailures(boot, d, r == 1)
				if err != nil || failed != 1 {
					t.Errorf("rank %d: %d ranks failed (%v), want 1", r, failed, err)
				}
				ids[r] = NCCLID{}
				if r == 0 {
					ids[r] = want
				}
				ok, err := shareID(boot, d, &ids[r], rootOK)
				if err != nil || ok != rootOK {
					t.Errorf("rank %d: rank 0 made the ID: %v (%v), want %v", r, ok, err, rootOK)
				}
			}()
		}
		wg.Wait()
		for r, id := range ids {
			if id != want {
				t.Errorf("rank %d received an ID differing from rank 0's: %v... vs %v...", r, id[:8], want[:8])
			}
		}
	}
}

// TestNCCLAbortEmulated checks Abort: it aborts the communicator, then
// ends the job through the bootstrap communicator when there is one, and
// otherwise panics with the reason (it cannot end other processes).
func TestNCCLAbortEmulated(t *testing.T) {
	reason := errors.New("rank 1 is gone")
	for _, withBoot := range []bool{true, false} {
		comms, engs := fakeRanks(2, time.Second)
		var boot *bootComm
		if withBoot {
			boot = &bootComm{net: newBootNet(2)}
			comms[0].boot = boot
		}
		func() {
			defer func() {
				r := fmt.Sprint(recover())
				want := "nccl: rank 0 of 2 aborted the job: rank 1 is gone"
				if withBoot {
					want = "boot abort: rank 1 is gone"
				}
				if r != want {
					t.Errorf("Abort (bootstrap comm: %v) panicked with %q, want %q", withBoot, r, want)
				}
			}()
			comms[0].Abort(reason)
		}()
		if engs[0].aborts != 1 {
			t.Errorf("bootstrap comm %v: communicator aborted %d times, want 1", withBoot, engs[0].aborts)
		}
		if withBoot && boot.aborted != reason {
			t.Errorf("the bootstrap comm's Abort got %v, want %v", boot.aborted, reason)
		}
	}
	// Abort from another goroutine while a collective waits for a peer: the
	// collective ends at once, without touching the ended communicator.
	comms, engs := fakeRanks(2, time.Minute)
	b := comms[0].Device().Alloc(dtype.F32, 4, device.Temp)
	errc := make(chan error, 1)
	go func() { errc <- comms[0].AllReduce(b, device.Sum) }()
	time.Sleep(20 * time.Millisecond)
	func() {
		defer func() { recover() }()
		comms[0].Abort(reason)
	}()
	select {
	case err := <-errc:
		if want := "nccl: rank 0 of 2: all-reduce failed: the communicator was aborted"; err == nil || err.Error() != want {
			t.Errorf("a collective under Abort: %v, want %q", err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a collective under Abort still waits")
	}
	if engs[0].aborts != 1 {
		t.Errorf("communicator aborted %d times, want 1", engs[0].aborts)
	}
}
