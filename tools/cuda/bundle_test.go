package cuda

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// maxReturned is how many files the GPU machines this bundle runs on bring
// back from the output folder.
const maxReturned = 8

// The archive run.sh leaves in its output folder, and the folder in it.
const (
	archiveName = "mixprec-cuda-logs.tar.gz"
	archiveDir  = "mixprec-cuda-logs/"
)

// testBinaries are the test binaries bundle.sh builds (tests/NAME.test).
var testBinaries = []string{"cudaops", "internal-testdev", "autograd", "amp", "nn", "optim", "examples-mnist", "distributed"}

// tarOf is a tar of files (name to contents, all mode 0755).
func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeTarXz writes an xz-compressed tar of files (name to contents, all
// mode 0755) to path, as bundle.sh packs its payload, with the xz command.
func writeTarXz(t *testing.T, path string, files map[string]string) {
	t.Helper()
	cmd := exec.Command("xz", "-c", "-0")
	cmd.Stdin = bytes.NewReader(tarOf(t, files))
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("xz: %v", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// readTar returns the regular files of the tar r, read from path.
func readTar(t *testing.T, path string, r io.Reader) map[string][]byte {
	t.Helper()
	tr := tar.NewReader(r)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, h.Name, err)
		}
		out[h.Name] = b
	}
}

// readTarGz returns the regular files of the gzipped tar at path.
func readTarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return readTar(t, path, zr)
}

// readTarXz returns the regular files of the xz-compressed tar at path,
// decompressed by the xz command.
func readTarXz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	b, err := exec.Command("xz", "-dc", path).Output()
	if err != nil {
		t.Fatalf("xz -dc %s: %v", path, err)
	}
	return readTar(t, path, bytes.NewReader(b))
}

func writeFile(t *testing.T, path, contents string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(contents), mode); err != nil {
		t.Fatal(err)
	}
}

