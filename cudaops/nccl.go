package cudaops

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// NCCL, loaded at run time from libnccl.so.2 like the driver and cuBLAS,
// gives a device.Comm whose collectives run on the GPU, on the device's own
// stream, between processes that each drive one GPU (one process per GPU,
// as PyTorch's DistributedDataParallel). It lives here rather than in a
// package of its own because it needs the device pointers and the stream
// that only this package holds.
//
// The bindings are typed Go functions registered with purego; ncclProtos
// holds the C prototype each one stands for, which the tests check against
// the Go types and, where an nccl.h is found, against the header itself.

// ncclMinVersion is the oldest NCCL accepted: 2.10, the first with
// bfloat16.
const ncclMinVersion = 21000

// ncclResult_t values the package tells apart.
const (
	ncclSuccess    = 0
	ncclInProgress = 7 // a non-blocking operation is still running (NCCL >= 2.14); not an error
)

// ncclDataType_t values of mixprec's dtypes.
const (
	ncclFloat16  = 6
	ncclFloat32  = 7
	ncclBfloat16 = 9
)

// ncclRedOp_t: only the sum is used. Average is the sum scaled afterwards
// by 1/size in float32 (see NCCL.AllReduce), not ncclAvg, whose floating-
// point form multiplies every input by 1/size before summing: a different
// rounding from the MPI path's, and in F16 it can flush small gradients to
// zero before they are added.
const ncclSum = 0

// ncclUniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const ncclUniqueIDBytes = 128

// cudaErrorNotReady is CUDA_ERROR_NOT_READY: cuEventQuery's "not yet".
const cudaErrorNotReady = 600

// cuEventDisableTiming makes an event that only marks a point in the stream.
const cuEventDisableTiming = 2

// ncclEnums are the enumerators the package uses with their values, for the
// tests to check against nccl.h.
var ncclEnums = []struct {
	name  string
	value int
}{
	{"ncclSuccess", ncclSuccess}, {"ncclInProgress", ncclInProgress},
	{"ncclFloat16", ncclFloat16}, {"ncclFloat32", ncclFloat32}, {"ncclBfloat16", ncclBfloat16},
	{"ncclSum", ncclSum},
}

// ncclProto is the C prototype of one bound function, with parameter names
// left out and types written as nccl.h spells them ("const void*",
// "ncclComm_t*").
type ncclProto struct {
	name   string
	ret    string
	params []string
	since  int // the NCCL version code that added it when it is optional; 0 when required
}

// ncclProtos are the functions bound, in the order ncclLib.slots lists
// their Go functions.
var ncclProtos = []ncclProto{
	{name: "ncclGetVersion", ret: "ncclResult_t", params: []string{"int*"}},
	{name: "ncclGetUniqueId", ret: "ncclResult_t", params: []string{"ncclUniqueId*"}},
	{name: "ncclCommInitRank", ret: "ncclResult_t", params: []string{"ncclComm_t*", "int", "ncclUniqueId", "int"}},
	{name: "ncclCommDestroy", ret: "ncclResult_t", params: []string{"ncclComm_t"}},
	{name: "ncclCommAbort", ret: "ncclResult_t", params: []string{"ncclComm_t"}},
	{name: "ncclCommGetAsyncError", ret: "ncclResult_t", params: []string{"ncclComm_t", "ncclResult_t*"}},
	{name: "ncclAllReduce", ret: "ncclResult_t", params: []string{"const void*", "void*", "size_t", "ncclDataType_t", "ncclRedOp_t", "ncclComm_t", "cudaStream_t"}},
	{name: "ncclBroadcast", ret: "ncclResult_t", params: []string{"const void*", "void*", "size_t", "ncclDataType_t", "int", "ncclComm_t", "cudaStream_t"}},
	{name: "ncclGetErrorString", ret: "const char*", params: []string{"ncclResult_t"}},
	{name: "ncclGetLastError", ret: "const char*", params: []string{"ncclComm_t"}, since: 21300},
}

