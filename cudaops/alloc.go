package cudaops

import "math/bits"

// The caching allocator: blocks freed by Free go to the device's
// device.Pool under their size class and are handed out again by the next
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

// initPool sets d's device.Pool to the driver's memory in size classes.
// Blocks return to the driver only when an allocation would otherwise
// fail, or on EmptyCache, after the work queued so far: a block freed by
// Free may still be in use by a kernel, and cuMemFree of memory in use is
// undefined. With Options.ZeroOnFree a block is zeroed as it is freed.
func (d *Device) initPool() {
	d.pool.Size = bucket
	d.pool.NewBlock = d.g.memAlloc
	d.pool.FreeBlock = func(_ int64, ptr uint64) error { return d.g.memFree(ptr) }
	d.pool.BeforeRelease = d.g.sync
	if d.opts.ZeroOnFree {
		d.pool.Scrub = func(size int64, ptr uint64) error { return d.g.memsetD8(ptr, 0, size) }
	}
}