// Stand-ins for the bundle's programs. mixprec reports the CUDA backend
// when FAKE_CUDA=1 (and the cuBLAS folders it was given), else why CUDA
// is unavailable, as the real `mixprec device` prints it. Every program
// records its run in $FAKE_TRACE.
const (
	fakeMixprec = `#!/bin/sh
echo "mixprec $*" >>"$FAKE_TRACE"
case "$1" in
device)
	if [ "$FAKE_CUDA" = 1 ]; then
		echo "backend: cuda (-device auto; linked: cpu, cuda)"
		echo "MIXPREC_CUBLAS=$MIXPREC_CUBLAS"
	else
		echo "backend: cpu (-device auto; linked: cpu, cuda)"
		echo "CUDA unavailable: no CUDA device: fake reason"
	fi ;;
bench) echo '{"n":64,"results":[{"dtype":"f16","gpu_tflops":1.5}]}' ;;
memcompare)
	if [ "$2" = -h ]; then echo "  -device string"; else echo "config      total peak   step ms"; echo "fp32        10.0 MiB     1.00"; echo "f16+ckpt     4.0 MiB     1.20"; fi ;;
esac
exit 0
`
	// fakeTrainer stands for bin/mnist and bin/cifar: its summary names
	// the device and the peak memory as the real ones do.
	fakeTrainer = `#!/bin/sh
echo "$(basename "$0") $*" >>"$FAKE_TRACE"
echo '{"schema":1,"device":"cuda:0","test_accuracy":0.97,"samples_per_sec":1000,"ms_per_step":2.5,"peak_bytes":{"total":1048576}}'
`
	// fakeGPT stands for bin/gpt: it fails unless -data names a folder
	// holding the corpus, as the real one does, and reports losses.
	fakeGPT = `#!/bin/sh
echo "gpt $*" >>"$FAKE_TRACE"
data="" prev=""
for a; do
	[ "$prev" = -data ] && data=$a
	prev=$a
done
[ -f "$data/austen/austen.txt" ] || { echo "gpt: no corpus in $data/austen"; exit 1; }
dev=cpu
case " $* " in *" -device cuda "*) dev=cuda:0 ;; esac
echo '{"schema":1,"model":"gpt","device":"'$dev'","train_loss":2.5,"val_loss":2.4,"tokens_per_sec":1000,"skipped_steps":0}'
`
	// fakeTest stands for every test binary; one named by $FAKE_SLOW
	// sleeps first, as a step that hangs does.
	fakeTest = `#!/bin/sh
echo "$(basename "$0") $*" >>"$FAKE_TRACE"
[ "$(basename "$0")" = "$FAKE_SLOW" ] && sleep 60
echo "MIXPREC_LIBNCCL=$MIXPREC_LIBNCCL MIXPREC_NCCL_H=$MIXPREC_NCCL_H NCCL_DEBUG=$NCCL_DEBUG MIXPREC_PYTHON=$MIXPREC_PYTHON"
echo "--- PASS: TestFake (0.00s)"
`
	// fakeSMI is nvidia-smi: it fails the first $FAKE_SMI_FAILS times it
	// is called (counted in $FAKE_SMI_COUNT), as a driver still loading
	// does, then answers.
	fakeSMI = `#!/bin/sh
n=$(cat "$FAKE_SMI_COUNT" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$FAKE_SMI_COUNT"
if [ "$n" -le "${FAKE_SMI_FAILS:-0}" ]; then
	echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
	exit 9
fi
case "$1" in
--query-gpu=*) echo "NVIDIA H200, 570.86.15, 143771 MiB" ;;
*) echo "NVIDIA-SMI 570.86.15    Driver Version: 570.86.15    CUDA Version: 12.8" ;;
esac
`
	// fakePython answers run.sh's question about its site-packages with
	// $FAKE_SITE and stands for torch_mm.py with a torch.mm JSON line; the
	// summary's script (on stdin) goes to a real Python, $FAKE_REAL_PYTHON,
	// when there is one.
	fakePython = `#!/bin/sh
case "$1" in
-c) echo "$FAKE_SITE" ;;
-) [ -n "$FAKE_REAL_PYTHON" ] && exec "$FAKE_REAL_PYTHON" "$@" ;;
*) echo '{"n":64,"results":[{"dtype":"f16","tflops":2.0}]}' ;;
esac
exit 0
`
)

// fakeBundle lays out a bundle as bundle.sh does, with the real run.sh and
// stand-in programs, and returns its folder.
func fakeBundle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundle")
	script, err := os.ReadFile("run-bundle.sh")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "run.sh"), string(script), 0o755)
	writeFile(t, filepath.Join(dir, "README"), "mixprec CUDA bundle (stand-ins for a test)\n", 0o644)
	writeFile(t, filepath.Join(dir, "torch_mm.py"), "", 0o644)
	writeFile(t, filepath.Join(dir, "src", "github.com", "mixprec", "mixprec", "testdata", "x"), "", 0o644)
	writeFile(t, filepath.Join(dir, "data", "mnist", "x"), "", 0o644)
	payload := map[string]string{"bin/mixprec": fakeMixprec, "bin/mnist": fakeTrainer, "bin/cifar": fakeTrainer,
		"bin/gpt": fakeGPT, "data/austen/austen.txt": "It is a truth universally acknowledged\n"}
	for _, n := range testBinaries {
		payload["tests/"+n+".test"] = fakeTest
	}
	writeTarXz(t, filepath.Join(dir, "payload.tar.xz"), payload)
	return dir
}

// runBundle runs sh BUNDLE/run.sh OUT with env added to a copy of this
// process's environment in which MIXPREC_* and FAKE_* are unset, and
// returns its combined output and exit status.
func runBundle(t *testing.T, bundle, out string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(bundle, "run.sh"), out)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MIXPREC_") && !strings.HasPrefix(kv, "FAKE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run.sh: %v\n%s", err, b)
		}
		code = ee.ExitCode()
	}
	return string(b), code
}

