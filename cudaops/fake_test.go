package cudaops

import (
	"math"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/dtype"
)

// The tests in this file run everywhere: the device is a fakeGPU (see
// emu_test.go), on which the kernels are Go transliterations of the CUDA
// sources, so they check the Go side and the kernels' algorithms, while
// the tests in cudaops_test.go check the real thing on a GPU.

// TestEmulatedConformance runs the conformance suite on the fake device.
func TestEmulatedConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulated suite takes a while")
	}
	d, g := newFakeDevice(Options{})
	devicetest.Run(t, func() device.Device { return d })
	// Every kernel of the module was exercised, but mp_gemm, which stands
	// in for cuBLAS (TestEmulatedWithoutCublas).
	for _, k := range d.ks.all {
		if g.launches[k.name] == 0 && k.name != "mp_gemm" {
			t.Errorf("the suite never launched %s", k.name)
		}
	}
	if g.gemms == 0 {
		t.Errorf("the suite never called cuBLAS")
	}
	if s := d.MemStats(); s.Live.Total != 0 {
		t.Errorf("after the suite: %d bytes live", s.Live.Total)
	}
}

// TestEmulatedWithoutCublas runs the conformance suite and the CPU
// comparison on a fake device that, as Open does where it finds no
// cuBLAS, takes its GEMMs to mixprec's own kernel: the device works, and
// cuBLAS is never called.
func TestEmulatedWithoutCublas(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulated suite takes a while")
	}
	d, g := newFakeDevice(Options{})
	d.ownGemm = true
	devicetest.Run(t, func() device.Device { return d })
	compareWithCPU(t, d)
	if g.gemms != 0 || g.launches["mp_gemm"] == 0 {
		t.Errorf("cuBLAS called %d times, mp_gemm launched %d times; want none and some", g.gemms, g.launches["mp_gemm"])
	}
}

// TestEmulatedAgainstCPU runs the CPU comparison on the fake device.
func TestEmulatedAgainstCPU(t *testing.T) {
	d, _ := newFakeDevice(Options{})
	compareWithCPU(t, d)
}

func TestEmulatedDeterministic(t *testing.T) {
	d, _ := newFakeDevice(Options{})
	deterministic(t, d)
}

// TestAllocatorCaches checks that freed blocks are reused by size bucket,
// that the accounting counts requested bytes, not buckets, and that
// Reserved covers buffers and cache.
func TestAllocatorCaches(t *testing.T) {
	d, g := newFakeDevice(Options{})
	base := g.allocs
	a := d.Alloc(dtype.F32, 1000, device.Activation) // 4000 bytes: the 4096 bucket
	b := d.Alloc(dtype.F16, 999, device.Grad)        // 1998 bytes: 2048
	s := d.MemStats()
	if s.Live.Total != 4000+1998 {
		t.Errorf("Live.Total = %d, want %d", s.Live.Total, 4000+1998)
	}
	if s.Reserved != 4096+2048 {
		t.Errorf("Reserved = %d, want %d", s.Reserved, 4096+2048)
	}
	d.Free(a)
	d.Free(b)
	if s := d.MemStats(); s.Live.Total != 0 || s.Reserved != 4096+2048 {
		t.Errorf("after Free: Live %d, Reserved %d; want 0 and the cached %d", s.Live.Total, s.Reserved, 4096+2048)
	}
	// A step's worth of the same sizes again: no new driver allocations.
	for range 10 {
		x := d.Alloc(dtype.BF16, 2000, device.Temp) // 4000 bytes: the cached 4096 block
		y := d.Alloc(dtype.F32, 500, device.Temp)   // 2000 bytes: the cached 2048 block
		d.Free(x)
		d.Free(y)
	}
	if n := g.allocs - base; n != 2 {
		t.Errorf("cuMemAlloc called %d times for two sizes, want 2", n)
	}
	if err := d.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	if s := d.MemStats(); s.Reserved != 0 {
		t.Errorf("after EmptyCache: Reserved = %d", s.Reserved)
	}
	z := d.Alloc(dtype.F32, 0, device.Param)
	d.Free(z)
}

