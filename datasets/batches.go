package datasets

import (
	"fmt"
	"iter"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Batch is one mini-batch: X has shape [B, sample shape...] and Y holds the B
// labels. B is the batch size except perhaps in the last batch of an epoch.
// Index counts the batches of the epoch from 0.
//
// A Batch is valid only until the loop body that received it returns: the
// next iteration reuses its memory (X.Data, X.Shape and Y). The loop body may
// read and write it freely meanwhile, since no worker touches it until then;
// copy whatever must outlive the step.
type Batch struct {
	X     tensor.Host
	Y     []int32
	Index int
	// X16 is the batch rounded to the dtype [Bits] names, when it names
	// one, in place of X: X is then empty (nil Shape and Data). Without
	// Bits, X16's Bits are nil.
	X16 tensor.Host16
}

// Part is samples lo to hi-1 of b, sharing its memory (and as short-lived):
// a part of a batch whose gradients a step adds up (gradient
// accumulation).
func (b Batch) Part(lo, hi int) Batch {
	p := Batch{Y: b.Y[lo:hi], Index: b.Index}
	if b.X16.Bits != nil {
		row := len(b.X16.Bits) / b.X16.Shape[0]
		p.X16 = tensor.Host16{Shape: append([]int{hi - lo}, b.X16.Shape[1:]...), DType: b.X16.DType, Bits: b.X16.Bits[lo*row : hi*row]}
		return p
	}
	row := len(b.X.Data) / b.X.Shape[0]
	p.X = tensor.Host{Shape: append([]int{hi - lo}, b.X.Shape[1:]...), Data: b.X.Data[lo*row : hi*row]}
	return p
}

// An Option adjusts [Batches] and [NumBatches].
type Option func(*config)

type config struct {
	shuffle  bool
	seed     uint64
	epoch    int
	dropLast bool
	prefetch int
	workers  int
	augment  AugmentFunc
	from     int
	rank     int
	ranks    int // 0: no sharding
	onFill   func(worker, batch int, start, end time.Time)
	bits     dtype.DType // F32: no X16
}

// Shuffle visits the samples in a random order drawn from seed and the epoch
// (see [Epoch]). The order is a pure function of the two, the same on every
// run, machine and Go release, so a training run can be repeated or resumed
// mid-way. The seed also drives [Augment].
func Shuffle(seed uint64) Option {
	return func(c *config) { c.shuffle, c.seed = true, seed }
}

// Epoch says which epoch this pass over the data is, 0 by default. It changes
// the shuffled order and the augmentations, so a training loop over several
// epochs passes its epoch counter; without it every epoch would repeat the
// first one's order.
func Epoch(e int) Option {
	if e < 0 {
		panic(fmt.Sprintf("datasets: Epoch(%d): epoch must be >= 0", e))
	}
	return func(c *config) { c.epoch = e }
}

// DropLast leaves out the final batch of an epoch when it would be short, so
// that every batch has exactly the batch size. By default it is kept, as in
// PyTorch's DataLoader.
func DropLast() Option {
	return func(c *config) { c.dropLast = true }
}

// Prefetch lets background workers prepare up to n batches ahead of the loop
// (default 2), so that copying and augmentation overlap the training step.
// Prefetch(0) prepares every batch in the loop's own goroutine and starts no
// goroutines at all. Memory held is n + workers batches.
func Prefetch(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("datasets: Prefetch(%d): n must be >= 0", n))
	}
	return func(c *config) { c.prefetch = n }
}

// Workers sets how many goroutines prepare batches in the background (default
// 1); each builds whole batches. More help when augmentation is costly. The
// batches are the same whatever the number; it is ignored under Prefetch(0).
func Workers(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("datasets: Workers(%d): n must be >= 1", n))
	}
	return func(c *config) { c.workers = n }
}

// From starts the epoch at batch k: batches 0 to k-1 are neither built nor
// yielded, and the rest are exactly those an uninterrupted pass yields (same
// samples, augmentations and Index), which is how a resumed run continues
// mid-epoch. k may equal the number of batches (nothing is left).
func From(k int) Option {
	if k < 0 {
		panic(fmt.Sprintf("datasets: From(%d): k must be >= 0", k))
	}
	return func(c *config) { c.from = k }
}

// Shard gives this process its part of each epoch in data-parallel training
// over size processes, as PyTorch's DistributedSampler does: the epoch's
// order (shuffled or not) is padded by repeating its first samples until its
// length divides by size, and rank takes every size-th sample from position
// rank on. Every rank then sees ceil(n/size) samples, the ranks' parts are
// disjoint apart from the padding, and together they are the whole epoch.
// With the same seed on every rank, rank r's batch k holds the samples that
// a single process with a batch size-times larger would have at positions
// r, r+size, r+2*size, ... of its batch k.
func Shard(rank, size int) Option {
	if size < 1 || rank < 0 || rank >= size {
		panic(fmt.Sprintf("datasets: Shard(%d, %d): want 0 <= rank < size", rank, size))
	}
	return func(c *config) { c.rank, c.ranks = rank, size }
}