// checkOutDir checks that run.sh left exactly summary.txt and the log
// archive in out (the machine returns at most maxReturned files), that the
// archive holds the summary and the logs named in want and none named in
// absent, and that it printed the summary. It returns the archive's files.
func checkOutDir(t *testing.T, out, stdout string, want, absent []string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{archiveName, "summary.txt"}) {
		t.Errorf("output folder holds %q, want exactly %q and summary.txt", names, archiveName)
	}
	if len(names) > maxReturned {
		t.Errorf("output folder holds %d files; the GPU machine returns at most %d", len(names), maxReturned)
	}
	files := readTarGz(t, filepath.Join(out, archiveName))
	for _, n := range append([]string{"summary.txt"}, want...) {
		if _, ok := files[archiveDir+n]; !ok {
			t.Errorf("the archive lacks %s%s; it holds %d files", archiveDir, n, len(files))
		}
	}
	for _, n := range absent {
		if _, ok := files[archiveDir+n]; ok {
			t.Errorf("the archive holds %s%s, from a step that should not have run", archiveDir, n)
		}
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(summary, files[archiveDir+"summary.txt"]) {
		t.Errorf("summary.txt differs from the archive's copy")
	}
	if !strings.Contains(stdout, string(summary)) {
		t.Errorf("run.sh did not print summary.txt on stdout:\n%s\n--- summary.txt:\n%s", stdout, summary)
	}
	return files
}

// TestRunWithoutCUDA runs run.sh where `mixprec device` reports no CUDA:
// it must stop after that check with one line saying why, run none of the
// tests, exit 1, and still leave the summary and the archive of the logs
// it wrote, removing its temporary folders.
func TestRunWithoutCUDA(t *testing.T) {
	bundle := fakeBundle(t)
	out, tmp := filepath.Join(t.TempDir(), "out"), t.TempDir()
	trace := filepath.Join(t.TempDir(), "trace")
	stdout, code := runBundle(t, bundle, out, "FAKE_CUDA=0", "FAKE_TRACE="+trace, "TMPDIR="+tmp, "MIXPREC_BUNDLE_BUDGET=120", "MIXPREC_DRIVER_WAIT=2")
	if code != 1 {
		t.Errorf("run.sh without CUDA exited %d, want 1\n%s", code, stdout)
	}
	const line = "run.sh: stopping: CUDA did not open, so nothing after the CUDA check can run: no CUDA device: fake reason"
	if n := strings.Count(stdout, line+"\n"); n != 2 { // the line itself, and again in the printed summary
		t.Errorf("run.sh printed %q %d times, want once and once more in the summary\n%s", line, n, stdout)
	}
	checkOutDir(t, out, stdout, []string{"01-nvidia-smi.log", "02-device.log"}, []string{"03-cudaops-tests.log", "04-testdev-tests.log"})
	got, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "mixprec device\n" {
		t.Errorf("programs run: %q, want only mixprec device", got)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("run.sh left %d entries in TMPDIR (%s)", len(left), left[0].Name())
	}
}

// cudaEnv lays out what TestRunWithCUDA's machine has: a Python whose
// site-packages hold NVIDIA's cuBLAS and NCCL wheels (returned), an
// nvidia-smi, and the trace file; it returns the environment for
// runBundle.
func cudaEnv(t *testing.T, extra ...string) (env []string, trace, wheel, nccl, ncclH string) {
	t.Helper()
	trace = filepath.Join(t.TempDir(), "trace")
	site := filepath.Join(t.TempDir(), "lib", "python3.12", "site-packages")
	wheel = filepath.Join(site, "nvidia", "cu13", "lib")
	writeFile(t, filepath.Join(wheel, "libcublas.so.13"), "", 0o644)
	nccl = filepath.Join(site, "nvidia", "nccl", "lib", "libnccl.so.2")
	ncclH = filepath.Join(site, "nvidia", "nccl", "include", "nccl.h")
	writeFile(t, nccl, "", 0o644)
	writeFile(t, ncclH, "", 0o644)
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "python3"), fakePython, 0o755)
	writeFile(t, filepath.Join(bin, "nvidia-smi"), fakeSMI, 0o755)
	realPython, _ := exec.LookPath("python3")
	env = append([]string{"FAKE_CUDA=1", "FAKE_TRACE=" + trace, "FAKE_SITE=" + site, "FAKE_REAL_PYTHON=" + realPython,
		"FAKE_SMI_COUNT=" + filepath.Join(t.TempDir(), "smi"), "MIXPREC_PYTHON=" + filepath.Join(bin, "python3"),
		"PATH=" + bin + ":" + os.Getenv("PATH"), "MIXPREC_BUNDLE_BUDGET=120"}, extra...)
	return env, trace, wheel, nccl, ncclH
}

