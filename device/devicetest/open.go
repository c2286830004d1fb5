package devicetest

import (
	"os"
	"testing"

	"github.com/mixprec/mixprec/device"
)

// Open returns the device the registry opens for name ("cuda"), shared by
// the process's tests, or skips t with one line saying why there is none.
// With MIXPREC_REQUIRE_CUDA=1 (make test-cuda, the GPU bundle's run.sh) a
// CUDA device that does not open fails t instead, so that a run meant for
// the GPU cannot pass without one.
func Open(t testing.TB, name string) device.Device {
	t.Helper()
	d, err := device.Open(name)
	if err != nil {
		if name == "cuda" && os.Getenv("MIXPREC_REQUIRE_CUDA") == "1" {
			t.Fatalf("MIXPREC_REQUIRE_CUDA=1 but no GPU: %v", err)
		}
		t.Skipf("no %s device: %v", name, err)
	}
	return d
}
