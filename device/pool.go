package device

import "sync"

// Pool is the memory management every backend shares: each buffer's bytes
// are accounted (Accountant) from Alloc to Free; its block of memory comes
// from the cache of freed blocks when one of its size is there (Cache),
// from the system otherwise; MemStats reports both. A backend supplies the
// system's side, NewBlock and FreeBlock, and how it rounds sizes, and keeps
// its own buffer type (which embeds a BufferHeader). B is the backend's
// block: a Go slice, a device address.
//
// A Pool is safe for concurrent use. Its fields are set before first use
// and not changed afterwards.
type Pool[B any] struct {
	// Size rounds a request of n bytes to the size of the block it takes,
	// by which the cache keys blocks (the CPU: whole float32 words; CUDA:
	// its size classes). nil keeps n.
	Size func(n int64) int64
	// NewBlock takes a block of size bytes from the system.
	NewBlock func(size int64) (B, error)
	// FreeBlock returns a block to the system; nil lets it go (to Go's
	// collector).
	FreeBlock func(size int64, b B) error
	// BeforeRelease, where not nil, runs before cached blocks return to
	// the system (a GPU waits for the work that may still use them).
	BeforeRelease func() error
	// Scrub, where not nil, runs on every block as it is freed, before it
	// is cached (cudaops' ZeroOnFree).
	Scrub func(size int64, b B) error
	// Limit bounds the bytes the cache holds, 0 for no bound; a freed
	// block beyond it returns to the system.
	Limit int64

	acct     Accountant
	mu       sync.Mutex // guards cache and reserved
	cache    Cache[B]
	reserved int64 // bytes in blocks the pool holds: in buffers, cached, and views it accounts
}

// size is the block size of n bytes: none for an empty buffer.
func (p *Pool[B]) size(n int64) int64 {
	if n == 0 || p.Size == nil {
		return n
	}
	return p.Size(n)
}

// Alloc accounts a new buffer with header h and returns its block (the
// zero B for an empty buffer).
func (p *Pool[B]) Alloc(h *BufferHeader) (B, error) {
	b, _, err := p.TakeBlock(h.Bytes())
	if err == nil {
		p.acct.Alloc(h)
	}
	return b, err
}

// Free takes the bytes of h, a buffer from Alloc whose block is b, out of
// the accounting, marks h freed, and returns b (ReturnBlock). The backend
// has checked that h was live.
func (p *Pool[B]) Free(h *BufferHeader, b B) error {
	p.acct.Free(h)
	return p.ReturnBlock(p.size(h.Bytes()), b)
}

// TakeBlock returns a block for n bytes, and its size, without accounting
// it: a kernel's scratch memory, which the accounting leaves out as it
// does on every backend. The block is the one of its size freed last if
// the cache holds one, else a new one from the system; when the system has
// no room and the cache holds blocks of other sizes, those return to the
// system first and the allocation is tried again.
func (p *Pool[B]) TakeBlock(n int64) (B, int64, error) {
	var b B
	size := p.size(n)
	if size == 0 {
		return b, 0, nil
	}
	p.mu.Lock()
	b, ok := p.cache.Get(size)
	p.mu.Unlock()
	if ok {
		return b, size, nil
	}
	b, err := p.NewBlock(size)
	if err != nil && p.Cached() > 0 {
		if err := p.EmptyCache(); err != nil {
			return b, 0, err
		}
		b, err = p.NewBlock(size)
	}
	if err != nil {
		return b, 0, err
	}
	p.mu.Lock()
	p.reserved += size
	p.mu.Unlock()
	return b, size, nil
}

// ReturnBlock gives back a block of size bytes from TakeBlock: Scrub runs
// on it, and it is cached for the next request of its size, or returned
// to the system when the cache is full.
func (p *Pool[B]) ReturnBlock(size int64, b B) error {
	if size == 0 {
		return nil
	}
	if p.Scrub != nil {
		if err := p.Scrub(size, b); err != nil {
			return err
		}
	}
	p.mu.Lock()
	p.cache.Limit = p.Limit
	cached := p.cache.Put(size, b)
	if !cached {
		p.reserved -= size
	}
	p.mu.Unlock()
	if !cached && p.FreeBlock != nil {
		return p.FreeBlock(size, b)
	}
	return nil
}

// AccountView records a buffer over memory the pool did not provide (a
// view of its caller's memory): its bytes count as live and held until
// FreeView.
func (p *Pool[B]) AccountView(h *BufferHeader) {
	p.mu.Lock()
	p.reserved += h.Bytes()
	p.mu.Unlock()
	p.acct.Alloc(h)
}

// FreeView ends a buffer from AccountView.
func (p *Pool[B]) FreeView(h *BufferHeader) {
	p.acct.Free(h)
	p.mu.Lock()
	p.reserved -= h.Bytes()
	p.mu.Unlock()
}

// Recategorize moves h's bytes to category c.
func (p *Pool[B]) Recategorize(h *BufferHeader, c Category) { p.acct.Recategorize(h, c) }

// MemStats reports the accounting, with Reserved the bytes of every block
// the pool holds, in buffers or cached.
func (p *Pool[B]) MemStats() MemStats {
	s := p.acct.Stats()
	p.mu.Lock()
	s.Reserved = p.reserved
	p.mu.Unlock()
	return s
}

// ResetPeak sets every peak to its live value.
func (p *Pool[B]) ResetPeak() { p.acct.ResetPeak() }

// Cached is the number of bytes in cached blocks.
func (p *Pool[B]) Cached() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cache.Cached()
}

// EmptyCache returns every cached block to the system, after
// BeforeRelease, and reports the first error.
func (p *Pool[B]) EmptyCache() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cache.Cached() == 0 {
		return nil
	}
	if p.BeforeRelease != nil {
		if err := p.BeforeRelease(); err != nil {
			return err
		}
	}
	return p.cache.Drain(func(size int64, b B) error {
		p.reserved -= size
		if p.FreeBlock == nil {
			return nil
		}
		return p.FreeBlock(size, b)
	})
}
