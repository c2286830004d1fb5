// Package mpi is a [device.Comm] over Open MPI, loaded at run time from
// libmpi.so.40 (Debian's openmpi-bin) with purego, so a program that links
// it still runs where MPI is absent and says what is missing. Programs are
// started with mpirun, one process per rank:
//
//	mpirun -np 2 ./train -dist mpi
//
// Every MPI call is made from one goroutine locked to its OS thread, which
// is what MPI_THREAD_SERIALIZED asks of a program whose other goroutines
// keep computing while a collective runs (a data-parallel backward pass
// reduces gradients in the background).
//
// Errors come back as Go errors, each one line with MPI's own words for
// it: the communicator is set to MPI_ERRORS_RETURN, where Open MPI's
// default ends every process with a dump of its own (and a process of Go,
// aborted inside a foreign call, with a crash of the Go runtime besides).
//
// A collective that does not finish within the timeout (a rank died or
// stalled) returns an error instead of hanging the caller, and the Comm is
// broken from then on. The error names the ranks that are missing: the
// ranks that timed out tell each other, point to point on a communicator
// of their own, which collective they were in, and each names the ranks it
// did not hear from (or that were in another collective). That needs a
// second thread to call MPI while the first is still in the collective, so
// MPI is initialised with MPI_THREAD_MULTIPLE where it offers it (Debian's
// Open MPI does); every other call is still made from the one thread.
//
// Buffers are reduced in host memory: CPU buffers in place when F32,
// otherwise through an F32 copy (16-bit buffers are summed in F32 and
// rounded once, and GPU buffers go through the host).
package mpi

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// DefaultTimeout bounds one collective. A step's all-reduce takes
// milliseconds; minutes mean a rank is gone.
const DefaultTimeout = 5 * time.Minute

// Open MPI's ABI constants (mpi.h).
const (
	mpiSuccess         = 0
	mpiThreadSerialize = 2
	mpiThreadMultiple  = 3
	mpiInPlace         = 1 // MPI_IN_PLACE is ((void *) 1)
	mpiMaxErrorString  = 256
	stallTag           = 0x6d70 // the tag of the messages that find a stalled rank
)

// lib holds the functions and handles of a loaded libmpi.
type lib struct {
	initThread    func(argc, argv unsafe.Pointer, required int32, provided *int32) int32
	initialized   func(flag *int32) int32
	finalize      func() int32
	commRank      func(comm uintptr, rank *int32) int32
	commSize      func(comm uintptr, size *int32) int32
	commDup       func(comm uintptr, dup *uintptr) int32
	setErrhandler func(comm, handler uintptr) int32
	errorString   func(code int32, s unsafe.Pointer, n *int32) int32
	allreduce     func(send uintptr, recv unsafe.Pointer, count int32, dt, op, comm uintptr) int32
	bcast         func(buf unsafe.Pointer, count int32, dt uintptr, root int32, comm uintptr) int32
	barrier       func(comm uintptr) int32
	isend         func(buf unsafe.Pointer, count int32, dt uintptr, dest, tag int32, comm uintptr, req *uintptr) int32
	irecv         func(buf unsafe.Pointer, count int32, dt uintptr, src, tag int32, comm uintptr, req *uintptr) int32
	test          func(req *uintptr, flag *int32, status uintptr) int32
	abort         func(comm uintptr, code int32) int32

	// &ompi_mpi_comm_world, &ompi_mpi_float, &ompi_mpi_int, &ompi_mpi_op_sum,
	// &ompi_mpi_errors_return
	world, float, int32t, sum, errorsReturn uintptr
}

// libName is the library Open loads; MIXPREC_LIBMPI overrides it.
func libName() string {
	if p := os.Getenv("MIXPREC_LIBMPI"); p != "" {
		return p
	}
	return "libmpi.so.40"
}

