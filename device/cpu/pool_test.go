package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// withProcs runs the test with GOMAXPROCS at least n, so that devices made
// inside it have helpers even on a one-core machine.
func withProcs(t *testing.T, n int) {
	prev := runtime.GOMAXPROCS(max(n, runtime.GOMAXPROCS(0)))
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestParallelRunsEveryPieceOnce checks that the pieces of a parallel call
// cover [0, n) exactly once with the bounds the grain gives, from several
// goroutines calling one device at once and from a piece that itself
// starts a parallel call.
func TestParallelRunsEveryPieceOnce(t *testing.T) {
	withProcs(t, 4)
	d := New()
	defer d.Close()
	cases := []struct{ n, g int }{{1, 1}, {5, 1}, {100, 7}, {grain, grain}, {3*grain + 5, grain}, {1000, 1}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("n=%d/g=%d", c.n, c.g), func(t *testing.T) {
			const callers = 4
			var wg sync.WaitGroup
			counts := make([][]atomic.Int32, callers)
			for i := range callers {
				counts[i] = make([]atomic.Int32, c.n)
				wg.Add(1)
				go func() {
					defer wg.Done()
					d.parallelGrain(c.n, c.g, func(lo, hi int) {
						if lo%c.g != 0 || hi != min(lo+c.g, c.n) {
							t.Errorf("piece [%d, %d) with grain %d", lo, hi, c.g)
						}
						for j := lo; j < hi; j++ {
							counts[i][j].Add(1)
						}
					})
				}()
			}
			wg.Wait()
			for i := range counts {
				for j := range counts[i] {
					if got := counts[i][j].Load(); got != 1 {
						t.Fatalf("caller %d: element %d ran %d times, want 1", i, j, got)
					}
				}
			}
		})
	}
	// Tasks are reused from call to call, and a helper may still hold one
	// from an earlier call: many short calls of different sizes from
	// several goroutines must each still run every piece once.
	t.Run("reuse", func(t *testing.T) {
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 300 {
					n, g := 1+(i*37+c*11)%200, 1+(i+c)%9
					counts := make([]atomic.Int32, n)
					d.parallelGrain(n, g, func(lo, hi int) {
						for j := lo; j < hi; j++ {
							counts[j].Add(1)
						}
					})
					for j := range counts {
						if got := counts[j].Load(); got != 1 {
							t.Errorf("caller %d call %d (n=%d g=%d): element %d ran %d times", c, i, n, g, j, got)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	})
	t.Run("nested", func(t *testing.T) {
		var total atomic.Int64
		d.parallelGrain(8, 1, func(lo, hi int) {
			d.parallelGrain(1000, 10, func(lo, hi int) { total.Add(int64(hi - lo)) })
		})
		if got := total.Load(); got != 8*1000 {
			t.Errorf("nested calls covered %d elements, want %d", got, 8*1000)
		}
	})
}

// TestParallelAllocs checks that a kernel split across goroutines costs one
// Go allocation per call, its closure: not a goroutine and its bookkeeping
// per worker, nor a record of the call.
func TestParallelAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	withProcs(t, 4)
	d := New()
	x := d.Alloc(dtype.F32, 8*grain, device.Temp)
	y := d.Alloc(dtype.F32, 8*grain, device.Temp)
	d.Unary(device.Neg, y, x, 0) // starts the helpers
	got := testing.AllocsPerRun(50, func() { d.Unary(device.Neg, y, x, 0) })
	if got > 1 {
		t.Errorf("Unary over %d pieces: %v allocations per call, want at most 1", 8, got)
	}
}

// TestCloseStopsHelpers checks that Close ends the helpers a kernel started
// and that the device still computes afterwards, on the calling goroutine.
func TestCloseStopsHelpers(t *testing.T) {
	withProcs(t, 4)
	before := runtime.NumGoroutine()
	d := New()
	n := 2 * minParallel
	x := d.Alloc(dtype.F32, n, device.Temp)
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i)
	}
	d.CopyFromHost(x, in)
	d.Unary(device.Neg, x, x, 0)
	if d.Close() != nil {
		t.Fatal("Close returned an error")
	}
	waitGoroutines(t, before)
	d.Unary(device.Neg, x, x, 0)
	out := make([]float32, n)
	d.CopyToHost(out, x)
	for i, v := range out {
		if v != in[i] {
			t.Fatalf("after Close, element %d = %v, want %v", i, v, in[i])
		}
	}
	waitGoroutines(t, before)
	d.Close() // a second Close is harmless
}

