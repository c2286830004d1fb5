package datasets

import "testing"

// TestMakeSamples: the arrays are zeroed, as long as asked and writable,
// whether they hold no whole huge page, one or several, and whatever their
// alignment.
func TestMakeSamples(t *testing.T) {
	for _, n := range []int{0, 1, 1000, hugePage / 4, hugePage/4 + 1, 3*hugePage/4 + 5, 5 * hugePage / 4} {
		s := makeSamples(n)
		if len(s) != n {
			t.Fatalf("makeSamples(%d): length %d", n, len(s))
		}
		for i, v := range s {
			if v != 0 {
				t.Fatalf("makeSamples(%d): element %d is %v", n, i, v)
			}
		}
		for i := range s {
			s[i] = float32(i)
		}
		for i, v := range s {
			if v != float32(i) {
				t.Fatalf("makeSamples(%d): element %d reads %v after writing %d", n, i, v, i)
			}
		}
	}
}
