// Package testdev gives tests every device this machine has: the CPU
// backend always, and the CUDA backend when a GPU opens. A test written as
//
//	testdev.Each(t, func(t *testing.T, dev device.Device) { ... })
//
// runs once per device, as subtests named after the devices ("cpu",
// "cuda:0"), so the same assertions hold the CPU and the GPU to the same
// results. Without a GPU, the CUDA subtest is absent and the reason is
// logged once per process, unless MIXPREC_REQUIRE_CUDA=1 (make test-cuda,
// the GPU bundle's run.sh): then every test that calls Each fails, saying
// why CUDA did not open, so that a run meant for the GPU cannot pass on the
// CPU alone.
package testdev

import (
	"os"
	"sync"
	"testing"

	"github.com/mixprec/mixprec/device"

	// Both backends are linked in here, so every test binary using this
	// package finds them through device.Open.
	_ "github.com/mixprec/mixprec/cudaops"
	_ "github.com/mixprec/mixprec/device/cpu"
)

var (
	once    sync.Once
	devices []device.Device
	cudaErr error
	logged  sync.Once
)

func probe() {
	once.Do(func() {
		// The CPU backend is the registry's, like the CUDA one, so that
		// every test in a process shares one device per backend.
		c, err := device.Open("cpu")
		if err != nil {
			panic(err) // linked in above: a build mistake
		}
		devices = append(devices, c)
		d, err := device.Open("cuda")
		if err != nil {
			cudaErr = err
			return
		}
		devices = append(devices, d)
	})
}

// Devices returns the CPU device and, when a GPU opens, the CUDA device.
func Devices() []device.Device {
	probe()
	return append([]device.Device(nil), devices...)
}

// CUDAError is why the CUDA backend did not open, or nil when it did.
func CUDAError() error {
	probe()
	return cudaErr
}

// RequireCUDA reports whether the environment demands the CUDA device:
// MIXPREC_REQUIRE_CUDA=1.
func RequireCUDA() bool { return os.Getenv("MIXPREC_REQUIRE_CUDA") == "1" }

// Each runs fn as a subtest for every device of Devices, named after the
// device. When CUDA is unavailable it says why, once per test binary, or,
// under RequireCUDA, fails t with that reason before running anything.
func Each(t *testing.T, fn func(t *testing.T, dev device.Device)) {
	t.Helper()
	probe()
	if cudaErr != nil {
		if RequireCUDA() {
			t.Fatalf("testdev: MIXPREC_REQUIRE_CUDA=1 but CUDA did not open: %v", cudaErr)
		}
		logged.Do(func() { t.Logf("testdev: CUDA skipped: %v", cudaErr) })
	}
	for _, d := range devices {
		t.Run(d.Name(), func(t *testing.T) { fn(t, d) })
	}
}