func load() (*lib, error) {
	name := libName()
	// RTLD_GLOBAL: Open MPI's plug-ins are libraries it opens itself, which
	// need libmpi's symbols in the global scope.
	h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("mpi: cannot load %s (install Debian's openmpi-bin, or set MIXPREC_LIBMPI to the library): %w", name, err)
	}
	l := &lib{}
	funcs := []struct {
		fn   any
		name string
	}{
		{&l.initThread, "MPI_Init_thread"}, {&l.initialized, "MPI_Initialized"}, {&l.finalize, "MPI_Finalize"},
		{&l.commRank, "MPI_Comm_rank"}, {&l.commSize, "MPI_Comm_size"}, {&l.commDup, "MPI_Comm_dup"},
		{&l.setErrhandler, "MPI_Comm_set_errhandler"}, {&l.errorString, "MPI_Error_string"},
		{&l.allreduce, "MPI_Allreduce"}, {&l.bcast, "MPI_Bcast"}, {&l.barrier, "MPI_Barrier"},
		{&l.isend, "MPI_Isend"}, {&l.irecv, "MPI_Irecv"}, {&l.test, "MPI_Test"}, {&l.abort, "MPI_Abort"},
	}
	for _, f := range funcs {
		if _, err := purego.Dlsym(h, f.name); err != nil {
			return nil, fmt.Errorf("mpi: %s has no %s: is it Open MPI? %w", name, f.name, err)
		}
		purego.RegisterLibFunc(f.fn, h, f.name)
	}
	for _, d := range []struct {
		p    *uintptr
		name string
	}{{&l.world, "ompi_mpi_comm_world"}, {&l.float, "ompi_mpi_float"}, {&l.int32t, "ompi_mpi_int"},
		{&l.sum, "ompi_mpi_op_sum"}, {&l.errorsReturn, "ompi_mpi_errors_return"}} {
		addr, err := purego.Dlsym(h, d.name)
		if err != nil {
			return nil, fmt.Errorf("mpi: %s has no %s: only Open MPI's ABI is supported: %w", name, d.name, err)
		}
		*d.p = addr
	}
	return l, nil
}

// Comm is the world communicator of an MPI job.
type Comm struct {
	l          *lib
	rank, size int
	timeout    time.Duration
	calls      chan func()
	mu         sync.Mutex // serialises callers, so collectives keep one order
	broken     error
	closed     bool
	seq        int32          // collectives started, for finding a stalled rank
	side       uintptr        // a duplicate of the world, for those messages alone
	multiple   bool           // MPI_THREAD_MULTIPLE: a thread may call MPI while the MPI thread is in a collective
	stuck      runtime.Pinner // buffers of collectives that timed out: MPI may still write them
}

var _ device.Comm = (*Comm)(nil)

// Option configures Open.
type Option func(*Comm)

// Timeout bounds each collective (default DefaultTimeout).
func Timeout(d time.Duration) Option { return func(c *Comm) { c.timeout = d } }

var (
	openMu sync.Mutex
	opened bool
)