// ncclUniqueID is ncclUniqueId: 128 opaque bytes, passed to
// ncclCommInitRank by value (on the stack, as any C struct over 16 bytes).
type ncclUniqueID struct{ internal [ncclUniqueIDBytes]byte }

// ncclLib is a loaded libnccl.so.2. Pointers (ncclComm_t, cudaStream_t,
// device addresses) travel as uintptr; C int and the enums as int32;
// size_t as uintptr.
type ncclLib struct {
	path    string
	version int // NCCL_VERSION_CODE: 22304 for 2.23.4

	getVersion        func(version *int32) int32
	getUniqueID       func(id *ncclUniqueID) int32
	commInitRank      func(comm *uintptr, nranks int32, id ncclUniqueID, rank int32) int32
	commDestroy       func(comm uintptr) int32
	commAbort         func(comm uintptr) int32
	commGetAsyncError func(comm uintptr, asyncErr *int32) int32
	allReduce         func(send, recv uintptr, count uintptr, dt, op int32, comm, stream uintptr) int32
	broadcast         func(send, recv uintptr, count uintptr, dt, root int32, comm, stream uintptr) int32
	getErrorString    func(r int32) string
	getLastError      func(comm uintptr) string // nil before NCCL 2.13
}

// slots are the Go functions of ncclProtos, in the same order.
func (l *ncclLib) slots() []any {
	return []any{&l.getVersion, &l.getUniqueID, &l.commInitRank, &l.commDestroy, &l.commAbort,
		&l.commGetAsyncError, &l.allReduce, &l.broadcast, &l.getErrorString, &l.getLastError}
}

// ncclCandidates lists the libnccl.so.2 files to try, in order: only
// override when it is set ($MIXPREC_LIBNCCL, the user's explicit choice),
// else the bare soname for the loader's own search, then the library in
// each of dirs (the cuBLAS search's folders: $LD_LIBRARY_PATH, the CUDA
// toolkit, and the nvidia/*/lib folders of NVIDIA's pip wheels, among them
// nvidia/nccl/lib where the nvidia-nccl-cu* wheels put it) that holds one.
func ncclCandidates(override string, dirs []string, exists func(string) bool) []string {
	if override != "" {
		return []string{override}
	}
	out := []string{"libnccl.so.2"}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if p := filepath.Join(d, "libnccl.so.2"); exists(p) {
			out = append(out, p)
		}
	}
	return out
}

var (
	ncclMu  sync.Mutex
	theNCCL *ncclLib
)

// loadNCCL returns the process's libnccl, loading it on first use. A
// failure is not remembered, so a later call (after the environment
// changed) tries again.
func loadNCCL() (*ncclLib, error) {
	ncclMu.Lock()
	defer ncclMu.Unlock()
	if theNCCL != nil {
		return theNCCL, nil
	}
	override := os.Getenv("MIXPREC_LIBNCCL")
	dirs := candidateDirs()
	var tried []string
	for _, path := range ncclCandidates(override, dirs, fileExists) {
		l, err := openNCCL(path)
		if err == nil {
			theNCCL = l
			return l, nil
		}
		// A soname the loader cannot find is the common case, not news.
		if path != "libnccl.so.2" || !strings.Contains(err.Error(), "cannot open shared object file") {
			tried = append(tried, err.Error())
		}
	}
	if override != "" {
		return nil, fmt.Errorf("no NCCL: %s (from MIXPREC_LIBNCCL)", strings.Join(tried, "; "))
	}
	searched := 0
	for _, d := range dirs {
		if d != "" && fileExists(d) {
			searched++
		}
	}
	tried = append(tried, fmt.Sprintf("no libnccl.so.2 through the loader's search path or in the %d folders searched ($LD_LIBRARY_PATH, the CUDA toolkit's, the nvidia/*/lib folders of NVIDIA's pip wheels)", searched))
	return nil, fmt.Errorf("no NCCL (install NVIDIA's nvidia-nccl-cu12 wheel or libnccl2, or set MIXPREC_LIBNCCL to libnccl.so.2): %s", strings.Join(tried, "; "))
}

