package cudaops

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/dtype"
)

// openGPU returns the process's CUDA device, or skips the test (fails it
// under MIXPREC_REQUIRE_CUDA=1) as devicetest.Open does.
func openGPU(t *testing.T) device.Device {
	t.Helper()
	return devicetest.Open(t, "cuda")
}

// TestConformance runs the device contract's conformance suite on the GPU.
func TestConformance(t *testing.T) {
	d := openGPU(t)
	devicetest.Run(t, func() device.Device { return d })
}

// TestAgainstCPU compares every kernel on the GPU with the CPU backend.
func TestAgainstCPU(t *testing.T) {
	compareWithCPU(t, openGPU(t))
}

// TestAgainstCPUWithoutCublas compares with the CPU backend on the GPU
// with its GEMMs on mp_gemm, mixprec's own kernel, as a machine without
// cuBLAS has them.
func TestAgainstCPUWithoutCublas(t *testing.T) {
	d := openGPU(t).(*Device) // the device every test here shares: restored after
	d.ownGemm = true
	defer func() { d.ownGemm = d.info.CUBLASPath == "" }()
	compareWithCPU(t, d)
}

// TestDeterministic runs a few kernels whose GPU implementations reduce in
// parallel (and cuBLAS) twice on the same inputs: the results must agree
// bit for bit.
func TestDeterministic(t *testing.T) {
	deterministic(t, openGPU(t))
}

func deterministic(t *testing.T, d device.Device) {
	run := func() [][]float32 {
		var out [][]float32
		get := func(b device.Buffer) {
			v := make([]float32, b.Len())
			d.CopyToHost(v, b)
			out = append(out, v)
		}
		x := d.Alloc(dtype.F16, 256*512, device.Temp)
		defer d.Free(x)
		h := make([]float32, x.Len())
		for i := range h {
			h[i] = float32((i*7919)%1000)/500 - 1
		}
		d.CopyFromHost(x, h)
		r := d.Alloc(dtype.F32, 512, device.Temp)
		defer d.Free(r)
		d.Reduce(r, x, device.Strides{Shape: []int{256, 512}, A: []int{0, 1}}, 1)
		get(r)
		c := d.Alloc(dtype.F32, 256*256, device.Temp)
		defer d.Free(c)
		d.Gemm(c, x, x, device.GemmParams{M: 256, N: 256, K: 512, Alpha: 1, TransB: true})
		get(c)
		ls := d.Alloc(dtype.F32, 256*512, device.Temp)
		defer d.Free(ls)
		d.LogSoftmax(ls, x, 256, 512)
		get(ls)
		mean, vr := d.Alloc(dtype.F32, 8, device.Temp), d.Alloc(dtype.F32, 8, device.Temp)
		defer d.Free(mean)
		defer d.Free(vr)
		d.Moments(mean, vr, x, 32, 8, 512)
		get(mean)
		get(vr)
		return out
	}
	a, b := run(), run()
	for k := range a {
		for i := range a[k] {
			if a[k][i] != b[k][i] && !(a[k][i] != a[k][i] && b[k][i] != b[k][i]) {
				t.Fatalf("output %d differs between two runs at %d: %v, then %v", k, i, a[k][i], b[k][i])
			}
		}
	}
}

// TestInfo checks what Open reports about the GPU.
func TestInfo(t *testing.T) {
	d := openGPU(t).(*Device)
	i := d.Info()
	t.Logf("%s: %s, compute %d.%d, %d SMs, %s, driver %s (%s), cuBLAS %s (%s), %s",
		d.Name(), i.Name, i.Major, i.Minor, i.Multiprocessors, device.FormatBytes(i.TotalMemory),
		i.Driver(), i.DriverPath, i.CUBLASVersion, i.CUBLASPath, i.PTX)
	if i.Name == "" || i.Major < 5 || i.TotalMemory <= 0 || i.CUBLASVersion == "" || i.DriverVersion < 11000 {
		t.Errorf("implausible device info %+v", i)
	}
}

// TestOpenWithoutGPU checks that a machine without a usable GPU gets an
// error value saying so, not a crash.
func TestOpenWithoutGPU(t *testing.T) {
	_, err := device.Open("cuda")
	if err == nil {
		t.Skip("a GPU is present")
	}
	if !strings.Contains(err.Error(), "no CUDA") {
		t.Errorf(`device.Open("cuda") without a GPU: %v; want an error mentioning "no CUDA"`, err)
	}
	if _, err := Open(0, Options{}); err == nil || !strings.Contains(err.Error(), "no CUDA") {
		t.Errorf("Open without a GPU: %v; want an error mentioning \"no CUDA\"", err)
	}
	if d, err := device.Select("auto"); err != nil || d.Name() != "cpu" {
		t.Errorf(`device.Select("auto") without a GPU: %v, %v; want the CPU`, d, err)
	}
}

// TestNoDriver checks the error when the driver library cannot be loaded.
func TestNoDriver(t *testing.T) {
	_, err := openDriver("libmixprec-no-such-driver.so.1")
	if err == nil || !strings.HasPrefix(err.Error(), "no CUDA driver") {
		t.Errorf("openDriver of a missing library: %v; want an error starting \"no CUDA driver\"", err)
	}
}

// TestBuildWithoutCgo builds the whole module with CGO_ENABLED=0: the
// backend must not need a C toolchain.
func TestBuildWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the module")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command (a test binary copied to another machine)")
	}
	if _, err := os.Stat("../go.mod"); err != nil {
		t.Skip("not run from the module's source tree")
	}
	cmd := exec.Command(goBin, "build", "-o", os.DevNull, "./...")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./...: %v\n%s", err, out)
	}
}

// TestCublasLoads loads the newest cuBLAS on this machine, when it has
// one, without a GPU: its symbols and version resolve.
func TestCublasLoads(t *testing.T) {
	for _, v := range cublasVersions {
		for _, dir := range candidateDirs() {
			path := filepath.Join(dir, "libcublas.so."+strconv.Itoa(v))
			if dir == "" {
				path = "libcublas.so." + strconv.Itoa(v)
			} else if _, err := os.Stat(path); err != nil {
				continue
			}
			l, err := openCublas(path)
			if err != nil {
				continue
			}
			if l.major != v {
				t.Errorf("%s reports version %s", l.path, l.version())
			}
			t.Logf("cuBLAS %s at %s", l.version(), l.path)
			return
		}
	}
	t.Skip("no libcublas on this machine")
}