// Augment applies fn to every sample of every batch after it is copied out of
// the data set, in the background workers. Each call gets a generator seeded
// from the [Shuffle] seed (0 without Shuffle), the [Epoch] and the sample's
// index in the data set, so the result does not depend on which worker runs it
// or when. fn is called from several goroutines at once.
func Augment(fn AugmentFunc) Option {
	return func(c *config) { c.augment = fn }
}

// OnFill calls fn each time a batch has been built, with the worker that
// built it (0 to Workers-1, or -1 under Prefetch(0), where the loop's own
// goroutine builds batches), the batch's index and when the building began
// and ended: what a profiler needs to draw the loader's workers on a
// timeline. fn is called from the workers' goroutines, concurrently, and
// never after the loop statement has completed.
func OnFill(fn func(worker, batch int, start, end time.Time)) Option {
	return func(c *config) { c.onFill = fn }
}

// Bits has each batch rounded to dt (F16 or BF16) by the worker that
// builds it, after any augmentation, and delivered in Batch.X16 instead of
// Batch.X: a training step under autocast then copies half the bytes to
// the device and converts nothing (autograd.Graph.InputBits). Without
// augmentation, the worker rounds each sample as it reads it from the data
// set, and never writes a float32 batch. dtype.F32 turns it off.
func Bits(dt dtype.DType) Option {
	if dt != dtype.F32 && dt != dtype.F16 && dt != dtype.BF16 {
		panic(fmt.Sprintf("datasets: Bits(%v): want F16, BF16 or F32 (none)", dt))
	}
	return func(c *config) { c.bits = dt }
}

// Batches returns one epoch of d in batches of batchSize, for use with range:
//
//	for b := range datasets.Batches(train, 128, datasets.Shuffle(seed), datasets.Epoch(e)) {
//		// b.X is [128 1 28 28], b.Y holds 128 labels
//	}
//
// Every sample appears exactly once per epoch (with [DropLast], all but the
// remainder). The batches, their order and their contents depend only on d and
// the options, not on [Prefetch] or [Workers]. Breaking out of the loop stops
// the background workers before the loop statement completes. Ranging over
// the returned sequence again repeats the same epoch.
func Batches(d *Dataset, batchSize int, opts ...Option) iter.Seq[Batch] {
	p := newPlan(d, batchSize, opts)
	return func(yield func(Batch) bool) {
		if p.cfg.from == p.batches {
			return
		}
		order := p.order()
		if p.cfg.prefetch == 0 {
			p.runSync(order, yield)
			return
		}
		p.runAsync(order, yield)
	}
}

// NumBatches is the number of batches in the epoch [Batches] yields for the
// same arguments, for progress bars and learning-rate schedules; [From] does
// not change it.
func NumBatches(d *Dataset, batchSize int, opts ...Option) int {
	return newPlan(d, batchSize, opts).batches
}

// plan is one epoch's worth of decisions, made before any batch is built.
type plan struct {
	d       *Dataset
	size    int // batch size
	m       int // values per sample
	batches int
	n       int // samples in the epoch: the shard's when sharded
	cfg     config
}

func newPlan(d *Dataset, batchSize int, opts []Option) *plan {
	d.check("Batches")
	if batchSize < 1 {
		panic(fmt.Sprintf("datasets: Batches of %s: batch size %d must be >= 1", d.Name, batchSize))
	}
	p := &plan{d: d, size: batchSize, m: tensor.Numel(d.Shape), cfg: config{prefetch: 2, workers: 1}}
	for _, o := range opts {
		o(&p.cfg)
	}
	p.n = d.Len()
	if p.cfg.ranks > 0 {
		p.n = (d.Len() + p.cfg.ranks - 1) / p.cfg.ranks
	}
	p.batches = p.n / batchSize
	if !p.cfg.dropLast && p.n%batchSize != 0 {
		p.batches++
	}
	if p.cfg.from > p.batches {
		panic(fmt.Sprintf("datasets: Batches of %s: From(%d) is past the epoch's %d batches", d.Name, p.cfg.from, p.batches))
	}
	return p
}

// order is the sequence of sample indices for the epoch; nil means 0, 1, 2...
func (p *plan) order() []int {
	var all []int
	if p.cfg.shuffle {
		all = permutation(p.d.Len(), p.cfg.seed, p.cfg.epoch)
	}
	if p.cfg.ranks == 0 {
		return all
	}
	if all == nil {
		all = make([]int, p.d.Len())
		for i := range all {
			all[i] = i
		}
	}
	mine := make([]int, p.n)
	for j := range mine {
		mine[j] = all[(p.cfg.rank+j*p.cfg.ranks)%len(all)]
	}
	return mine
}