func TestBucket(t *testing.T) {
	for _, c := range [][2]int64{{1, 512}, {512, 512}, {513, 640}, {1024, 1024}, {1025, 1280}, {1537, 1792}, {4000, 4096}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<18}} {
		if got := bucket(c[0]); got != c[1] {
			t.Errorf("bucket(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	for n := int64(1); n < 1<<22; n = n*3/2 + 1 {
		if b := bucket(n); b < n || float64(b) > 1.25*float64(n)+512 {
			t.Errorf("bucket(%d) = %d", n, b)
		}
	}
}

// TestZeroOnFree checks that the option clears a freed buffer's memory.
func TestZeroOnFree(t *testing.T) {
	for _, zero := range []bool{false, true} {
		d, g := newFakeDevice(Options{ZeroOnFree: zero})
		b := d.Alloc(dtype.F32, 100, device.Temp)
		d.Fill(b, 3)
		p := b.(*Buffer).ptr
		d.Free(b)
		v := math.Float32frombits(uint32(g.mem(p, 4)[0]) | uint32(g.mem(p, 4)[1])<<8 | uint32(g.mem(p, 4)[2])<<16 | uint32(g.mem(p, 4)[3])<<24)
		if want := map[bool]float32{false: 3, true: 0}[zero]; v != want {
			t.Errorf("ZeroOnFree %v: freed memory holds %v, want %v", zero, v, want)
		}
	}
}

// TestOutOfMemory checks that an allocation that fails releases the cache
// and tries again, and that a real shortage panics with a
// *device.OutOfMemoryError naming the request and what was allocated,
// which the programs report in one line.
func TestOutOfMemory(t *testing.T) {
	d, g := newFakeDevice(Options{})
	g.limit = g.used + 3<<20
	a := d.Alloc(dtype.F32, 1<<19, device.Temp) // 2 MiB
	d.Free(a)                                   // cached
	b := d.Alloc(dtype.F32, 1<<19+1<<16, device.Temp)
	defer func() {
		r := recover()
		oom, ok := r.(*device.OutOfMemoryError)
		if !ok || oom.Request != 4<<20 || oom.Live != 4*(1<<19+1<<16) || !isCode(oom, cudaErrorOutOfMemory) ||
			!strings.Contains(oom.Error(), "cuda:0 is out of memory: 4.0 MiB more with 2.3 MiB allocated") {
			t.Errorf("an allocation beyond the device panicked with %#v (%v)", r, r)
		}
		d.Free(b)
	}()
	d.Alloc(dtype.F32, 1<<20, device.Temp)
}

// TestLaunchChecksArguments checks that a launch whose arguments disagree
// with the PTX panics instead of running.
func TestLaunchChecksArguments(t *testing.T) {
	d, _ := newFakeDevice(Options{})
	for _, c := range []struct {
		name string
		ps   []param
	}{
		{"too few", []param{pPtr(0), pInt(0), pInt(0)}},
		{"wrong size", []param{pPtr(0), pInt(0), pInt(0), pU64(0)}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: launch did not panic", c.name)
				}
			}()
			d.enter()
			defer d.leave()
			d.launch(d.ks.fill, 1, c.ps...)
		}()
	}
}

// TestPTX checks the embedded modules: both architectures hold every
// kernel with the same parameters, and the files carry the generated-code
// header.
func TestPTX(t *testing.T) {
	for _, ptx := range []string{ptxSM70, ptxSM80} {
		if !strings.HasPrefix(ptx, "// Code generated ") || !strings.Contains(strings.SplitN(ptx, "\n", 2)[0], "DO NOT EDIT.") {
			t.Errorf("PTX does not start with a generated-code header: %.80q", ptx)
		}
	}
	a, err := parsePTX(ptxSM70)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parsePTX(ptxSM80)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Errorf("compute_70 has %d kernels, compute_80 %d", len(a), len(b))
	}
	for name, p := range a {
		if q := b[name]; len(p) != len(q) {
			t.Errorf("%s: %v in compute_70, %v in compute_80", name, p, q)
		}
	}
	if p := a["mp_binary"]; len(p) != 9 || p[8] != 4+12*maxDims {
		t.Errorf("mp_binary parameters %v; want 9 ending in a %d-byte Dims", p, 4+12*maxDims)
	}
	for _, ptx := range []string{ptxSM70, ptxSM80} {
		if _, err := newKernelSet(ptx); err != nil {
			t.Error(err)
		}
	}
}

// TestDims checks the simplification of strided iteration spaces.
func TestDims(t *testing.T) {
	it := newDims("test", []int{2, 3, 4}, []int{12, 4, 1}, []int{0, 1, 0})
	if it.n != 24 || len(it.size) != 3 {
		t.Errorf("channel broadcast: %+v", it)
	}
	it = newDims("test", []int{2, 1, 3, 4}, []int{12, 12, 4, 1}, []int{12, 0, 4, 1})
	if it.n != 24 || len(it.size) != 1 || it.size[0] != 24 {
		t.Errorf("contiguous: %+v, want one dimension of 24", it)
	}
	if r := it.reach(0); r != 24 {
		t.Errorf("reach = %d, want 24", r)
	}
	if !newDims("t", []int{6, 7}, []int{1, 6}, []int{0, 0}).injective(0) {
		t.Errorf("a transpose is injective")
	}
	if newDims("t", []int{6, 7}, []int{1, 1}, []int{0, 0}).injective(0) {
		t.Errorf("strides (1, 1) are not injective")
	}
}