// TestCollectedDeviceStopsHelpers checks that a device dropped without
// Close stops its helpers once the collector reclaims it, so that code
// making many devices does not accumulate goroutines.
func TestCollectedDeviceStopsHelpers(t *testing.T) {
	withProcs(t, 4)
	before := runtime.NumGoroutine()
	hs := make([]*helpers, 10)
	for i := range hs {
		hs[i] = func() *helpers {
			d := New()
			b := d.Alloc(dtype.F32, 2*minParallel, device.Temp)
			d.Fill(b, 1)
			d.Unary(device.Neg, b, b, 0)
			return d.helpers
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, h := range hs {
		for {
			runtime.GC()
			h.mu.Lock()
			stopped := h.stopped
			h.mu.Unlock()
			if stopped {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("helpers of an unreferenced device still running after 10s of collections")
			}
			time.Sleep(5 * time.Millisecond)
		}
		h.exited.Wait()
	}
	waitGoroutines(t, before)
}

// waitGoroutines waits up to a few seconds for the goroutine count to fall
// back to want: a goroutine that has signalled its exit may still be
// counted for a moment.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want %d", runtime.NumGoroutine(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSmallKernelsDoNotAllocate checks that the elementwise kernels a
// training step calls on small buffers run their single piece without a
// Go allocation: the closure that parallel needs is made only when there
// is more than one piece.
func TestSmallKernelsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	withProcs(t, 2)
	d := New()
	defer d.Close()
	const n = grain
	x, y := d.Alloc(dtype.F32, n, device.Temp), d.Alloc(dtype.F32, n, device.Temp)
	h := d.Alloc(dtype.F16, n, device.Temp)
	host := make([]float32, n)
	d.Fill(x, 0.5)
	d.Fill(y, -0.25)
	for _, k := range []struct {
		name string
		run  func()
	}{
		{"Fill", func() { d.Fill(y, 1) }},
		{"Copy f32 to f16", func() { d.Copy(h, 0, x, 0, n) }},
		{"Copy f16 to f32", func() { d.Copy(y, 0, h, 0, n) }},
		{"Axpby", func() { d.Axpby(y, x, y, 2, 1) }},
		{"Axpby beta 0", func() { d.Axpby(y, x, nil, 2, 0) }},
		{"Unary", func() { d.Unary(device.ReLU, y, x, 0) }},
		{"UnaryGrad", func() { d.UnaryGrad(device.ReLU, y, x, x, 0) }},
		{"Dropout", func() { d.Dropout(y, x, 0.5, device.RandKey{Seed: 1}) }},
		{"CopyFromHost", func() { d.CopyFromHost(h, host) }},
		{"CopyToHost", func() { d.CopyToHost(host, h) }},
	} {
		k.run()
		if got := testing.AllocsPerRun(20, k.run); got != 0 {
			t.Errorf("%s on %d elements: %v allocations per call, want 0", k.name, n, got)
		}
	}
}

// TestConvKernelsDoNotAllocate: Im2Col and Col2Im, shared with a helper
// over many planes, in F32 and with a 16-bit input, take their state from
// a pool (convJob) and their taps from a cache, so that a convolution
// unrolled chunk by chunk, many calls a step, allocates nothing.
func TestConvKernelsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	withProcs(t, 2)
	d := New()
	defer d.Close()
	s := device.ConvShape{N: 4, C: 8, H: 12, W: 12, KH: 3, KW: 3, StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, OH: 12, OW: 12, NB: 4}
	cols := s.NB * s.C * s.KH * s.KW * s.OH * s.OW
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		x := d.Alloc(dt, s.N*s.C*s.H*s.W, device.Temp)
		col := d.Alloc(dt, cols, device.Temp)
		dx := d.Alloc(dtype.F32, s.N*s.C*s.H*s.W, device.Temp)
		col32 := d.Alloc(dtype.F32, cols, device.Temp)
		d.Fill(x, 0.5)
		d.Fill(col32, 0.25)
		for _, k := range []struct {
			name string
			run  func()
		}{
			{"Im2Col", func() { d.Im2Col(col, x, s) }},
			{"Im2Col to f32", func() { d.Im2Col(col32, x, s) }},
			{"Col2Im", func() { d.Col2Im(dx, col32, s) }},
		} {
			k.run()
			if got := testing.AllocsPerRun(20, k.run); got != 0 {
				t.Errorf("%s from %v on %d planes: %v allocations per call, want 0", k.name, dt, s.NB*s.C, got)
			}
		}
	}
}