// runLogs are the logs of a run in which every step runs.
var runLogs = []string{"01-nvidia-smi.log", "02-device.log", "03-cudaops-tests.log", "04-testdev-tests.log",
	"05-autograd-tests.log", "05-amp-tests.log", "05-nn-tests.log", "05-optim-tests.log", "06-mnist-tests.log",
	"07-nccl-tests.log", "08-nccl-dp-tests.log", "09-mnist-cuda-f16.log", "10-mnist-cuda-bf16.log",
	"11-mnist-cnn-cuda-f16.log", "12-resnet20-cuda-f16.log", "13-gpt-cuda-fp32.log", "14-gpt-cuda-bf16.log",
	"15-gpt-cpu-fp32.log", "16-bench-matmul.log", "17-torch-mm.log", "18-memcompare-cuda.log",
	"19-budget-resnet20-cuda.log", "20-budget-gpt-cuda.log", "21-mnist-cpu-f16.log"}

// TestRunWithCUDA runs run.sh where CUDA opens: every step runs, the
// NCCL ones with NCCL_DEBUG=INFO and before the training runs and
// benchmarks, the logs come back in one archive, and the summary, printed
// too, holds the driver's version, a row (accuracy, speed, peak memory) for
// the MLP in F16 and BF16, the CNN and ResNet-20, the GEMM peaks and
// memcompare's rows. The cuBLAS folder and the NCCL library and header
// that the Python reports in its site-packages (NVIDIA's pip wheels'
// layout) reach the programs through MIXPREC_CUBLAS, MIXPREC_LIBNCCL and
// MIXPREC_NCCL_H, and the Python through MIXPREC_PYTHON.
func TestRunWithCUDA(t *testing.T) {
	bundle := fakeBundle(t)
	out, tmp := filepath.Join(t.TempDir(), "out"), t.TempDir()
	env, trace, wheel, nccl, ncclH := cudaEnv(t, "TMPDIR="+tmp)
	stdout, code := runBundle(t, bundle, out, env...)
	if code != 0 {
		t.Errorf("run.sh with CUDA exited %d, want 0\n%s", code, stdout)
	}
	files := checkOutDir(t, out, stdout, runLogs, nil)
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("run.sh left %d entries in TMPDIR (%s)", len(left), left[0].Name())
	}
	if !strings.Contains(string(files[archiveDir+"02-device.log"]), wheel) {
		t.Errorf("02-device.log does not show %s in MIXPREC_CUBLAS:\n%s", wheel, files[archiveDir+"02-device.log"])
	}
	for _, log := range []string{"07-nccl-tests.log", "08-nccl-dp-tests.log"} {
		if want := "MIXPREC_LIBNCCL=" + nccl + " MIXPREC_NCCL_H=" + ncclH + " NCCL_DEBUG=INFO"; !strings.Contains(string(files[archiveDir+log]), want) {
			t.Errorf("%s does not show %q:\n%s", log, want, files[archiveDir+log])
		}
	}
	if log := files[archiveDir+"03-cudaops-tests.log"]; !strings.Contains(string(log), "NCCL_DEBUG= ") || !strings.Contains(string(log), "MIXPREC_PYTHON=") {
		t.Errorf("03-cudaops-tests.log: NCCL_DEBUG is set outside the NCCL steps, or MIXPREC_PYTHON is not passed:\n%s", log)
	}
	got, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(testBinaries, "mnist -device cuda -model cnn", "cifar -device cuda -synthetic", "mnist -device cuda -amp bf16",
		"gpt -device cuda", "gpt -device cpu") {
		if !strings.Contains(string(got), n) {
			t.Errorf("%s did not run; programs run:\n%s", n, got)
		}
	}
	if nc, tr := strings.Index(string(got), "distributed.test"), strings.Index(string(got), "mnist -device cuda"); nc < 0 || tr < 0 || nc > tr {
		t.Errorf("the NCCL steps did not run before the training runs:\n%s", got)
	}
	summary := string(files[archiveDir+"summary.txt"])
	for _, want := range []string{"NCCL from the Python environments: " + nccl, "07-nccl-tests", "08-nccl-dp-tests",
		"gpu, driver, memory: NVIDIA H200, 570.86.15, 143771 MiB", "f16+ckpt     4.0 MiB"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Log("no python3 here: the summary's rows and ratios are not checked")
		return
	}
	for _, want := range []string{"F16 at least 60% of torch.mm: PASS (75%)", "test accuracy cuda 0.9700, cpu 0.9700",
		"MLP bf16             cuda:0 test accuracy 0.9700      1000 samples/s    2.50 ms/step  peak 1.0 MiB",
		"CNN f16", "ResNet-20 f16", "measured peaks",
		"GPT bf16 cuda  train loss 2.5  val loss 2.4      1000 tokens/s  skipped 0", "GPT fp32 train loss cuda - cpu: 0"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
}

