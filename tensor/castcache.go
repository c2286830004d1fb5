package tensor

import (
	"fmt"
	"sync"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// A tensor can keep copies of itself in other dtypes: autocast's weight
// copies, which a training step would otherwise convert again from the F32
// master weights every step. Each copy remembers which version of the
// tensor it was made from; the version counts the in-place writes recorded
// by Modified. A copy is accounted as device.Cast for as long as it lives,
// and it lives until its tensor is released.

// castMu guards every tensor's casts and version. Copies are few (one per
// parameter) and consulted a few times per step, so one lock is enough,
// and it orders a conversion against concurrent readers.
var castMu sync.Mutex

// cachedCast is a copy of a tensor and the tensor's version it holds.
type cachedCast struct {
	t       *Tensor
	version uint64
}

// CachedCast returns t converted to dt from a copy that t keeps: made on
// first use, handed out again while t is unchanged, and converted again, in
// the same memory, after t has changed. The copy belongs to t: the caller
// must neither write nor release it, and it is freed when t is released.
//
// Changes are known only through Modified, which every in-place write to
// t's buffer outside this package must be followed by; CopyFrom records
// its own. A copy read after an unrecorded write holds the old values.
func (t *Tensor) CachedCast(dt dtype.DType) *Tensor {
	if t.view {
		panic(fmt.Sprintf("tensor.CachedCast: %v is a view; cache the tensor that owns the buffer", t.shape))
	}
	if dt == t.DType() {
		panic(fmt.Sprintf("tensor.CachedCast: tensor %v is already %v", t.shape, dt))
	}
	src := t.live("CachedCast")
	castMu.Lock()
	defer castMu.Unlock()
	for i := range t.casts {
		c := &t.casts[i]
		if c.t.DType() != dt {
			continue
		}
		if c.version != t.version {
			t.dev.Copy(c.t.buf, 0, src, 0, t.Numel())
			c.version = t.version
		}
		return c.t
	}
	c := &Tensor{shape: t.shape, buf: t.dev.Alloc(dt, t.Numel(), device.Cast), dev: t.dev, dt: dt}
	t.dev.Copy(c.buf, 0, src, 0, t.Numel())
	t.casts = append(t.casts, cachedCast{c, t.version})
	return c
}

// CachedCopy returns the copy of t in dt that CachedCast keeps, whether
// current or stale, or nil if there is none: for a writer that updates it
// along with t and then says so to Modified (see device.StepCaster).
func (t *Tensor) CachedCopy(dt dtype.DType) *Tensor {
	castMu.Lock()
	defer castMu.Unlock()
	for _, c := range t.owner().casts {
		if c.t.DType() == dt {
			return c.t
		}
	}
	return nil
}

// Modified records that t's buffer was written in place (by a kernel, or a
// copy from the host) so that CachedCast converts it again. The copies
// listed in fresh were rewritten from t's new values by the same writer
// and stay current.
func (t *Tensor) Modified(fresh ...*Tensor) {
	o := t.owner()
	castMu.Lock()
	defer castMu.Unlock()
	o.version++
	for i := range o.casts {
		for _, f := range fresh {
			if o.casts[i].t == f {
				o.casts[i].version = o.version
			}
		}
	}
}

// owner is the tensor that owns t's buffer: t, or a view's base.
func (t *Tensor) owner() *Tensor {
	if t.view {
		return t.base
	}
	return t
}

// ReleaseCasts frees the copies CachedCast keeps of t now, before t goes;
// the next CachedCast makes one again. A memory planner's dry step drops
// the copies it made, so that the run it plans starts as it would have.
func (t *Tensor) ReleaseCasts() { t.owner().releaseCasts() }

// releaseCasts frees t's copies; t is being released.
func (t *Tensor) releaseCasts() {
	castMu.Lock()
	cs := t.casts
	t.casts = nil
	castMu.Unlock()
	for _, c := range cs {
		c.t.Release()
	}
}
