// Package distributed trains one model on several processes at once, as
// PyTorch's DistributedDataParallel does: every rank holds a full copy of
// the model, takes its own shard of each batch ([datasets.Shard]), and
// averages the gradients with the others before the optimiser steps, so the
// copies stay identical. It is written against [device.Comm] and never
// names MPI or NCCL: an MPI communicator reduces through host memory, an
// NCCL one (cudaops) on the GPU, and the buckets are packed and unpacked on
// the gradients' device either way.
//
// It composes with the rest of a training step as DDP does:
//
//   - The scaler needs no help: gradients are averaged before GradScaler
//     unscales them, so an overflow on any rank becomes an Inf or NaN in
//     every rank's averaged gradient and every rank skips the same step.
//   - Gradient clipping must see the averaged gradients: call SyncGrads,
//     then (with a scaler) Unscale, then optim.ClipGradNorm, then Step.
//     Every rank then computes the same norm and clips alike.
//   - Gradient checkpointing changes nothing: a recomputed segment reports
//     its parameters' gradients when backward ends, and the result is the
//     same, bit for bit, as without checkpointing.
//   - Dropout needs each rank's streams split among the ranks
//     (autograd.RNG.Shard, which the programs apply to every nn.Dropout):
//     every rank then draws its own masks, and with contiguous shards of a
//     batch the masks one process would draw for the whole batch. Without
//     it every rank draws the same masks for its own samples.
//   - BatchNorm's running statistics are not synchronised: each rank keeps
//     its own, computed from its own shard, as DDP does by default, and rank
//     0's are what a saved model holds. Batch statistics in training use
//     the rank's own batch (-batch samples), not the global one.
package distributed

import (
	"fmt"
	"strings"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/tensor"
)

// Entry is one of a model's parameters or buffers with its name, e.g.
// "0.weight" (nn.State lists them): what the ranks must hold alike.
type Entry struct {
	Name string
	Var  *autograd.Var
}

// DefaultBucketBytes is the size of one all-reduce: PyTorch's 25 MiB.
const DefaultBucketBytes = 25 << 20

// DataParallel averages a model's gradients across the ranks of a Comm.
type DataParallel struct {
	comm    device.Comm
	entries []Entry
	params  []*autograd.Var
	bucket  int // elements per all-reduce

	buckets  [][]*autograd.Var     // params in the order backward reaches them, grouped
	bucketOf map[*autograd.Var]int // which bucket a parameter is in
	step     *overlap              // the attached graph's reductions, nil when none
}

// overlap is one step's reductions running while backward goes on.
type overlap struct {
	pending []int      // per bucket, parameters not yet reported
	next    int        // the next bucket to start: they start in order, as every rank must
	work    chan int   // buckets for the worker, in order
	done    chan error // the worker's first error, once it has finished
}

// Option configures New.
type Option func(*DataParallel)

// BucketBytes sets how many bytes of gradients one all-reduce carries.
func BucketBytes(n int) Option {
	return func(d *DataParallel) { d.bucket = max(1, n/4) }
}

// New takes a model's parameters and buffers (in nn.State's order), checks
// that every rank has the same ones (names, shapes and order; every rank
// returns the same *MismatchError, naming the first difference) and then gives every rank rank 0's values,
// so that training starts from one model whatever each rank initialised.
// The gradients of the entries that are parameters are what SyncGrads
// averages. Every rank must call it.
func New(comm device.Comm, entries []Entry, opts ...Option) (*DataParallel, error) {
	d := &DataParallel{comm: comm, entries: entries, bucket: DefaultBucketBytes / 4}
	for _, e := range entries {
		if e.Var.IsParam() {
			d.params = append(d.params, e.Var)
		}
	}
	for _, o := range opts {
		o(d)
	}
	// Buckets hold parameters in reverse order, the order in which
	// backward finishes their gradients, so the first bucket fills first.
	d.bucketOf = map[*autograd.Var]int{}
	n := 0
	for i := len(d.params) - 1; i >= 0; i-- {
		p := d.params[i]
		size := tensor.Numel(p.Shape())
		if len(d.buckets) == 0 || (n > 0 && n+size > d.bucket) {
			d.buckets = append(d.buckets, nil)
			n = 0
		}
		k := len(d.buckets) - 1
		d.buckets[k] = append(d.buckets[k], p)
		d.bucketOf[p] = k
		n += size
	}
	if err := d.checkSame(); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Var.Value == nil {
			return nil, fmt.Errorf("distributed: %s has no value on a device; call nn.To before New", e.Name)
		}
		if err := comm.Broadcast(e.Var.Value.Buffer(), 0); err != nil {
			return nil, fmt.Errorf("distributed: broadcasting %s: %w", e.Name, err)
		}
		e.Var.Value.Modified() // a cached low-precision copy of the old value is stale
	}
	return d, nil
}