// TestRunWaitsForDriver runs run.sh where nvidia-smi fails once, as on a
// machine whose driver is still loading: the run waits and goes on. Where
// it never answers, the run gives up after MIXPREC_DRIVER_WAIT and the
// CUDA check says why.
func TestRunWaitsForDriver(t *testing.T) {
	bundle := fakeBundle(t)
	out := filepath.Join(t.TempDir(), "out")
	env, _, _, _, _ := cudaEnv(t, "TMPDIR="+t.TempDir(), "FAKE_SMI_FAILS=1", "MIXPREC_DRIVER_WAIT=30")
	stdout, code := runBundle(t, bundle, out, env...)
	files := checkOutDir(t, out, stdout, runLogs, nil)
	if log := string(files[archiveDir+"01-nvidia-smi.log"]); code != 0 || !strings.Contains(log, "the driver answered after 2 tries") {
		t.Errorf("exit %d; 01-nvidia-smi.log:\n%s", code, log)
	}
	out = filepath.Join(t.TempDir(), "out")
	env, _, _, _, _ = cudaEnv(t, "TMPDIR="+t.TempDir(), "FAKE_SMI_FAILS=1000", "MIXPREC_DRIVER_WAIT=1", "FAKE_CUDA=0")
	stdout, code = runBundle(t, bundle, out, env...)
	files = checkOutDir(t, out, stdout, []string{"01-nvidia-smi.log", "02-device.log"}, []string{"03-cudaops-tests.log"})
	if log := string(files[archiveDir+"01-nvidia-smi.log"]); code != 1 || !strings.Contains(log, "nvidia-smi did not answer in 1s") {
		t.Errorf("exit %d; 01-nvidia-smi.log:\n%s", code, log)
	}
}

