package device

import "slices"

// Cache is the caching part of a backend's allocator, shared by every
// backend (tinygrad's LRU allocator, PyTorch's caching allocator): freed
// blocks of memory wait on a free list for their size, and the next
// allocation of that size takes one back instead of asking the system (Go's
// heap, the CUDA driver). A training step frees and allocates the same
// sizes every step, so after its first it allocates nothing new. B is the
// backend's block: a Go slice, a device address.
//
// Sizes are in bytes, as the backend rounds them: the CPU keys blocks by
// their exact size, cudaops by its size classes. A Cache holds at most
// Limit bytes (no bound when 0). It is not safe for concurrent use; the
// backend's lock guards it. The zero value is an empty Cache without a
// bound.
type Cache[B any] struct {
	// Limit bounds the bytes held; Put refuses a block beyond it.
	Limit  int64
	free   map[int64][]B
	cached int64
}

// Get takes a cached block of size bytes, the one freed last, and reports
// whether there was one.
func (c *Cache[B]) Get(size int64) (B, bool) {
	l := c.free[size]
	if len(l) == 0 {
		var zero B
		return zero, false
	}
	b := l[len(l)-1]
	var zero B
	l[len(l)-1] = zero // drop the reference: the block is the caller's now
	c.free[size] = l[:len(l)-1]
	c.cached -= size
	return b, true
}

// Put caches block b of size bytes and reports whether it did: it does not
// when that would take the cache past Limit, and the caller then releases
// the block itself.
func (c *Cache[B]) Put(size int64, b B) bool {
	if c.Limit > 0 && c.cached+size > c.Limit {
		return false
	}
	if c.free == nil {
		c.free = map[int64][]B{}
	}
	c.free[size] = append(c.free[size], b)
	c.cached += size
	return true
}

// Cached is the number of bytes the cache holds.
func (c *Cache[B]) Cached() int64 { return c.cached }

// Drain empties the cache, handing every block to release (nil to let
// them go), the smallest sizes first, and returns release's first error;
// the cache is empty afterwards whatever release returned.
func (c *Cache[B]) Drain(release func(size int64, b B) error) error {
	var first error
	if release != nil {
		sizes := make([]int64, 0, len(c.free))
		for s := range c.free {
			sizes = append(sizes, s)
		}
		slices.Sort(sizes)
		for _, s := range sizes {
			for _, b := range c.free[s] {
				if err := release(s, b); err != nil && first == nil {
					first = err
				}
			}
		}
	}
	clear(c.free)
	c.cached = 0
	return first
}