// PackedBytes is the most memory the gradients' reduction allocates at
// once on the device: the F32 buffer the largest bucket of several
// parameters is packed into while backward runs (a bucket of one
// parameter is reduced in its gradient), freed once its all-reduce is
// done. A memory plan counts it (memplan.Config.Reserve).
func (d *DataParallel) PackedBytes() int64 {
	var most int64
	for _, b := range d.buckets {
		if len(b) < 2 {
			continue
		}
		var n int64
		for _, p := range b {
			n += int64(tensor.Numel(p.Shape()))
		}
		most = max(most, device.Bytes(dtype.F32, int(n)))
	}
	return most
}

// describe is the model's layout as text: one line per entry.
func (d *DataParallel) describe() string {
	var b strings.Builder
	for _, e := range d.entries {
		fmt.Fprintf(&b, "%s %v\n", e.Name, e.Var.Shape())
	}
	return b.String()
}

func (d *DataParallel) anyDevice() device.Device {
	for _, e := range d.entries {
		if e.Var.Value != nil {
			return e.Var.Value.Device()
		}
	}
	dev, err := device.Open("cpu")
	if err != nil {
		panic("distributed: a model with no values and no CPU backend linked in")
	}
	return dev
}

// checkSame compares every rank's layout with rank 0's. Every rank learns
// every rank's layout, so all fail together with the same *MismatchError,
// naming the first rank that differs and where: any rank's report says it.
func (d *DataParallel) checkSame() error {
	all, err := gatherText(d.comm, d.anyDevice(), d.describe())
	if err != nil {
		return fmt.Errorf("distributed: comparing models: %w", err)
	}
	for r := 1; r < len(all); r++ {
		if diff := firstDifference(all[0], all[r], r); diff != "" {
			return &MismatchError{fmt.Sprintf("distributed: rank %d's model differs from rank 0's: %s", r, diff)}
		}
	}
	return nil
}

// firstDifference names the first entry in which rank r's layout differs
// from rank 0's, or is "".
func firstDifference(root, other string, r int) string {
	a, b := strings.Split(root, "\n"), strings.Split(other, "\n")
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			switch {
			case x == "":
				return fmt.Sprintf("entry %d is %q on rank %d and absent on rank 0", i, y, r)
			case y == "":
				return fmt.Sprintf("entry %d is %q on rank 0 and absent on rank %d", i, x, r)
			}
			return fmt.Sprintf("entry %d is %q on rank 0 and %q on rank %d", i, x, y, r)
		}
	}
	return ""
}

// Comm is the communicator the gradients are averaged over.
func (d *DataParallel) Comm() device.Comm { return d.comm }