// TestRunKilledKeepsLogs kills run.sh and everything it started with
// SIGKILL while a step hangs: the summary of the steps done and their logs
// are in the output folder all the same.
func TestRunKilledKeepsLogs(t *testing.T) {
	bundle := fakeBundle(t)
	out := filepath.Join(t.TempDir(), "out")
	env, _, _, _, _ := cudaEnv(t, "TMPDIR="+t.TempDir(), "FAKE_SLOW=examples-mnist.test")
	cmd := exec.Command("sh", filepath.Join(bundle, "run.sh"), out)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MIXPREC_") && !strings.HasPrefix(kv, "FAKE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	hung := filepath.Join(out, "mixprec-cuda-logs", "06-mnist-tests.log")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(hung); err == nil {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			t.Fatal("the run did not reach its sixth step in a minute")
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the run and its step: nothing runs its traps
	cmd.Wait()
	summary, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil || !strings.Contains(string(summary), "05-optim-tests") || !strings.Contains(string(summary), "02-device") {
		t.Errorf("summary.txt after the kill: %v\n%s", err, summary)
	}
	for _, n := range runLogs[:9] {
		if _, err := os.Stat(filepath.Join(out, "mixprec-cuda-logs", n)); err != nil {
			t.Errorf("%s is not in the output folder after the kill: %v", n, err)
		}
	}
}

// TestBundle builds a real bundle with bundle.sh, checks that it holds
// what run.sh runs and nothing more, that its size was counted with the
// working tree that travels with it, that its README says what the
// binaries link against (they are not static: purego needs glibc's
// loader), and that the PyTorch interop test finds its script in it (and
// passes, where a python3 has torch and numpy); and, where CUDA does not
// open, runs it: run.sh must stop after the CUDA check and leave its
// archive.
//
// Building the bundle compiles eight test binaries and three programs
// afresh, minutes on two cores with a cold build cache, so it runs only
// under MIXPREC_LONG=1 (make test-cuda-kit, which CI runs when tools/cuda,
// the Makefile or go.mod change). make test keeps the rest of the kit
// covered: TestRunWithoutCUDA, TestRunWithCUDA, TestRunWaitsForDriver and
// TestRunKilledKeepsLogs run run.sh itself on a fake bundle, and cudaops'
// TestBuildWithoutCgo builds without cgo.
func TestBundle(t *testing.T) {
	long := os.Getenv("MIXPREC_LONG") != ""
	if testing.Short() || !long {
		t.Skip("builds the bundle's test binaries and programs; set MIXPREC_LONG=1 (make test-cuda-kit)")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("the bundle is built for linux/amd64")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	bundle := buildBundle(t)
	readme, err := os.ReadFile(filepath.Join(bundle, "README"))
	if err != nil {
		t.Fatal(err)
	}
	payload := readTarXz(t, filepath.Join(bundle, "payload.tar.xz"))
	checkPayloadRuns(t, payload)
	checkInterop(t, bundle, payload)
	for _, n := range []string{"bin/mixprec", "bin/mnist", "tests/cudaops.test"} {
		checkLinkage(t, n, payload[n], readme)
	}
	if !regexp.MustCompile(`dynamically linked against glibc`).Match(readme) {
		t.Errorf("the bundle's README does not say the binaries are dynamically linked against glibc:\n%s", readme)
	}

	// Running it needs a machine where CUDA does not open (with a GPU the
	// run takes minutes, and make test-cuda covers it).
	out := filepath.Join(t.TempDir(), "out")
	stdout, code := runBundle(t, bundle, out, "TMPDIR="+t.TempDir(), "MIXPREC_BUNDLE_BUDGET=120", "MIXPREC_DRIVER_WAIT=2")
	if strings.Contains(stdout, "backend: cuda") {
		t.Skip("CUDA opens here; run.sh was left to make test-cuda and the GPU machine")
	}
	if code != 1 || !strings.Contains(stdout, "run.sh: stopping: CUDA did not open, so nothing after the CUDA check can run: ") {
		t.Errorf("run.sh on a machine without CUDA: exit %d; want 1 and the line saying it stops\n%s", code, stdout)
	}
	checkOutDir(t, out, stdout, []string{"02-device.log"}, []string{"03-cudaops-tests.log"})
}

// buildBundle runs bundle.sh from the repository's root into a temporary
// directory, which it returns, and checks that it counted the working
// tree that travels with the bundle.
func buildBundle(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "data", "mnist", "train-images-idx3-ubyte.gz")); err != nil {
		// Asked for by name, a missing prerequisite fails rather than skips.
		t.Fatal("no data/mnist, which bundle.sh copies (make data fetches it into ./data)")
	}
	bundle := filepath.Join(t.TempDir(), "bundle")
	cmd := exec.Command("sh", "tools/cuda/bundle.sh", bundle)
	cmd.Dir = root
	built, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bundle.sh: %v\n%s", err, built)
	}
	if !regexp.MustCompile(`with the working tree that travels with it, \d+ MiB of 60`).Match(built) {
		t.Errorf("bundle.sh did not count the working tree with the bundle:\n%s", built)
	}
	return bundle
}

