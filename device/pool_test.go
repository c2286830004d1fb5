package device

import (
	"errors"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

// system is a Pool's system side for tests: numbered blocks, with a limit
// on the bytes it hands out.
type system struct {
	next, used, limit int64
	freed, scrubbed   []int64
	synced            int
}

func (s *system) pool() *Pool[int64] {
	return &Pool[int64]{
		Size: func(n int64) int64 { return (n + 255) &^ 255 },
		NewBlock: func(size int64) (int64, error) {
			if s.limit > 0 && s.used+size > s.limit {
				return 0, errors.New("out of memory")
			}
			s.next++
			s.used += size
			return s.next, nil
		},
		FreeBlock:     func(size, b int64) error { s.used -= size; s.freed = append(s.freed, b); return nil },
		BeforeRelease: func() error { s.synced++; return nil },
		Scrub:         func(_, b int64) error { s.scrubbed = append(s.scrubbed, b); return nil },
	}
}

// TestPool checks the allocator every backend shares: a freed block serves
// the next buffer of its size whatever its dtype, Reserved counts blocks
// in use and cached, the cache's limit sends blocks back to the system, an
// allocation the system refuses is retried after the cache is emptied,
// and views are accounted without blocks.
func TestPool(t *testing.T) {
	var s system
	p := s.pool()
	h := NewBufferHeader(dtype.F32, 100, Activation) // 400 bytes: a 512-byte block
	b, err := p.Alloc(&h)
	if err != nil || b != 1 {
		t.Fatalf("Alloc = %v, %v; want block 1", b, err)
	}
	if m := p.MemStats(); m.Live.Total != 400 || m.Reserved != 512 || m.Live.Category(Activation) != 400 {
		t.Errorf("after Alloc: live %d (activation %d), reserved %d; want 400, 400, 512", m.Live.Total, m.Live.Category(Activation), m.Reserved)
	}
	p.Free(&h, b)
	if !h.Freed() || p.Cached() != 512 || len(s.scrubbed) != 1 {
		t.Errorf("after Free: freed %v, cached %d, scrubbed %v", h.Freed(), p.Cached(), s.scrubbed)
	}
	h2 := NewBufferHeader(dtype.BF16, 250, Temp) // 500 bytes: the same block
	if b2, _ := p.Alloc(&h2); b2 != 1 {
		t.Errorf("an Alloc of the freed block's size got block %d, want the cached 1", b2)
	}
	if m := p.MemStats(); m.Reserved != 512 || m.Peak.Total != 500 {
		t.Errorf("reserved %d, peak %d; want 512 and 500", m.Reserved, m.Peak.Total)
	}
	p.Free(&h2, 1)

	// The system holds 1024 bytes: the cached 512 must go back before a
	// 768-byte block fits.
	s.limit = 1024
	h3 := NewBufferHeader(dtype.F32, 192, Temp)
	if _, err := p.Alloc(&h3); err != nil {
		t.Fatalf("Alloc with the cache holding the room it needs: %v", err)
	}
	if s.synced != 1 || len(s.freed) != 1 || p.Cached() != 0 {
		t.Errorf("the cache was not emptied first: synced %d, freed %v, cached %d", s.synced, s.freed, p.Cached())
	}
	h4 := NewBufferHeader(dtype.F32, 1000, Temp)
	if _, err := p.Alloc(&h4); err == nil {
		t.Errorf("an Alloc past the system's memory succeeded")
	}
	if m := p.MemStats(); m.Live.Total != 768 {
		t.Errorf("a failed Alloc was accounted: live %d, want 768", m.Live.Total)
	}

	// A limit below any block hands freed blocks straight back.
	p.Limit = 1
	p.Free(&h3, 2)
	if p.Cached() != 0 || s.used != 0 || p.MemStats().Reserved != 0 {
		t.Errorf("past the limit: cached %d, system %d, reserved %d; want all 0", p.Cached(), s.used, p.MemStats().Reserved)
	}

	v := NewBufferHeader(dtype.F16, 10, Param)
	p.AccountView(&v)
	if m := p.MemStats(); m.Live.Total != 20 || m.Reserved != 20 || s.used != 0 {
		t.Errorf("a view: live %d, reserved %d, system %d; want 20, 20, 0", m.Live.Total, m.Reserved, s.used)
	}
	p.FreeView(&v)
	if m := p.MemStats(); m.Live.Total != 0 || m.Reserved != 0 {
		t.Errorf("after FreeView: live %d, reserved %d", m.Live.Total, m.Reserved)
	}

	empty := NewBufferHeader(dtype.F32, 0, Temp)
	if b, _ := p.Alloc(&empty); b != 0 || s.next != 2 {
		t.Errorf("an empty buffer took block %d (system blocks %d)", b, s.next)
	}
}