// openNCCL loads one library and binds every function of ncclProtos.
func openNCCL(path string) (*ncclLib, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("cannot load %s: %v", path, err)
	}
	l := &ncclLib{path: path}
	if !strings.Contains(path, "/") { // found by the loader: say where
		if p := mappedPath("libnccl.so"); p != "" {
			l.path = p
		}
	}
	for i, s := range l.slots() {
		p := ncclProtos[i]
		sym, err := purego.Dlsym(h, p.name)
		if err != nil || sym == 0 {
			if p.since > 0 {
				continue // optional: left nil
			}
			return nil, fmt.Errorf("%s lacks %s: not NCCL 2?", l.path, p.name)
		}
		purego.RegisterFunc(s, sym)
	}
	var v int32
	if r := l.getVersion(&v); r != ncclSuccess {
		return nil, fmt.Errorf("%s: %v", l.path, l.errorOf("ncclGetVersion", r, 0))
	}
	l.version = int(v)
	if l.version < ncclMinVersion {
		return nil, fmt.Errorf("%s is NCCL %s; mixprec needs 2.10 or newer (bfloat16)", l.path, ncclVersionString(l.version))
	}
	return l, nil
}

// ncclVersionString formats a version code: NCCL_VERSION(x, y, z) is
// x*1000+y*100+z up to 2.8 and x*10000+y*100+z from 2.9 on.
func ncclVersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// errorOf describes a failed NCCL call, with NCCL's text for the code and,
// when comm is given and the library has it, the last error's message.
func (l *ncclLib) errorOf(call string, r int32, comm uintptr) error {
	msg := ""
	if l.getErrorString != nil {
		msg = l.getErrorString(r)
	}
	if comm != 0 && l.getLastError != nil {
		if last := l.getLastError(comm); last != "" {
			msg += ": " + last
		}
	}
	if msg == "" {
		msg = "NCCL error"
	}
	return fmt.Errorf("%s: %s (%d)", call, msg, r)
}

// check turns a ncclResult_t into an error.
func (l *ncclLib) check(call string, r int32, comm uintptr) error {
	if r == ncclSuccess {
		return nil
	}
	return l.errorOf(call, r, comm)
}

// NCCLID is a communicator's identity (ncclUniqueId): one rank makes it
// with NewNCCLID, every rank passes the same one to OpenNCCL. It holds the
// address of a listener in the process that made it, which must therefore
// live until every rank has joined.
type NCCLID [ncclUniqueIDBytes]byte

// String is the ID in hexadecimal, the form of $MIXPREC_NCCL_ID.
func (id NCCLID) String() string { return hex.EncodeToString(id[:]) }

// ParseNCCLID reads an ID written by String.
func ParseNCCLID(s string) (NCCLID, error) {
	var id NCCLID
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("nccl: %d hexadecimal digits expected for an NCCL ID, got %q", 2*len(id), s)
	}
	copy(id[:], b)
	return id, nil
}

// NewNCCLID makes a new communicator identity (ncclGetUniqueId). With
// NCCL_COMM_ID=host:port in the environment, NCCL derives it from that
// address instead, so that every rank computes the same ID on its own and
// rank 0 listens there when it joins.
func NewNCCLID() (NCCLID, error) {
	l, err := loadNCCL()
	if err != nil {
		return NCCLID{}, err
	}
	var u ncclUniqueID
	if err := l.check("ncclGetUniqueId", l.getUniqueID(&u), 0); err != nil {
		return NCCLID{}, fmt.Errorf("nccl: %w", err)
	}
	return NCCLID(u.internal), nil
}

// ncclEngine is what an NCCL communicator needs from the library and the
// GPU: the calls that queue work on the stream (made with the device
// entered), a marker after them and whether the stream has passed it, and
// the communicator's error state. ncclGPU is the real one; the tests
// provide others to check the logic around it without a GPU.
type ncclEngine interface {
	// allReduce and broadcast queue an in-place collective of count
	// elements at ptr; mark records the marker after the work queued.
	allReduce(ptr uint64, count int, dt, op int32) error
	broadcast(ptr uint64, count int, dt, root int32) error
	mark() error
	// reached reports whether the stream has passed the marker; it is
	// called without the device entered.
	reached() (bool, error)
	// asyncError is an error the communicator met in the background (a
	// peer gone, a network failure), or nil.
	asyncError() error
	// abort ends the communicator's work at once, including calls blocked
	// in another goroutine; destroy releases it after its work finished.
	// Only one of them is called, once.
	abort() error
	destroy() error
}

