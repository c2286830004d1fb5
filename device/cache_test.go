package device

import (
	"errors"
	"slices"
	"testing"
)

// TestCache checks the shared allocator cache: a block comes back for its
// size only, the last freed first; the byte count follows; Limit refuses
// what would exceed it; Drain hands every block over, smallest sizes
// first, keeps going after an error and reports the first.
func TestCache(t *testing.T) {
	var c Cache[string]
	if _, ok := c.Get(64); ok {
		t.Fatal("Get from an empty cache found a block")
	}
	for _, p := range []struct {
		size int64
		b    string
	}{{64, "a"}, {64, "b"}, {128, "c"}, {32, "d"}} {
		if !c.Put(p.size, p.b) {
			t.Fatalf("Put(%d, %q) refused without a limit", p.size, p.b)
		}
	}
	if got := c.Cached(); got != 288 {
		t.Errorf("Cached() = %d, want 288", got)
	}
	if b, ok := c.Get(64); !ok || b != "b" {
		t.Errorf("Get(64) = %q, %v; want the last freed, %q", b, ok, "b")
	}
	if _, ok := c.Get(96); ok {
		t.Errorf("Get(96) found a block; only 32, 64 and 128 are cached")
	}
	if got := c.Cached(); got != 224 {
		t.Errorf("after Get: Cached() = %d, want 224", got)
	}
	var order []string
	bad := errors.New("bad block")
	err := c.Drain(func(size int64, b string) error {
		order = append(order, b)
		if b == "a" || b == "c" {
			return bad
		}
		return nil
	})
	if want := []string{"d", "a", "c"}; !slices.Equal(order, want) {
		t.Errorf("Drain released %v, want %v (smallest sizes first)", order, want)
	}
	if err != bad {
		t.Errorf("Drain = %v, want the first error %v", err, bad)
	}
	if c.Cached() != 0 {
		t.Errorf("after Drain: Cached() = %d, want 0", c.Cached())
	}
	if _, ok := c.Get(32); ok {
		t.Errorf("after Drain: Get(32) found a block")
	}

	limited := Cache[int]{Limit: 100}
	if !limited.Put(60, 1) || !limited.Put(40, 2) {
		t.Fatal("Put within the limit refused")
	}
	if limited.Put(1, 3) {
		t.Errorf("Put past the limit of 100 (holding 100) accepted")
	}
	if got := limited.Cached(); got != 100 {
		t.Errorf("Cached() = %d, want 100", got)
	}
	if err := limited.Drain(nil); err != nil || limited.Cached() != 0 {
		t.Errorf("Drain(nil) = %v, Cached() = %d; want nil and 0", err, limited.Cached())
	}
}
