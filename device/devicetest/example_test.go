package devicetest_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/dtype"
)

// A backend's test file runs the whole suite with one call (see TestCPU in
// this package's cpu_test.go). A GPU backend skips, with a clear message,
// where no GPU is present.
func ExampleRun() {
	testCUDA := func(t *testing.T) {
		dev, err := device.Open("cuda")
		if err != nil {
			t.Skip("no CUDA device:", err)
		}
		devicetest.Run(t, func() device.Device { return dev })
	}
	_ = testCUDA // in cudaops: func TestConformance(t *testing.T) { ... }
}

// A backend is brought up a group of kernels at a time: its test runs the
// memory checks and those of each group it has (see stub in stub_test.go,
// a backend with memory and Gemm alone, and TestStub).
func ExampleRunLinAlg() {
	testStub := func(t *testing.T) {
		s := newStub()
		devicetest.RunMemory(t, s)
		devicetest.RunLinAlg(t, s)
	}
	_ = testStub // in the backend's package: func TestLinAlg(t *testing.T) { ... }
}

// The suite's comparison rule, for tests that check a kernel themselves:
// the reference is computed in float64 on the values the device stores
// (0.1 is stored as 0.0999755859375 in F16) and judged with the tolerance of
// the destination dtype.
func Example() {
	dev := cpu.New()
	x, y := dev.Alloc(dtype.F16, 3, device.Temp), dev.Alloc(dtype.F16, 3, device.Temp)
	defer dev.Free(x)
	defer dev.Free(y)
	in := []float32{-1, 0.1, 2}
	dev.CopyFromHost(x, in)
	dev.Unary(device.Exp, y, x, 0)
	got := make([]float32, 3)
	dev.CopyToHost(got, y)
	for i, v := range in {
		want := math.Exp(float64(dtype.Round(dtype.F16, v)))
		fmt.Printf("exp(%v) = %v, want %.6f: close %v\n", v, got[i], want, dtype.Close(dtype.F16, float64(got[i]), want, 0))
	}
	fmt.Println(dtype.Close(dtype.F16, 7.5, math.Exp(2), 0)) // 1.5% off: outside F16's 1e-3 + 1e-2*|want|
	for _, dt := range dtype.All {
		atol, rtol := dtype.Tolerance(dt)
		fmt.Printf("%-4v atol %g rtol %g\n", dt, atol, rtol)
	}
	// Output:
	// exp(-1) = 0.36791992, want 0.367879: close true
	// exp(0.1) = 1.1054688, want 1.105144: close true
	// exp(2) = 7.390625, want 7.389056: close true
	// false
	// f32  atol 1e-05 rtol 0.0001
	// f16  atol 0.001 rtol 0.01
	// bf16 atol 0.001 rtol 0.02
}