// ncclGPU is a communicator of a loaded NCCL on a real device.
type ncclGPU struct {
	lib        *ncclLib
	g          *cudaGPU
	comm       uintptr // ncclComm_t
	event      uintptr // the marker (CUevent)
	eventQuery uintptr // cuEventQuery, which the driver table does not hold
}

// onContext runs fn on a locked OS thread with the device's context
// current, without taking the device: for the calls that must not wait
// behind a kernel launch or a copy (polling, abort).
func (e *ncclGPU) onContext(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := e.g.drv.check("cuCtxSetCurrent", e.g.drv.cuCtxSetCurrent, e.g.ctx); err != nil {
		return err
	}
	return fn()
}

func (e *ncclGPU) allReduce(ptr uint64, count int, dt, op int32) error {
	return e.lib.check("ncclAllReduce", e.lib.allReduce(uintptr(ptr), uintptr(ptr), uintptr(count), dt, op, e.comm, e.g.stream), e.comm)
}

func (e *ncclGPU) broadcast(ptr uint64, count int, dt, root int32) error {
	return e.lib.check("ncclBroadcast", e.lib.broadcast(uintptr(ptr), uintptr(ptr), uintptr(count), dt, root, e.comm, e.g.stream), e.comm)
}

func (e *ncclGPU) mark() error {
	return e.g.drv.check("cuEventRecord", e.g.drv.cuEventRecord, e.event, e.g.stream)
}

func (e *ncclGPU) reached() (bool, error) {
	done := false
	err := e.onContext(func() error {
		r, _, _ := purego.SyscallN(e.eventQuery, e.event)
		switch code := result32(r); code {
		case cudaSuccess:
			done = true
		case cudaErrorNotReady:
		default:
			return e.g.drv.errorOf("cuEventQuery", code)
		}
		return nil
	})
	return done, err
}

func (e *ncclGPU) asyncError() error {
	var a int32
	if err := e.lib.check("ncclCommGetAsyncError", e.lib.commGetAsyncError(e.comm, &a), e.comm); err != nil {
		return err
	}
	if a == ncclSuccess || a == ncclInProgress {
		return nil
	}
	return e.lib.errorOf("asynchronous error", a, e.comm)
}

func (e *ncclGPU) abort() error {
	err := e.onContext(func() error { return e.lib.check("ncclCommAbort", e.lib.commAbort(e.comm), 0) })
	e.release()
	return err
}

func (e *ncclGPU) destroy() error {
	err := e.onContext(func() error { return e.lib.check("ncclCommDestroy", e.lib.commDestroy(e.comm), 0) })
	e.release()
	return err
}

// release frees the marker event.
func (e *ncclGPU) release() {
	e.onContext(func() error { return e.g.drv.check("cuEventDestroy", e.g.drv.cuEventDestroy, e.event) })
}

// DefaultNCCLTimeout bounds one collective, as mpi.DefaultTimeout does.
const DefaultNCCLTimeout = 5 * time.Minute

// NCCLOption configures OpenNCCL.
type NCCLOption func(*ncclConfig)

type ncclConfig struct {
	timeout time.Duration
	boot    device.Comm
}

// NCCLTimeout bounds joining the communicator and each collective (default
// DefaultNCCLTimeout): past it the communicator is aborted and the call
// returns an error naming the rank and the operation.
func NCCLTimeout(d time.Duration) NCCLOption { return func(c *ncclConfig) { c.timeout = d } }