// Attach makes the next Backward on g average gradients while it runs:
// as soon as every gradient of a bucket is final (autograd's OnGradReady),
// that bucket is reduced in the background, in bucket order on every rank,
// overlapping communication with the rest of backward. Call it on each
// step's graph before the forward pass, and SyncGrads after Backward, which
// reduces what is left and waits for the rest.
func (d *DataParallel) Attach(g *autograd.Graph) {
	if d.step != nil {
		panic("distributed.Attach: the previous step's SyncGrads was not called")
	}
	if d.comm.Size() == 1 {
		return
	}
	st := &overlap{pending: make([]int, len(d.buckets)), work: make(chan int, len(d.buckets)), done: make(chan error, 1)}
	for k, b := range d.buckets {
		st.pending[k] = len(b)
	}
	d.step = st
	go func() { // the owner is SyncGrads, which always closes work and waits
		var first error
		for k := range st.work {
			if first == nil {
				first = d.reduceBucket(d.buckets[k])
			}
		}
		st.done <- first
	}()
	g.OnGradReady(func(p *autograd.Var) {
		k, ok := d.bucketOf[p]
		if !ok {
			return // not one of the model's parameters
		}
		st.pending[k]--
		for st.next < len(st.pending) && st.pending[st.next] == 0 {
			st.work <- st.next
			st.next++
		}
	})
}

// SyncGrads replaces every parameter's gradient with its average over the
// ranks, in buckets of about the bucket size: the buckets an attached
// graph has not started yet, then it waits for those it has. A parameter
// without a gradient on this rank counts as zeros (and gets the average),
// so ranks that did not use a parameter this step stay in step with those
// that did. Call it after Backward and before the scaler or optimiser
// steps.
func (d *DataParallel) SyncGrads() error {
	if d.comm.Size() == 1 {
		return nil
	}
	st := d.step
	d.step = nil
	if st == nil {
		for _, b := range d.buckets {
			if err := d.reduceBucket(b); err != nil {
				return err
			}
		}
		return nil
	}
	for ; st.next < len(st.pending); st.next++ {
		st.work <- st.next
	}
	close(st.work)
	return <-st.done
}

// reduceBucket averages the gradients of ps with one all-reduce on their
// device: of the gradient itself when the bucket holds one parameter,
// otherwise of an F32 buffer they are packed into and unpacked from by
// device copies, so that nothing crosses to the host that the
// communicator does not move there itself (NCCL reduces on the GPU).
func (d *DataParallel) reduceBucket(ps []*autograd.Var) error {
	dev := ps[0].Value.Device()
	if p := ps[0]; len(ps) == 1 && p.Grad != nil && p.Grad.DType() == dtype.F32 {
		if err := d.comm.AllReduce(p.Grad.Buffer(), device.Avg); err != nil {
			return fmt.Errorf("distributed: averaging gradients: %w", err)
		}
		return nil
	}
	n, missing := 0, false
	for _, p := range ps {
		n += tensor.Numel(p.Shape())
		missing = missing || p.Grad == nil
	}
	buf := tensor.New(dev, dtype.F32, device.Temp, n)
	defer buf.Release()
	b := buf.Buffer()
	if missing {
		dev.Fill(b, 0)
	}
	off := 0
	for _, p := range ps {
		size := tensor.Numel(p.Shape())
		if p.Grad != nil {
			dev.Copy(b, off, p.Grad.Buffer(), 0, size)
		}
		off += size
	}
	if err := d.comm.AllReduce(b, device.Avg); err != nil {
		return fmt.Errorf("distributed: averaging gradients: %w", err)
	}
	off = 0
	for _, p := range ps {
		size := tensor.Numel(p.Shape())
		if p.Grad == nil {
			p.Grad = tensor.New(dev, dtype.F32, device.Grad, p.Shape()...)
		}
		dev.Copy(p.Grad.Buffer(), 0, b, off, size)
		off += size
	}
	return nil
}

// AllReduceHost reduces the host values v in place across the ranks of
// comm, through a buffer on dev: the device whose buffers comm takes (the
// GPU for NCCL; any device for MPI). It is for the few numbers a program
// reports over every rank, such as the sum of the losses and their count.
func AllReduceHost(comm device.Comm, dev device.Device, v []float32, op device.ReduceOp) error {
	if len(v) == 0 {
		return nil
	}
	buf := tensor.New(dev, dtype.F32, device.Temp, len(v))
	defer buf.Release()
	dev.CopyFromHost(buf.Buffer(), v)
	if err := comm.AllReduce(buf.Buffer(), op); err != nil {
		return fmt.Errorf("distributed: reducing %d values: %w", len(v), err)
	}
	dev.CopyToHost(v, buf.Buffer())
	return nil
}