// Open initialises MPI and returns the world communicator. A process can
// open MPI once (MPI cannot be initialised again after it is finalised).
// Outside mpirun it is a world of one rank.
func Open(opts ...Option) (*Comm, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if opened {
		return nil, errors.New("mpi: Open called twice; MPI can be initialised once per process")
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	c := &Comm{l: l, timeout: DefaultTimeout, calls: make(chan func())}
	for _, o := range opts {
		o(c)
	}
	go c.serve()
	var initErr error
	c.do(func() {
		// MPI_THREAD_MULTIPLE where the MPI offers it, only so that after
		// a timeout another thread can find the stalled rank while this
		// one is still in the collective; every other call is serialised.
		var provided int32
		if rc := l.initThread(nil, nil, mpiThreadMultiple, &provided); rc != mpiSuccess {
			initErr = fmt.Errorf("mpi: MPI_Init_thread failed (error %d)", rc)
			return
		}
		if provided < mpiThreadSerialize {
			initErr = fmt.Errorf("mpi: this MPI offers thread level %d, mixprec needs MPI_THREAD_SERIALIZED", provided)
			return
		}
		c.multiple = provided >= mpiThreadMultiple
		if rc := l.setErrhandler(l.world, l.errorsReturn); rc != mpiSuccess {
			initErr = fmt.Errorf("mpi: MPI_Comm_set_errhandler: %s", c.describe(rc))
			return
		}
		var r, s int32
		l.commRank(l.world, &r)
		l.commSize(l.world, &s)
		c.rank, c.size = int(r), int(s)
		if rc := l.commDup(l.world, &c.side); rc != mpiSuccess {
			initErr = fmt.Errorf("mpi: MPI_Comm_dup: %s", c.describe(rc))
			return
		}
		l.setErrhandler(c.side, l.errorsReturn)
	})
	if initErr != nil {
		close(c.calls)
		return nil, initErr
	}
	opened = true
	return c, nil
}

// serve runs every MPI call on one OS thread.
func (c *Comm) serve() {
	runtime.LockOSThread()
	for fn := range c.calls {
		fn()
	}
}

// do runs fn on the MPI thread and waits for it.
func (c *Comm) do(fn func()) {
	done := make(chan struct{})
	c.calls <- func() { fn(); close(done) }
	<-done
}

// describe is MPI's text for the error code rc; call it on the MPI thread.
func (c *Comm) describe(rc int32) string {
	var buf [mpiMaxErrorString]byte
	var n int32
	if c.l.errorString(rc, unsafe.Pointer(&buf[0]), &n) != mpiSuccess || n <= 0 || n > mpiMaxErrorString {
		return fmt.Sprintf("MPI error %d", rc)
	}
	return fmt.Sprintf("%s (MPI error %d)", buf[:n], rc)
}

// collective runs fn on the MPI thread, giving up after the timeout: the
// call may still be stuck in MPI, so the Comm is broken from then on, and
// the memory of bufs (which MPI may still write) is never released. On a
// timeout it finds out which ranks are missing (stalled) before it
// returns, where the MPI allows a second thread to call it meanwhile.
func (c *Comm) collective(what string, fn func() int32, bufs ...unsafe.Pointer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("mpi: %s on a closed communicator", what)
	}
	if c.broken != nil {
		return c.broken
	}
	c.seq++
	done := make(chan error, 1)
	c.calls <- func() {
		if rc := fn(); rc != mpiSuccess {
			done <- fmt.Errorf("mpi: rank %d: %s failed: %s", c.rank, what, c.describe(rc))
			return
		}
		done <- nil
	}
	select {
	case err := <-done:
		c.broken = err
		return err
	case <-time.After(c.timeout):
		for _, b := range bufs {
			c.stuck.Pin(b)
		}
		why := "another rank has stalled or died (this MPI cannot say which: it does not offer MPI_THREAD_MULTIPLE)"
		if c.multiple {
			runtime.LockOSThread()
			why = c.findStalled()
			runtime.UnlockOSThread()
		}
		c.broken = fmt.Errorf("mpi: rank %d of %d: %s (collective %d) did not complete within %v: %s", c.rank, c.size, what, c.seq, c.timeout, why)
		return c.broken
	}
}

