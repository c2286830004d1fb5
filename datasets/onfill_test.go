package datasets_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mixprec/mixprec/datasets"
)

// TestOnFill checks that OnFill reports every batch built, once, with a
// worker in range (-1 when the loop builds it), a start no later than its
// end, all before the loop statement completes; and that reporting
// changes no batch.
func TestOnFill(t *testing.T) {
	d := indexed(103, []int{2, 3}, 10)
	for _, m := range loaderModes {
		t.Run(m.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[int]int{}
			workers := map[int]bool{}
			done := false
			bad := ""
			report := datasets.OnFill(func(worker, batch int, start, end time.Time) {
				mu.Lock()
				defer mu.Unlock()
				if done {
					bad = "a call after the loop completed"
				}
				if end.Before(start) || start.IsZero() {
					bad = "start after end, or no start"
				}
				seen[batch]++
				workers[worker] = true
			})
			got := collect(d, 10, append(slices.Clone(m.opts), report)...)
			mu.Lock()
			done = true
			mu.Unlock()
			if bad != "" {
				t.Error(bad)
			}
			want := collect(d, 10, m.opts...)
			if len(got) != len(want) {
				t.Fatalf("%d batches with OnFill, %d without", len(got), len(want))
			}
			for i := range got {
				if !slices.Equal(got[i].x, want[i].x) || !slices.Equal(got[i].y, want[i].y) {
					t.Fatalf("batch %d differs with OnFill", i)
				}
			}
			for k := range len(want) {
				if seen[k] != 1 {
					t.Errorf("batch %d reported %d times, want 1", k, seen[k])
				}
			}
			// The workers a mode may report: the loop itself when it
			// builds batches, else the background workers it starts.
			lo, hi := 0, 1
			if strings.HasPrefix(m.name, "sync") {
				lo, hi = -1, 0
			} else if _, n, ok := strings.Cut(m.name, "workers="); ok {
				hi, _ = strconv.Atoi(n)
			}
			for w := range workers {
				if w < lo || w >= hi {
					t.Errorf("worker %d reported, want %d to %d", w, lo, hi-1)
				}
			}
		})
	}
}