// checkPayloadRuns checks that the payload holds what run.sh runs and
// nothing else: the packages of its loop each have a step of their own.
func checkPayloadRuns(t *testing.T, payload map[string][]byte) {
	t.Helper()
	script, err := os.ReadFile("run-bundle.sh")
	if err != nil {
		t.Fatal(err)
	}
	loop := regexp.MustCompile(`for p in ([a-z ]+); do`).FindSubmatch(script)
	for n := range payload {
		var runs bool
		switch dir, base := filepath.Dir(n), filepath.Base(n); dir {
		case "bin":
			runs = strings.Contains(string(script), `"$B/`+base+`"`)
		case "tests":
			name := strings.TrimSuffix(base, ".test")
			runs = strings.Contains(string(script), `"$T/`+base+`"`) || (loop != nil && slices.Contains(strings.Fields(string(loop[1])), name))
		case "data/austen":
			runs = strings.Contains(string(script), `"$B/gpt" -device cuda -data "$D"`)
		}
		if !runs {
			t.Errorf("the payload holds %s, which run.sh does not run", n)
		}
	}
	for _, n := range []string{"bin/mixprec", "bin/mnist", "bin/cifar", "bin/gpt", "data/austen/austen.txt", "tests/cudaops.test", "tests/nn.test"} {
		if _, ok := payload[n]; !ok {
			t.Errorf("the payload lacks %s", n)
		}
	}
}

// checkInterop checks that the PyTorch interop test finds its script in
// the bundle, and runs it from there where python3 has torch and numpy.
func checkInterop(t *testing.T, bundle string, payload map[string][]byte) {
	t.Helper()
	torchScript := filepath.Join(bundle, "src", "github.com", "mixprec", "mixprec", "tools", "reference", "torch_safetensors.py")
	if _, err := os.Stat(torchScript); err != nil {
		t.Errorf("the PyTorch interop test's script is not where the test looks from the bundle: %v", err)
	}
	py, err := exec.LookPath("python3")
	if err != nil || exec.Command(py, "-c", "import torch, numpy").Run() != nil {
		t.Log("no python3 with torch and numpy here: the interop test is not run from the bundle")
		return
	}
	nnTest := filepath.Join(t.TempDir(), "nn.test")
	if err := os.WriteFile(nnTest, payload["tests/nn.test"], 0o755); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(nnTest, "-test.run", "^TestWeightsIntoTorch$", "-test.v")
	run.Dir = filepath.Join(bundle, "src")
	out, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestWeightsIntoTorch") {
		t.Errorf("the PyTorch interop test from the bundle: %v\n%s", err, out)
	}
}

// checkLinkage checks that the binary n (bin) is dynamically linked
// against libraries the bundle's README names, with no symbol versions, so
// that any glibc runs it, as the README says.
func checkLinkage(t *testing.T, n string, bin, readme []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("payload %s: %v", n, err)
	}
	defer f.Close()
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("payload %s: %v", n, err)
	}
	if interp == "" {
		t.Errorf("payload %s has no program interpreter: it is static, and the README says otherwise", n)
	}
	for _, s := range append(libs, interp) {
		if !strings.Contains(string(readme), s) {
			t.Errorf("payload %s needs %s, which the bundle's README does not name:\n%s", n, s, readme)
		}
	}
	syms, _ := f.ImportedSymbols()
	for _, s := range syms {
		if s.Version != "" {
			t.Errorf("payload %s imports %s@%s; the README says any glibc will do", n, s.Name, s.Version)
			break
		}
	}
}
