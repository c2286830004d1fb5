package cudaops

import (
	"math/bits"
	"sort"
)

// pool is the caching allocator: blocks freed by Free go to a free list
// for their size bucket and are handed out again by the next Alloc of that
// bucket, so a training step, which frees and reallocates the same sizes
// every iteration, stops calling cuMemAlloc (a slow driver call, and
// cuMemFree waits for the whole device) after its first step. Blocks return to the driver only when an
// allocation would otherwise fail, or on EmptyCache.
//
// All work is on one stream, so a block freed while kernels that use it are
// still queued can be reused at once: any later use is queued after them.
type pool struct {
	free     map[int64][]uint64 // bucket size -> cached blocks
	reserved int64              // bytes held from the driver: in buffers and cached
	cached   int64              // bytes in the free lists
}

func (p *pool) init() { p.free = map[int64][]uint64{} }

// bucket rounds a request up to its size class: at least 512 bytes, and
// above that to one of four steps per power of two (1024, 1280, 1536, 1792,
// 2048, ...), so at most a fifth of a block is slack and sizes that differ
// a little (a last, smaller batch) share blocks.
func bucket(bytes int64) int64 {
	const min = 512
	if bytes <= min {
		return min
	}
	p := bits.Len64(uint64(bytes-1)) - 1 // 2^p < bytes <= 2^(p+1)
	step := int64(1) << (p - 2)
	return (bytes + step - 1) &^ (step - 1)
}

// allocBlock returns a block of at least bytes, and its size. The caller
// holds the device.
func (d *Device) allocBlock(bytes int64) (uint64, int64, error) {
	size := bucket(bytes)
	if l := d.pool.free[size]; len(l) > 0 {
		ptr := l[len(l)-1]
		d.pool.free[size] = l[:len(l)-1]
		d.pool.cached -= size
		return ptr, size, nil
	}
	ptr, err := d.g.memAlloc(size)
	if err != nil && isCode(err, cudaErrorOutOfMemory) && d.pool.cached > 0 {
		// Cached blocks of other sizes may be what is missing.
		if err2 := d.emptyCache(); err2 != nil {
			return 0, 0, err2
		}
		ptr, err = d.g.memAlloc(size)
	}
	if err != nil {
		return 0, 0, err
	}
	d.pool.reserved += size
	return ptr, size, nil
}

// freeBlock puts a block on its free list, zeroing it first when the
// device was opened with ZeroOnFree.
func (d *Device) freeBlock(ptr uint64, size int64) {
	if d.opts.ZeroOnFree {
		if err := d.g.memsetD8(ptr, 0, size); err != nil {
			panic("cudaops: Free: zeroing: " + err.Error())
		}
	}
	d.pool.free[size] = append(d.pool.free[size], ptr)
	d.pool.cached += size
}

// emptyCache frees every cached block. It waits for queued work first: a
// block freed by Free may still be in use by a kernel, and cuMemFree of
// memory in use is undefined.
func (d *Device) emptyCache() error {
	if d.pool.cached == 0 {
		return nil
	}
	if err := d.g.sync(); err != nil {
		return err
	}
	sizes := make([]int64, 0, len(d.pool.free))
	for s := range d.pool.free {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	var first error
	for _, s := range sizes {
		for _, ptr := range d.pool.free[s] {
			if err := d.g.memFree(ptr); err != nil && first == nil {
				first = err
			}
			d.pool.reserved -= s
			d.pool.cached -= s
		}
		delete(d.pool.free, s)
	}
	return first
}
