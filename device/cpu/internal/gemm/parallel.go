package gemm

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A parallel Gemm cuts C into pieces that the calling goroutine and the
// package's helpers claim one at a time until none is left. The caller
// starts at once and never waits for a helper to arrive: on a loaded
// machine, where waking a helper can take longer than the whole product,
// it simply does more of the pieces itself, and it only waits for pieces a
// helper has already begun. Which goroutine computes a piece does not
// change its bits, since pieces are whole micro-tiles apart and the k
// blocking depends on k alone.
//
// Two ways of cutting:
//
//   - strips: when op(A) packed whole is small (stripBudget), C is cut into
//     column strips of all rows. Each worker packs op(A) once, on its first
//     strip, and keeps it for the next ones, so small pieces cost no extra
//     packing; only op(B) is packed per strip, and all of it just once. It
//     is chosen when a worker packs no more of A and B than with grid's
//     rectangles, which holds for all the MLP and convolution products.
//   - rectangles: otherwise, the pm x pn grid that grid chose, each
//     rectangle blocked for the caches as a single-goroutine call would be.

// spin bounds how long a helper keeps polling for its next task after one
// ends, and how long a caller polls for the helpers' last pieces, before
// they block. Waking a blocked thread takes tens of microseconds on a
// virtual machine (an interrupt to a halted vCPU), as long as a whole MLP
// product takes on two cores; polling a while lets the products of a
// training step, which come a few microseconds apart, start on all cores
// at once. OpenMP runtimes spin between parallel regions for the same
// reason. Unlike them, a poller yields at every turn, so that on a machine
// busy with other work it gives way instead of taking a core: a helper to
// other goroutines and threads (pause), a caller to other threads only
// (osYield; see parallel for why).
//
// Measured on 2 vCPUs shared with other jobs (MLP training step, 12
// interleaved runs each): without polling, median 98k (F32 67k) samples/s
// in BF16, best 127k (92k); polling 50 µs, 115k (73k), best 171k (125k);
// 200 µs at least as good again.
//
// 1 ms covers a whole MLP step (about 0.9 ms on two cores), so the helper
// of the first layer's product is still polling when the next step
// starts: at 200 µs it had blocked in 4 steps of 5 during the optimiser
// and the batch's arrival, and woke 100-160 µs into that product, which
// the caller had by then done three quarters of alone. Longer polling
// pays only because the pool also runs the device's parallel kernels
// (Polling, Offer) and the data loader's worker yields as it goes
// (datasets); otherwise a polling helper keeps the second core from the
// goroutines that the step wakes on the first one. One-epoch MNIST MLP, 8
// alternated pairs, 1 ms with the loader's polling against 200 µs without
// it: FP32 1.05x, f16 1.12x (before the device's kernels came to the
// pool, which took it to 1.10x and 1.09x, and the CNN from 0.97x and
// 0.95x to 1.05x and 1.04x); 500 µs and 2 ms were slower than 1 ms.
const spin = time.Millisecond

// stripBudget bounds the floats of a whole packed op(A) for the strips: 128
// Ki floats (512 KiB) stay within a 1 MiB L2 beside the B panels.
const stripBudget = 1 << 17

// stripsPerWorker is how many strips each worker gets on average: more
// strips even the load when one core is slowed by other work, and cost
// only the loop overhead of the extra pieces.
const stripsPerWorker = 4

// task is one parallel Gemm call, shared with the helpers by pointer, and
// reused from call to call (tasks) so that a parallel product allocates
// nothing. A helper may receive a task after all its pieces are taken, even
// after it has been reused for a later call. It reads the task's fields
// only after claiming a piece on claims, which holds the call's number of
// pieces and the next piece to claim: a helper holding a task from an
// earlier call either finds no piece left, or claims a piece of the current
// call and runs it as any helper would. Once it has run a piece it claims
// only within that call (gen), since what it keeps between pieces (op(A)
// packed by a first strip) belongs to that call.
type task struct {
	j        job
	strips   bool // column strips; else rectangles of a pm x pn grid
	pm, pn   int
	batch    Batch // with Count > 0, pieces are strips of a batch's products,
	perEntry int   // this many per product
	accum    bool  // or strips of one C, each adding all the products in turn
	pieces   int
	gen      atomic.Uint64  // the call's number, stored before claims
	claims   atomic.Uint64  // pieces<<32 | the next piece to claim
	left     atomic.Int64   // pieces not yet finished, for polling
	done     sync.WaitGroup // the same, for blocking
}