// NCCL is a device.Comm over NCCL on one CUDA device: its collectives take
// that device's buffers (F32, F16 or BF16) and run on its stream, ordered
// with the kernels around them. Each call returns once the collective has
// finished on the GPU, polling for it so that a collective a peer never
// joins ends, after the timeout, in an error instead of a hang; the
// communicator is then aborted and every later call fails at once.
//
// 16-bit buffers are reduced by NCCL in their own dtype (the MPI path sums
// them in float32 and rounds once), so F16 and BF16 sums can differ from it
// in the last place. Avg is the sum times 1/size in float32, rounded once
// to the buffer's dtype, as on the MPI path.
type NCCL struct {
	dev        *Device
	eng        ncclEngine
	rank, size int
	timeout    time.Duration
	boot       device.Comm // the communicator the ID came through, which Abort uses; may be nil

	mu     sync.Mutex // serialises collectives, so that every rank issues them in one order
	broken error
	closed bool

	endMu     sync.RWMutex // held to poll (read) and to abort or destroy (write)
	ended     bool
	endResult error
}

var _ device.Comm = (*NCCL)(nil)

func newNCCL(dev *Device, eng ncclEngine, rank, size int, cfg ncclConfig) *NCCL {
	return &NCCL{dev: dev, eng: eng, rank: rank, size: size, timeout: cfg.timeout, boot: cfg.boot}
}