// slot is the memory of one batch in flight. ready carries a slot from the
// worker that filled it to the loop; the loop hands the slot back by sending
// the next batch index for it to the workers. Those two channel operations
// order every access, so a slot is never written while the loop reads it.
type slot struct {
	x     []float32
	x16   []uint16 // with Bits
	y     []int32
	shape []int
	batch Batch
	ready chan struct{} // capacity 1: a worker never waits to deliver
	panic string        // set when the augmentation panicked
}

// gathersF32 reports whether batches are gathered as float32 (without Bits,
// or to augment them); otherwise each sample is rounded as it is read.
func (p *plan) gathersF32() bool { return p.cfg.bits == dtype.F32 || p.cfg.augment != nil }

func (p *plan) newSlot() *slot {
	var x []float32
	var x16 []uint16
	if p.gathersF32() {
		x = make([]float32, p.size*p.m)
	}
	if p.cfg.bits != dtype.F32 {
		x16 = make([]uint16, p.size*p.m)
	}
	return &slot{
		x:     x,
		x16:   x16,
		y:     make([]int32, p.size),
		shape: append([]int{p.size}, p.d.Shape...),
		ready: make(chan struct{}, 1),
	}
}

func (p *plan) runSync(order []int, yield func(Batch) bool) {
	s := p.newSlot()
	f := p.newFiller(order)
	for k := p.cfg.from; k < p.batches; k++ {
		start := p.now()
		f.fill(s, k)
		p.filled(-1, k, start)
		if !yield(s.batch) {
			return
		}
	}
}