// findStalled runs, beside the MPI thread still in a collective, after
// the collective timed out: it sends this rank's collective number to
// every other rank and listens for theirs for a while (the others that
// timed out do the same), and names the ranks it did not hear from, or
// that were in another collective.
func (c *Comm) findStalled() string {
	grace := min(c.timeout, 30*time.Second)
	mine := c.seq
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&mine)
	theirs := make([]int32, c.size)
	pin.Pin(&theirs[0])
	recvs := make([]uintptr, c.size)
	heard := make([]bool, c.size)
	for r := range c.size {
		if r == c.rank {
			continue
		}
		var sreq uintptr
		c.l.isend(unsafe.Pointer(&mine), 1, c.l.int32t, int32(r), stallTag, c.side, &sreq) // completes or not: nothing waits for it
		if c.l.irecv(unsafe.Pointer(&theirs[r]), 1, c.l.int32t, int32(r), stallTag, c.side, &recvs[r]) != mpiSuccess {
			recvs[r] = 0
		}
	}
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		all := true
		for r := range c.size {
			if r == c.rank || heard[r] || recvs[r] == 0 {
				continue
			}
			var done int32
			if c.l.test(&recvs[r], &done, 0) == mpiSuccess && done != 0 {
				heard[r] = true
				continue
			}
			all = false
		}
		if all {
			break
		}
	}
	var silent, elsewhere []string
	for r := range c.size {
		switch {
		case r == c.rank:
		case !heard[r]:
			silent = append(silent, fmt.Sprint(r))
		case theirs[r] != mine:
			elsewhere = append(elsewhere, fmt.Sprintf("rank %d in collective %d", r, theirs[r]))
		}
	}
	if len(silent) == 0 && len(elsewhere) == 0 {
		return "every rank was waiting in it too; the network or MPI itself is stuck"
	}
	var parts []string
	if len(silent) > 0 {
		parts = append(parts, fmt.Sprintf("%s %s did not reach it and did not answer for %v: stalled or died",
			plural(len(silent), "rank", "ranks"), strings.Join(silent, ", "), grace))
	}
	if len(elsewhere) > 0 {
		parts = append(parts, "the ranks are out of step ("+strings.Join(elsewhere, ", ")+"): they did not run the same program or settings")
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Rank is this process's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// hostF32 is a buffer's F32 view that can be reduced in place (CPU F32
// buffers), or nil.
func hostF32(b device.Buffer) []float32 {
	if v, ok := b.(interface{ Float32s() []float32 }); ok && b.DType() == dtype.F32 {
		return v.Float32s()
	}
	return nil
}

// withHost runs fn on b's values as F32 host memory and writes them back
// when b is not already host F32.
func withHost(b device.Buffer, write bool, fn func([]float32) error) error {
	if s := hostF32(b); s != nil {
		return fn(s)
	}
	tmp := make([]float32, b.Len())
	b.Device().CopyToHost(tmp, b)
	if err := fn(tmp); err != nil {
		return err
	}
	if write {
		b.Device().CopyFromHost(b, tmp)
	}
	return nil
}

// maxCount is the most elements one MPI call takes: 16 MiB of F32. Single
// all-reduces of 32 MiB and more ran 40 times slower than 16 MiB ones with
// Debian's Open MPI 4.1 on two ranks, over shared memory and TCP alike
// (mixprec bench allreduce), while pieces of 16 MiB keep 2-3 GB/s; it also
// keeps the count within MPI's int.
const maxCount = 1 << 22

// AllReduceF32 reduces s in place across ranks.
func (c *Comm) AllReduceF32(s []float32, op device.ReduceOp) error {
	for lo := 0; lo < len(s); lo += maxCount {
		part := s[lo:min(lo+maxCount, len(s))]
		p := unsafe.Pointer(&part[0])
		err := c.collective("all-reduce", func() int32 {
			return c.l.allreduce(mpiInPlace, p, int32(len(part)), c.l.float, c.l.sum, c.l.world)
		}, p)
		if err != nil {
			return err
		}
	}
	if op == device.Avg && c.size > 1 {
		inv := 1 / float32(c.size)
		for i := range s {
			s[i] *= inv
		}
	}
	return nil
}

// AllReduce replaces b with the reduction over ranks.
func (c *Comm) AllReduce(b device.Buffer, op device.ReduceOp) error {
	if b.Len() == 0 {
		return nil
	}
	return withHost(b, true, func(s []float32) error { return c.AllReduceF32(s, op) })
}

// Broadcast replaces b with root's b.
func (c *Comm) Broadcast(b device.Buffer, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: broadcast from rank %d of %d", root, c.size)
	}
	if b.Len() == 0 {
		return nil
	}
	return withHost(b, true, func(s []float32) error {
		for lo := 0; lo < len(s); lo += maxCount {
			part := s[lo:min(lo+maxCount, len(s))]
			p := unsafe.Pointer(&part[0])
			err := c.collective("broadcast", func() int32 {
				return c.l.bcast(p, int32(len(part)), c.l.float, int32(root), c.l.world)
			}, p)
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Barrier waits for every rank.
func (c *Comm) Barrier() error {
	return c.collective("barrier", func() int32 { return c.l.barrier(c.l.world) })
}

// Abort prints reason and ends every rank's process (MPI_Abort); it does
// not return.
func (c *Comm) Abort(reason error) {
	fmt.Fprintf(os.Stderr, "mpi: rank %d aborting the job: %v\n", c.rank, reason)
	// Not through the MPI thread, which may be the one that is stuck.
	c.l.abort(c.l.world, 1)
	select {} // MPI_Abort does not return
}

// Close finalises MPI. After a broken collective it does not wait for the
// other ranks (MPI_Finalize would), and returns the collective's error.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.broken != nil {
		return c.broken
	}
	var rc int32
	c.do(func() { rc = c.l.finalize() })
	close(c.calls)
	if rc != mpiSuccess {
		return fmt.Errorf("mpi: MPI_Finalize failed (MPI error %d)", rc)
	}
	return nil
}