// maxTaskPieces bounds a task's pieces, which claims holds in 32 bits.
const maxTaskPieces = 1<<32 - 1

var tasks = sync.Pool{New: func() any { return new(task) }}

// newTask returns a task for a call with job j, its other fields zero.
func newTask(j job) *task {
	t := tasks.Get().(*task)
	t.j = j
	return t
}

// finish publishes t's pieces (t.pieces, the fields set), computes them with
// up to workers goroutines, the caller and workers-1 helpers, and returns
// when all are done, reporting whether Out16.Unscale met an Inf or NaN; t
// goes back to the pool.
func (t *task) finish(workers int) (nonFinite bool) {
	if t.pieces > maxTaskPieces {
		panic(fmt.Sprintf("gemm: %d pieces in one call; at most %d", t.pieces, maxTaskPieces))
	}
	t.gen.Add(1)
	t.left.Store(int64(t.pieces))
	t.done.Add(t.pieces)
	t.claims.Store(uint64(t.pieces) << 32) // publishes the fields above
	helpers.offer(t, workers-1)
	buf := bufPool.Get().(*buffers)
	t.work(buf)
	bufPool.Put(buf)
	if t.left.Load() > 0 {
		// The caller polls with osYield alone, not pause: runtime.Gosched
		// would hand its P to any goroutine waiting for one, such as a data
		// loader's worker that the step woke by taking a batch, and the
		// caller, the step's critical path, would then wait for that
		// goroutine's whole turn (tens of microseconds) instead of for the
		// helper's piece. The helper that holds the piece is already
		// running; after spin the caller blocks in Wait anyway.
		for end := time.Now().Add(spin); t.left.Load() > 0 && time.Now().Before(end); {
			osYield()
		}
	}
	t.done.Wait()
	nonFinite = atomic.LoadUint32(&t.j.nonFinite) != 0
	// A helper may still receive t, or hold it, after its pieces are gone:
	// dropping the job keeps such a stale task from holding the operands.
	// (claims, left and done stay as they are: such a helper reads claims,
	// and the next call stores it afresh.)
	t.j, t.batch = job{}, Batch{}
	t.strips, t.pm, t.pn, t.perEntry, t.accum, t.pieces = false, 0, 0, 0, false, 0
	tasks.Put(t)
	return nonFinite
}

// claim takes the next piece of t's current call and returns it with the
// call's number; ok is false when none is left, or, with want > 0, when
// the current call is not call want. A claims value with a piece left
// belongs to the call whose number gen holds from before that value was
// stored until after it is exhausted, so the gen read between loading c
// and swapping it is c's call's whenever the swap succeeds.
func (t *task) claim(want uint64) (piece int, gen uint64, ok bool) {
	for {
		c := t.claims.Load()
		if c&maxTaskPieces >= c>>32 {
			return 0, 0, false
		}
		g := t.gen.Load()
		if want > 0 && g != want {
			return 0, 0, false
		}
		if t.claims.CompareAndSwap(c, c+1) {
			return int(c & maxTaskPieces), g, true
		}
	}
}

// parallel computes C with up to workers goroutines: the caller and
// workers-1 helpers, pm x pn being grid's choice of rectangles.
func (j job) parallel(workers, pm, pn int) (nonFinite bool) {
	t := newTask(j)
	t.pm, t.pn = pm, pn
	t.strips, t.pieces = j.cut(workers, pm, pn)
	return t.finish(workers)
}

// cut chooses between strips and grid's pm x pn rectangles for workers
// goroutines, and returns the number of pieces.
func (j *job) cut(workers, pm, pn int) (strips bool, pieces int) {
	mr, nr := j.im.mr, j.im.nr
	mt, nt := ceilDiv(j.m, mr), ceilDiv(j.n, nr)
	// Rows and columns of op(A) and op(B) one worker packs, each k long.
	stripPack := mt*mr + ceilDiv(nt, workers)*nr
	rectPack := ceilDiv(mt, pm)*mr + ceilDiv(nt, pn)*nr
	if mt*mr*j.steps(j.k) <= stripBudget && stripPack <= rectPack {
		return true, min(nt, stripsPerWorker*workers)
	}
	return false, pm * pn
}

// strip returns the columns [n0, n1) of strip i of C cut into strips
// whole micro-tiles wide (empty when there are more strips than tiles).
func (j *job) strip(i, strips int) (n0, n1 int) {
	nt := ceilDiv(j.n, j.im.nr)
	return i * nt / strips * j.im.nr, min(j.n, (i+1)*nt/strips*j.im.nr)
}

