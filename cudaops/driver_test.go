package cudaops

import (
	"testing"

	"github.com/ebitengine/purego"
)

// TestResult32 checks that a status is read from the low 32 bits of the
// return register only: the calling convention leaves the high half of an
// int-returning function's register undefined.
func TestResult32(t *testing.T) {
	cases := []struct {
		r    uintptr
		want int
	}{
		{0, cudaSuccess},
		{cudaErrorNoDevice, cudaErrorNoDevice},
		{0xffffffff_00000000, cudaSuccess},
		{0xdeadbeef_00000002, cudaErrorOutOfMemory},
		{0x00000001_00000064, cudaErrorNoDevice},
		{0x00000000_ffffffff, -1},
	}
	for _, c := range cases {
		if got := result32(c.r); got != c.want {
			t.Errorf("result32(%#x) = %d, want %d", c.r, got, c.want)
		}
	}
}

// garbageHigh is a successful CUresult with the high half of the register
// set, as a C function returning a 32-bit enum may leave it.
const garbageHigh = 0xdeadbeef_00000000

// TestDriverResultHighBits runs check and errorOf against C-callable
// stand-ins for driver functions that succeed with garbage in the high half
// of the return register: check must see success, and errorOf must take
// the name and text cuGetErrorName and cuGetErrorString returned.
func TestDriverResultHighBits(t *testing.T) {
	name := []byte("CUDA_ERROR_OUT_OF_MEMORY\x00")
	desc := []byte("out of memory\x00")
	d := &driver{
		cuGetErrorName: purego.NewCallback(func(code uintptr, out **byte) uintptr {
			*out = &name[0]
			return garbageHigh
		}),
		cuGetErrorString: purego.NewCallback(func(code uintptr, out **byte) uintptr {
			*out = &desc[0]
			return garbageHigh
		}),
	}
	ok := purego.NewCallback(func() uintptr { return garbageHigh })
	if err := d.check("cuOK", ok); err != nil {
		t.Errorf("check of a call returning %#x: %v, want success", uintptr(garbageHigh), err)
	}
	fail := purego.NewCallback(func() uintptr { return garbageHigh | cudaErrorOutOfMemory })
	err := d.check("cuMemAlloc", fail)
	want := "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"
	if err == nil || err.Error() != want {
		t.Errorf("check of a call returning %#x: %v, want %q", uintptr(garbageHigh|cudaErrorOutOfMemory), err, want)
	}
	if !isCode(err, cudaErrorOutOfMemory) {
		t.Errorf("isCode(%v, CUDA_ERROR_OUT_OF_MEMORY) = false", err)
	}
}
