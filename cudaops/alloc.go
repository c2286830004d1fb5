package cudaops

import "math/bits"

// The caching allocator: blocks freed by Free go to the device's
// device.Cache under their size class and are handed out again by the next
// Alloc of that class, so a training step, which frees and reallocates the
// same sizes every iteration, stops calling cuMemAlloc (a slow driver
// call, and cuMemFree waits for the whole device) after its first step.
// Blocks return to the driver only when an allocation would otherwise
// fail, or on EmptyCache.
//
// All work is on one stream, so a block freed while kernels that use it are
// still queued can be reused at once: any later use is queued after them.

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
	if ptr, ok := d.cache.Get(size); ok {
		return ptr, size, nil
	}
	ptr, err := d.g.memAlloc(size)
	if err != nil && isCode(err, cudaErrorOutOfMemory) && d.cache.Cached() > 0 {
		// Cached blocks of other sizes may be what is missing.
		if err2 := d.emptyCache(); err2 != nil {
			return 0, 0, err2
		}
		ptr, err = d.g.memAlloc(size)
	}
	if err != nil {
		return 0, 0, err
	}
	d.reserved += size
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
	d.cache.Put(size, ptr)
}

// emptyCache frees every cached block. It waits for queued work first: a
// block freed by Free may still be in use by a kernel, and cuMemFree of
// memory in use is undefined.
func (d *Device) emptyCache() error {
	if d.cache.Cached() == 0 {
		return nil
	}
	if err := d.g.sync(); err != nil {
		return err
	}
	return d.cache.Drain(func(size int64, ptr uint64) error {
		d.reserved -= size
		return d.g.memFree(ptr)
	})
}