// work claims and computes pieces of t until none is left.
func (t *task) work(buf *buffers) {
	j := &t.j
	aPacked := false // whether buf.a holds all of op(A), packed on a first strip
	aEntry := -1     // with a batch, the product whose op(A) that is
	gen := uint64(0) // the call of the pieces run so far (0: none yet)
	for {
		i, g, ok := t.claim(gen)
		if !ok {
			return
		}
		gen = g
		if t.batch.Count > 0 {
			t.runPiece(buf, &aPacked, &aEntry, i)
		} else if t.strips {
			n0, n1 := j.strip(i, t.pieces)
			j.runStrip(buf, &aPacked, n0, n1)
		} else {
			// Rectangles are whole micro-tiles apart, so every
			// rectangle sees the same tile grid as a single goroutine.
			mt, nt := ceilDiv(j.m, j.im.mr), ceilDiv(j.n, j.im.nr)
			im, in := i/t.pn, i%t.pn
			m0, m1 := min(j.m, im*mt/t.pm*j.im.mr), min(j.m, (im+1)*mt/t.pm*j.im.mr)
			n0, n1 := min(j.n, in*nt/t.pn*j.im.nr), min(j.n, (in+1)*nt/t.pn*j.im.nr)
			if m0 < m1 && n0 < n1 {
				j.runRect(buf, m0, m1, n0, n1)
			}
		}
		t.left.Add(-1)
		t.done.Done()
	}
}

// helpers is the package's pool of helper goroutines. They are started when
// a call first wants them, as many as it wants (GOMAXPROCS-1, or more when
// a test forces more workers), and then live as long as the program,
// blocked on a channel receive once idle for longer than spin, so that an
// idle pool costs no CPU and a call pays no goroutine start. Each owns its
// packing buffers.
var helpers pool

type pool struct {
	mu      sync.Mutex
	n       int
	tasks   chan any     // *task or Work
	polling atomic.Int32 // helpers polling for their next task
}

// offer starts helpers until there are n and hands t to as many as n of
// them without blocking: a task left in the channel after its pieces are
// gone costs its eventual receiver one atomic add.
func (p *pool) offer(t *task, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	if p.tasks == nil {
		// Room for every helper of a few concurrent calls; when it is
		// full, the calls just get less help.
		p.tasks = make(chan any, 4*max(runtime.NumCPU(), 8))
	}
	for ; p.n < n; p.n++ {
		go helper(p.tasks)
	}
	p.mu.Unlock()
	for range n {
		select {
		case p.tasks <- t:
		default:
			return
		}
	}
}

// helper runs tasks for as long as the program runs, polling for the next
// one for a while (spin) before it blocks.
func helper(tasks <-chan any) {
	buf := new(buffers)
	for t := range tasks {
		for t != nil {
			switch t := t.(type) {
			case *task:
				t.work(buf)
			case Work:
				t.Work()
			}
			t = nil
			helpers.polling.Add(1)
			for end := time.Now().Add(spin); t == nil && time.Now().Before(end); {
				select {
				case t = <-tasks:
				default:
					pause()
				}
			}
			helpers.polling.Add(-1)
		}
	}
}

// Work is a parallel kernel of the CPU device's own (elementwise, a
// convolution's chunks) that the pool's helpers can join: Work claims and
// runs pieces until none is left, may be called by several goroutines at
// once, and must be harmless when called again after the kernel has
// returned (it then finds no piece).
type Work interface{ Work() }

// Polling reports how many of the pool's helpers are polling for work now,
// rather than running a product or blocked. The device offers its kernels
// to these first: a polling helper holds a core, and a goroutine the
// device woke instead could not have it until the helper blocks.
func Polling() int { return int(helpers.polling.Load()) }

// Offer hands w to up to n of the pool's helpers without blocking and
// reports to how many. It neither starts helpers nor waits for them; a
// helper that takes w after its pieces are gone finds nothing to do.
func Offer(w Work, n int) int {
	p := &helpers
	p.mu.Lock()
	ch := p.tasks
	p.mu.Unlock()
	if ch == nil {
		return 0
	}
	for i := range n {
		select {
		case ch <- w:
		default:
			return i
		}
	}
	return n
}

// pause is one turn of a polling loop: it lets other goroutines run, then
// lets other threads have this core if any is waiting for it (osYield).
func pause() {
	runtime.Gosched()
	osYield()
}