func configure(opts []NCCLOption) ncclConfig {
	cfg := ncclConfig{timeout: DefaultNCCLTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// OpenNCCL joins, as rank, the communicator of size ranks named id, on
// dev's GPU and stream. Every rank calls it with the same id and size and
// its own rank; it returns once all have (or fails after the timeout).
func OpenNCCL(dev *Device, id NCCLID, rank, size int, opts ...NCCLOption) (*NCCL, error) {
	return openNCCLComm(dev, id, rank, size, configure(opts))
}

func openNCCLComm(dev *Device, id NCCLID, rank, size int, cfg ncclConfig) (*NCCL, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d of %d", rank, size)
	}
	g, ok := dev.g.(*cudaGPU)
	if !ok {
		return nil, fmt.Errorf("nccl: %s is not a CUDA device driven by libcuda", dev.Name())
	}
	l, err := loadNCCL()
	if err != nil {
		return nil, err
	}
	e := &ncclGPU{lib: l, g: g}
	if e.eventQuery, err = purego.Dlsym(purego.RTLD_DEFAULT, "cuEventQuery"); err != nil || e.eventQuery == 0 {
		return nil, fmt.Errorf("nccl: the CUDA driver (%s) lacks cuEventQuery", g.drv.path)
	}
	// Joining waits for every rank, so it runs on a goroutine of its own:
	// past the timeout the caller gets an error while the join stays
	// blocked (NCCL cannot abort a communicator it has not returned), and
	// the process is expected to end.
	type joined struct {
		comm uintptr
		err  error
	}
	done := make(chan joined, 1)
	go func() {
		var j joined
		j.err = e.onContext(func() error {
			// The context current on this thread is how NCCL, through the CUDA
			// runtime, knows which GPU is this rank's.
			return l.check("ncclCommInitRank", l.commInitRank(&j.comm, int32(size), ncclUniqueID{internal: id}, int32(rank)), 0)
		})
		done <- j
	}()
	select {
	case j := <-done:
		if j.err != nil {
			return nil, fmt.Errorf("nccl: rank %d of %d on %s: %w", rank, size, dev.Name(), j.err)
		}
		e.comm = j.comm
	case <-time.After(cfg.timeout):
		return nil, fmt.Errorf("nccl: rank %d of %d: joining the communicator did not complete within %v: another rank has not started, or stalled or died", rank, size, cfg.timeout)
	}
	if err := e.onContext(func() error {
		return g.drv.check("cuEventCreate", g.drv.cuEventCreate, uintptr(unsafe.Pointer(&e.event)), cuEventDisableTiming)
	}); err != nil {
		e.onContext(func() error { return l.check("ncclCommDestroy", l.commDestroy(e.comm), 0) })
		return nil, fmt.Errorf("nccl: %s: %w", dev.Name(), err)
	}
	return newNCCL(dev, e, rank, size, cfg), nil
}

// BootstrapNCCL opens NCCL over the ranks of boot, an existing
// communicator (MPI's): rank 0 makes the ID and broadcasts it through boot,
// and boot's rank and size become NCCL's. The ranks first agree that every
// one of them has loaded NCCL, and then that rank 0 has made the ID, so
// that a rank without the library fails them all at once rather than
// leaving them waiting for it. boot stays open and is the caller's to
// close, after the NCCL communicator; Abort goes through it, since NCCL
// cannot end other processes.
func BootstrapNCCL(dev *Device, boot device.Comm, opts ...NCCLOption) (*NCCL, error) {
	cfg := configure(opts)
	cfg.boot = boot
	_, lerr := loadNCCL()
	missing, err := countFailures(boot, dev, lerr != nil)
	switch {
	case err != nil:
		return nil, fmt.Errorf("nccl: agreeing to start: %w", err)
	case lerr != nil:
		return nil, lerr
	case missing > 0:
		return nil, fmt.Errorf("nccl: %d of %d ranks cannot load NCCL (each says why)", missing, boot.Size())
	}
	var id NCCLID
	var iderr error
	if boot.Rank() == 0 {
		id, iderr = NewNCCLID()
	}
	ok, err := shareID(boot, dev, &id, iderr == nil)
	switch {
	case err != nil:
		return nil, err
	case iderr != nil:
		return nil, iderr
	case !ok:
		return nil, errors.New("nccl: rank 0 could not make the communicator's ID (it says why)")
	}
	return openNCCLComm(dev, id, boot.Rank(), boot.Size(), cfg)
}

// countFailures is the number of ranks of boot that report failed.
func countFailures(boot device.Comm, dev device.Device, failed bool) (int, error) {
	v := []float32{0}
	if failed {
		v[0] = 1
	}
	buf := dev.Alloc(dtype.F32, 1, device.Temp)
	defer dev.Free(buf)
	dev.CopyFromHost(buf, v)
	if err := boot.AllReduce(buf, device.Sum); err != nil {
		return 0, err
	}
	dev.CopyToHost(v, buf)
	return int(v[0]), nil
}

// shareID gives every rank of boot rank 0's id and whether rank 0 made it
// (ok), through an F32 buffer on dev (a Comm carries buffers only): the
// flag and each byte become one float, exactly.
func shareID(boot device.Comm, dev device.Device, id *NCCLID, ok bool) (bool, error) {
	vals := make([]float32, 1+len(id))
	if ok {
		vals[0] = 1
	}
	for i, b := range id {
		vals[1+i] = float32(b)
	}
	buf := dev.Alloc(dtype.F32, len(vals), device.Temp)
	defer dev.Free(buf)
	dev.CopyFromHost(buf, vals)
	if err := boot.Broadcast(buf, 0); err != nil {
		return false, fmt.Errorf("nccl: sending the ID to every rank: %w", err)
	}
	dev.CopyToHost(vals, buf)
	for i, v := range vals {
		if v < 0 || v > 255 || v != float32(int(v)) {
			return false, fmt.Errorf("nccl: element %d of the ID's message arrived as %v", i, v)
		}
		if i > 0 {
			id[i-1] = byte(v)
		}
	}
	return vals[0] == 1, nil
}

// OpenNCCLFromEnv opens NCCL as launchers without MPI describe it (as
// torchrun does): $RANK and $WORLD_SIZE, and either $MIXPREC_NCCL_ID (an
// ID in hexadecimal that rank 0's process made with NewNCCLID and still
// lives) or NCCL's own $NCCL_COMM_ID=host:port (rank 0's address and a free
// port, where rank 0 listens: nothing needs sharing).
func OpenNCCLFromEnv(dev *Device, opts ...NCCLOption) (*NCCL, error) {
	rank, size, id, err := ncclEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if id == nil {
		v, err := NewNCCLID() // from $NCCL_COMM_ID: the same on every rank
		if err != nil {
			return nil, err
		}
		id = &v
	}
	return OpenNCCL(dev, *id, rank, size, opts...)
}

// ncclEnv reads the environment of OpenNCCLFromEnv; id is nil when NCCL
// is to make it from $NCCL_COMM_ID.
func ncclEnv(getenv func(string) string) (rank, size int, id *NCCLID, err error) {
	num := func(k string) (int, error) {
		s := getenv(k)
		if s == "" {
			return 0, fmt.Errorf("nccl: $%s is not set (a launcher sets RANK and WORLD_SIZE for each process)", k)
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("nccl: $%s=%q: want a number", k, s)
		}
		return n, nil
	}
	if rank, err = num("RANK"); err != nil {
		return
	}
	if size, err = num("WORLD_SIZE"); err != nil {
		return
	}
	if size < 1 || rank < 0 || rank >= size {
		return 0, 0, nil, fmt.Errorf("nccl: RANK=%d with WORLD_SIZE=%d", rank, size)
	}
	switch s := getenv("MIXPREC_NCCL_ID"); {
	case s != "":
		v, perr := ParseNCCLID(s)
		if perr != nil {
			return 0, 0, nil, fmt.Errorf("$MIXPREC_NCCL_ID: %w", perr)
		}
		id = &v
	case getenv("NCCL_COMM_ID") == "":
		return 0, 0, nil, fmt.Errorf("nccl: set NCCL_COMM_ID=host:port (rank 0's host and a free port) or MIXPREC_NCCL_ID for every rank")
	}
	return rank, size, id, nil
}

// Rank is this process's rank.
func (c *NCCL) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *NCCL) Size() int { return c.size }

