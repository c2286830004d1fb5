package testdev

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

func TestDevices(t *testing.T) {
	ds := Devices()
	if len(ds) == 0 || ds[0].Name() != "cpu" {
		t.Fatalf("Devices() = %v, want the CPU first", ds)
	}
	if (CUDAError() == nil) != (len(ds) == 2) {
		t.Errorf("Devices() has %d devices but CUDAError() = %v", len(ds), CUDAError())
	}
}

func TestEach(t *testing.T) {
	var names []string
	Each(t, func(t *testing.T, dev device.Device) {
		names = append(names, dev.Name())
		b := dev.Alloc(dtype.F16, 3, device.Temp)
		defer dev.Free(b)
		dev.Fill(b, 1.5)
		got := make([]float32, 3)
		dev.CopyToHost(got, b)
		if got[2] != 1.5 {
			t.Errorf("Fill then CopyToHost: %v", got)
		}
	})
	if len(names) != len(Devices()) {
		t.Errorf("Each ran on %v, want every device", names)
	}
}

// TestRequireCUDA runs this package's TestEach in a child process, with
// and without MIXPREC_REQUIRE_CUDA=1, on a machine where CUDA does not
// open: with it the child must fail, saying why in one line; without it,
// pass.
func TestRequireCUDA(t *testing.T) {
	if CUDAError() == nil {
		t.Skip("CUDA opens here, so MIXPREC_REQUIRE_CUDA=1 has nothing to fail on")
	}
	child := func(require bool) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestEach$", "-test.count", "1")
		env := []string{}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "MIXPREC_REQUIRE_CUDA=") {
				env = append(env, kv)
			}
		}
		if require {
			env = append(env, "MIXPREC_REQUIRE_CUDA=1")
		}
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := child(true)
	const line = "testdev: MIXPREC_REQUIRE_CUDA=1 but CUDA did not open: "
	if err == nil {
		t.Errorf("TestEach with MIXPREC_REQUIRE_CUDA=1 and no CUDA passed; want a failure\n%s", out)
	} else if !strings.Contains(out, line+CUDAError().Error()) {
		t.Errorf("TestEach with MIXPREC_REQUIRE_CUDA=1 and no CUDA: %v; want a line %q followed by the reason\n%s", err, line, out)
	}
	if out, err := child(false); err != nil {
		t.Errorf("TestEach without MIXPREC_REQUIRE_CUDA: %v; want it to pass on the CPU\n%s", err, out)
	}
}