// runAsync is a ring of slots: batch k lives in slot k%len(slots). The loop
// sends a batch index to jobs only once that index's slot is free, so the
// indices workers hold always name distinct slots. Workers may finish out of
// order; the loop still takes batches in order, waiting on each slot's ready.
func (p *plan) runAsync(order []int, yield func(Batch) bool) {
	first := p.cfg.from
	nslots := min(p.cfg.prefetch+p.cfg.workers, p.batches-first)
	slots := make([]*slot, nslots)
	jobs := make(chan int, nslots)
	for i := range slots {
		slots[i] = p.newSlot()
		jobs <- first + i
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range min(p.cfg.workers, nslots) {
		wg.Go(func() {
			f := p.newFiller(order)
			f.yields = true
			for {
				k, ok := nextJob(jobs)
				if !ok {
					break
				}
				select {
				case <-done:
					continue // the loop has stopped: drain without working
				default:
				}
				s := slots[(k-first)%nslots]
				start := p.now()
				f.fillSafely(s, k)
				p.filled(w, k, start)
				s.ready <- struct{}{}
			}
		})
	}
	// Deferred so that a panic in the loop body, or one passed on from a
	// worker, also stops the workers; Wait makes the loop statement outlive
	// them, so no goroutine of ours survives it.
	defer func() {
		close(done)
		close(jobs)
		wg.Wait()
	}()
	for k := first; k < p.batches; k++ {
		s := slots[(k-first)%nslots]
		<-s.ready
		if s.panic != "" {
			panic(s.panic)
		}
		if !yield(s.batch) {
			return
		}
		if next := k + nslots; next < p.batches {
			jobs <- next // never blocks: at most nslots indices are ever queued
		}
	}
}

// A background worker shares the machine with the training step, whose
// parallel kernels want every core for tens of microseconds at a time, and
// whose helper goroutines poll for work between kernels instead of
// blocking, each holding a core (see the CPU device's GEMM). Go does not
// preempt a goroutine that runs for less than 10 ms, so a worker building
// a batch in one go (100-200 µs) keeps a core from the step's kernels; and
// a worker blocked on its channel is woken onto the loop's own core, the
// one that never yields during a step, where it waits. So a worker polls
// for its next batch (nextJob) as the helpers poll for theirs, which puts
// it in their turn on the other core, and it lets them run every
// yieldRows samples while it builds one. One-epoch MNIST MLP, 8
// alternated pairs, these two with the GEMM's helpers polling 1 ms against
// the arrangement before (a blocked worker building whole batches,
// helpers polling 200 µs): FP32 1.05x, f16 1.12x. Against that, the
// worker not yielding: 0.97x and 0.96x; polling 200 µs: 0.96x and 0.93x.
const (
	workerSpin = time.Millisecond
	yieldRows  = 16
)

// nextJob receives a worker's next batch index: it polls jobs for up to
// workerSpin, yielding at every turn, then blocks.
func nextJob(jobs <-chan int) (int, bool) {
	for end := time.Now().Add(workerSpin); time.Now().Before(end); {
		select {
		case k, ok := <-jobs:
			return k, ok
		default:
			runtime.Gosched()
			osYield()
		}
	}
	k, ok := <-jobs
	return k, ok
}

// now reads the clock for OnFill, and only for it.
func (p *plan) now() time.Time {
	if p.cfg.onFill == nil {
		return time.Time{}
	}
	return time.Now()
}

// filled reports a batch built since start to OnFill's function, if any.
func (p *plan) filled(worker, k int, start time.Time) {
	if p.cfg.onFill != nil {
		p.cfg.onFill(worker, k, start, time.Now())
	}
}

// filler builds batches; each worker has its own, so its generator needs no
// lock.
type filler struct {
	p     *plan
	order []int
	shape []int // a private copy for the augmentation, which must not change it
	pcg   *rand.PCG
	rng   *rand.Rand
	seed  uint64 // the augmentation stream of this epoch
	// yields is set for a background worker: it lets other goroutines run
	// every yieldRows samples (see nextJob).
	yields bool
}

func (p *plan) newFiller(order []int) *filler {
	pcg := rand.NewPCG(0, 0)
	return &filler{
		p: p, order: order, shape: slices.Clone(p.d.Shape),
		pcg: pcg, rng: rand.New(pcg),
		seed: mix(p.cfg.seed ^ mix(uint64(p.cfg.epoch)^augmentStream)),
	}
}

// fill copies batch k into s and augments it.
func (f *filler) fill(s *slot, k int) {
	p := f.p
	lo := k * p.size
	b := min(p.size, p.n-lo)
	m := p.m
	dt := p.cfg.bits
	s.shape[0] = b
	gather := p.gathersF32()
	for j := range b {
		if f.yields && j > 0 && j%yieldRows == 0 {
			runtime.Gosched()
		}
		i := f.index(lo + j)
		src := p.d.X[i*m : (i+1)*m]
		s.y[j] = p.d.Y[i]
		if !gather {
			// Round each sample straight from the data set: half the bytes
			// written, and none read back, against a float32 batch rounded
			// afterwards.
			dtype.Encode(dt, s.x16[j*m:(j+1)*m], src)
			continue
		}
		dst := s.x[j*m : (j+1)*m]
		copy(dst, src)
		if p.cfg.augment != nil {
			// Reseeding per sample is what makes the result independent
			// of which worker got the batch and of what it did before.
			f.pcg.Seed(f.seed, uint64(i))
			p.cfg.augment(dst, f.shape, f.rng)
		}
	}
	s.batch = Batch{Y: s.y[:b], Index: k}
	if dt == dtype.F32 {
		s.batch.X = tensor.Host{Shape: s.shape, Data: s.x[:b*m]}
		return
	}
	if gather { // augmented: round the batch
		dtype.Encode(dt, s.x16[:b*m], s.x[:b*m])
	}
	s.batch.X16 = tensor.Host16{Shape: s.shape, DType: dt, Bits: s.x16[:b*m]}
}

// index is the data set's index of the epoch's sample j.
func (f *filler) index(j int) int {
	if f.order != nil {
		return f.order[j]
	}
	return j
}

// fillSafely is fill for a worker: a panic in the augmentation is carried to
// the loop's goroutine, where the caller can see and recover it, instead of
// killing the program from a goroutine the caller does not own.
func (f *filler) fillSafely(s *slot, k int) {
	defer func() {
		if v := recover(); v != nil {
			s.panic = fmt.Sprintf("datasets: augmentation panicked building batch %d: %v\n\nworker stack:\n%s", k, v, debug.Stack())
		}
	}()
	f.fill(s, k)
}

// Streams that keep the shuffle and the augmentation of one seed independent.
const (
	shuffleStream = 0x73687566666c6521 // "shuffle!"
	augmentStream = 0x6175676d656e7421 // "augment!"
)

// permutation is a Fisher-Yates shuffle of 0..n-1 driven by a PCG generator
// seeded from (seed, epoch). It draws bounded integers itself (Lemire's
// method) rather than through rand.Rand, whose algorithms may change between
// Go releases; the PCG stream is fixed, so the order is too.
func permutation(n int, seed uint64, epoch int) []int {
	src := rand.NewPCG(mix(seed^shuffleStream), mix(uint64(epoch)))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := bounded(src, uint64(i)+1)
		order[i], order[j] = order[j], order[i]
	}
	return order
}

// bounded returns a uniform integer in [0, n), n > 0, without modulo bias.
func bounded(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		threshold := -n % n
		for lo < threshold {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// mix is SplitMix64's finaliser: it spreads nearby inputs (seeds 1, 2, 3,
// epochs 0, 1, 2) over the whole 64-bit range before they seed a generator.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