// Device is the GPU the communicator works on.
func (c *NCCL) Device() *Device { return c.dev }

// ncclType is the ncclDataType_t of dt.
func ncclType(dt dtype.DType) int32 {
	switch dt {
	case dtype.F32:
		return ncclFloat32
	case dtype.F16:
		return ncclFloat16
	case dtype.BF16:
		return ncclBfloat16
	}
	panic(fmt.Sprintf("cudaops: nccl: no NCCL type for %v", dt))
}

// target checks that b is a live buffer of the communicator's device and
// returns its address.
func (c *NCCL) target(b device.Buffer, op string) uint64 {
	c.dev.enter()
	defer c.dev.leave()
	return c.dev.buf(b, "nccl "+op).ptr
}

// AllReduce replaces b on every rank with the sum (or average) over ranks.
func (c *NCCL) AllReduce(b device.Buffer, op device.ReduceOp) error {
	if op != device.Sum && op != device.Avg {
		panic(fmt.Sprintf("cudaops: nccl AllReduce with %v", op))
	}
	ptr := c.target(b, "AllReduce")
	if b.Len() == 0 {
		return nil
	}
	dt := ncclType(b.DType())
	if err := c.collective("all-reduce", func() error { return c.eng.allReduce(ptr, b.Len(), dt, ncclSum) }); err != nil {
		return err
	}
	if op == device.Avg && c.size > 1 {
		c.dev.Axpby(b, b, nil, 1/float32(c.size), 0)
	}
	return nil
}

// Broadcast replaces b on every rank with root's b.
func (c *NCCL) Broadcast(b device.Buffer, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("nccl: broadcast from rank %d of %d", root, c.size)
	}
	ptr := c.target(b, "Broadcast")
	if b.Len() == 0 {
		return nil
	}
	dt := ncclType(b.DType())
	return c.collective("broadcast", func() error { return c.eng.broadcast(ptr, b.Len(), dt, int32(root)) })
}

// Barrier returns once every rank has called it: an all-reduce of one
// element, which no rank can finish alone.
func (c *NCCL) Barrier() error {
	b := c.dev.Alloc(dtype.F32, 1, device.Temp)
	defer c.dev.Free(b)
	ptr := c.target(b, "Barrier")
	return c.collective("barrier", func() error { return c.eng.allReduce(ptr, 1, ncclFloat32, ncclSum) })
}

// How a collective is waited for: pollSpins looks in a row, then sleeps
// that double up to pollMax between looks.
const (
	pollSpins = 64
	pollMax   = time.Millisecond
)

// collective queues one collective with enqueue and waits for the GPU to
// finish it, the communicator to report an error, or the timeout.
func (c *NCCL) collective(what string, enqueue func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("nccl: %s on a closed communicator", what)
	}
	if c.broken != nil {
		return c.broken
	}
	deadline := time.Now().Add(c.timeout)
	// Queueing may itself wait for the peers (NCCL connects lazily), so it
	// runs on a goroutine of its own that an abort releases.
	queued := make(chan error, 1)
	go func() {
		c.dev.enter()
		defer c.dev.leave()
		err := enqueue()
		if err == nil {
			err = c.eng.mark()
		}
		queued <- err
	}()
	timer := time.NewTimer(c.timeout)
	defer timer.Stop()
	select {
	case err := <-queued:
		if err != nil {
			return c.fail(fmt.Errorf("nccl: rank %d of %d: %s failed: %w", c.rank, c.size, what, err))
		}
	case <-timer.C:
		return c.fail(c.timedOut(what))
	}
	// Poll: a few times at once (a bucket over NVLink takes tens of
	// microseconds), then sleeping longer each time up to pollMax, so that
	// a long wait does not keep a core busy.
	for i, wait := 0, 10*time.Microsecond; ; i++ {
		done, err := c.poll()
		if err != nil {
			return c.fail(fmt.Errorf("nccl: rank %d of %d: %s failed: %w", c.rank, c.size, what, err))
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return c.fail(c.timedOut(what))
		}
		if i < pollSpins {
			runtime.Gosched()
			continue
		}
		time.Sleep(wait)
		wait = min(2*wait, pollMax)
	}
}

// errEnded is what a collective meets when Abort has ended the
// communicator under it.
var errEnded = errors.New("the communicator was aborted")

// poll reports whether the collective queued last has finished, or the
// communicator's error. It never touches a communicator that Abort (from
// another goroutine) has ended.
func (c *NCCL) poll() (bool, error) {
	c.endMu.RLock()
	defer c.endMu.RUnlock()
	if c.ended {
		return false, errEnded
	}
	done, err := c.eng.reached()
	if err != nil || done {
		return done, err
	}
	return false, c.eng.asyncError()
}

func (c *NCCL) timedOut(what string) error {
	return fmt.Errorf("nccl: rank %d of %d: %s did not complete within %v: another rank has stalled or died", c.rank, c.size, what, c.timeout)
}

// fail breaks the communicator with err and aborts it, which also ends
// any call still blocked in NCCL. The caller holds c.mu.
func (c *NCCL) fail(err error) error {
	c.broken = err
	c.end(c.eng.abort)
	return err
}

// end runs abort or destroy, whichever comes first, once, after any poll
// in progress.
func (c *NCCL) end(fn func() error) error {
	c.endMu.Lock()
	defer c.endMu.Unlock()
	if !c.ended {
		c.ended = true
		c.endResult = fn()
	}
	return c.endResult
}

// Abort aborts the communicator and ends every rank's process with
// reason: through the communicator the ID came by (MPI_Abort) when there
// is one; otherwise it can end only this process, by panicking with reason,
// and the other ranks' collectives then fail or time out. It does not
// return.
func (c *NCCL) Abort(reason error) {
	fmt.Fprintf(os.Stderr, "nccl: rank %d aborting the job: %v\n", c.rank, reason)
	// Not under c.mu: a collective holding it may be what is stuck.
	c.end(c.eng.abort)
	if c.boot != nil {
		c.boot.Abort(reason)
	}
	panic(fmt.Sprintf("nccl: rank %d of %d aborted the job: %v", c.rank, c.size, reason))
}

// Close waits for the device's queued work and releases the communicator.
// After a failed collective it returns that collective's error (the
// communicator was aborted then). The bootstrap communicator, if any, is
// left to its owner.
func (c *NCCL) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.broken != nil {
		return c.broken
	}
	err := c.dev.Sync()
	if e := c.end(c.eng.destroy); err == nil && e != nil {
		err = fmt.Errorf("nccl: rank %d: %w", c.rank, e)
	}
	return err
}
