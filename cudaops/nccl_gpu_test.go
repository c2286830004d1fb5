package cudaops

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/mpi"
	"github.com/mixprec/mixprec/mpi/mpitest"
)

// The tests in this file run NCCL on real GPUs: one rank on one GPU, and,
// where the machine has several GPUs, one process per GPU started by the
// test itself (from an ID or NCCL_COMM_ID, as torchrun starts them) or by
// mpirun (the ID sent over MPI, as -dist nccl does). Without a GPU or
// without libnccl they skip with one line; MIXPREC_REQUIRE_CUDA=1 makes a
// missing GPU a failure, MIXPREC_REQUIRE_NCCL=1 a missing NCCL.

// openNCCLGPU returns the process's CUDA device once NCCL has loaded, or
// skips the test saying which is missing.
func openNCCLGPU(t *testing.T) *Device {
	t.Helper()
	d := openGPU(t).(*Device)
	l, err := loadNCCL()
	if err != nil {
		if os.Getenv("MIXPREC_REQUIRE_NCCL") == "1" {
			t.Fatalf("MIXPREC_REQUIRE_NCCL=1 but %v", err)
		}
		t.Skipf("NCCL not tested: %v", err)
	}
	t.Logf("NCCL %s from %s on %s", ncclVersionString(l.version), l.path, d.Info().Name)
	return d
}

// gpuCount is the number of CUDA devices, or skips the test with fewer
// than want.
func gpuCount(t *testing.T, want int) int {
	t.Helper()
	drv, err := loadDriver()
	if err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	n, err := drv.deviceCount()
	if err != nil || n < want {
		t.Skipf("needs %d GPUs, the driver reports %d (%v): NCCL between processes not tested", want, n, err)
	}
	return n
}

// TestNCCLOnGPU runs a communicator of one rank on this GPU: every binding
// is called for real, in every dtype.
func TestNCCLOnGPU(t *testing.T) {
	d := openNCCLGPU(t)
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenNCCL(d, id, 0, 1, NCCLTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	devicetest.RunComm(t, c, c.Device())
	one := d.Alloc(dtype.F32, 1, device.Temp)
	if err := c.Broadcast(one, 1); err == nil {
		t.Errorf("broadcast from rank 1 of 1 succeeded")
	}
	d.Free(one)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// startRanks runs this test binary's test named run as n processes, rank
// r on GPU r, with env added, and returns each one's output once all have
// ended.
func startRanks(t *testing.T, n int, run string, env ...string) ([]string, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for r := range n {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^"+run+"$", "-test.v")
		cmd.Env = append(os.Environ(), "MIXPREC_NCCL_CHILD=1", "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n),
			"MIXPREC_CUDA_DEVICE="+strconv.Itoa(r))
		cmd.Env = append(cmd.Env, env...)
		cmd.Stdout, cmd.Stderr = &outs[r], &outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
	}
	logs := make([]string, n)
	errs := make([]error, n)
	for r, cmd := range cmds {
		errs[r] = cmd.Wait()
		logs[r] = outs[r].String()
	}
	return logs, errs
}

// freePort is a TCP port on the loopback interface that was free a moment
// ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func ncclChild(t *testing.T) *Device {
	t.Helper()
	if os.Getenv("MIXPREC_NCCL_CHILD") != "1" {
		t.Skip("runs as one rank of an NCCL job, started by its parent test")
	}
	return openGPU(t).(*Device)
}

// TestNCCLRanks runs the collectives across every GPU of the machine (up to
// 8), one process each, joined by an ID this process makes and passes in
// $MIXPREC_NCCL_ID.
func TestNCCLRanks(t *testing.T) {
	openNCCLGPU(t)
	n := min(gpuCount(t, 2), 8)
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	logs, errs := startRanks(t, n, "TestChildNCCLRanks", "MIXPREC_NCCL_ID="+id.String())
	for r := range n {
		if errs[r] != nil || !strings.Contains(logs[r], "--- PASS: TestChildNCCLRanks") {
			t.Errorf("rank %d of %d: %v\n%s", r, n, errs[r], logs[r])
		}
	}
	for _, line := range strings.Split(logs[0], "\n") {
		if strings.Contains(line, "all-reduce of") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// logBandwidth times in-place F32 all-reduces of 1 to 64 MiB as a
// collective returns them (finished on the GPU, polled for), and rank 0
// logs the median of 5 after a warm-up: the algorithm bandwidth
// (bytes/time) and the bus bandwidth (times 2(n-1)/n, what each link
// carried, comparable across rank counts, as nccl-tests reports it).
func logBandwidth(t *testing.T, c *NCCL) {
	dev, n := c.Device(), c.Size()
	for mib := 1; mib <= 64; mib *= 2 {
		b := dev.Alloc(dtype.F32, mib<<18, device.Temp)
		dev.Fill(b, 1)
		if err := c.AllReduce(b, device.Sum); err != nil {
			t.Fatal(err)
		}
		times := make([]float64, 5)
		for i := range times {
			if err := c.Barrier(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := c.AllReduce(b, device.Sum); err != nil {
				t.Fatal(err)
			}
			times[i] = time.Since(start).Seconds()
		}
		dev.Free(b)
		slices.Sort(times)
		med := times[len(times)/2]
		alg := float64(mib<<20) / med / 1e9
		if c.Rank() == 0 {
			t.Logf("all-reduce of %2d MiB on %d GPUs: %.3f ms, %.1f GB/s algorithm, %.1f GB/s bus", mib, n, 1e3*med, alg, alg*2*float64(n-1)/float64(n))
		}
	}
}

// TestChildNCCLRanks is one rank of TestNCCLRanks.
func TestChildNCCLRanks(t *testing.T) {
	d := ncclChild(t)
	c, err := OpenNCCLFromEnv(d, NCCLTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	devicetest.RunComm(t, c, c.Device())
	logBandwidth(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestNCCLStalledRank starts two ranks from NCCL_COMM_ID; rank 1 stops
// taking part, and rank 0's barrier must end, after its timeout, with an
// error naming it, instead of hanging.
func TestNCCLStalledRank(t *testing.T) {
	openNCCLGPU(t)
	gpuCount(t, 2)
	start := time.Now()
	logs, _ := startRanks(t, 2, "TestChildNCCLStalled", fmt.Sprintf("NCCL_COMM_ID=127.0.0.1:%d", freePort(t)), "NCCL_SOCKET_IFNAME=lo")
	const want = "nccl: rank 0 of 2: barrier did not complete within 3s: another rank has stalled or died"
	if !strings.Contains(logs[0], want) {
		t.Errorf("rank 0 did not report the stalled rank (%q):\n%s\n--- rank 1:\n%s", want, logs[0], logs[1])
	}
	if d := time.Since(start); d > 90*time.Second {
		t.Errorf("the job took %v to end", d)
	}
}

// TestChildNCCLStalled is one rank of TestNCCLStalledRank.
func TestChildNCCLStalled(t *testing.T) {
	d := ncclChild(t)
	c, err := OpenNCCLFromEnv(d, NCCLTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil { // both ranks are there
		t.Fatal(err)
	}
	if c.Rank() == 1 {
		time.Sleep(15 * time.Second) // stalled
		return
	}
	err = c.Barrier()
	t.Log(err)
	if err == nil {
		t.Fatal("a barrier without rank 1 succeeded")
	}
	if err2 := c.Close(); err2 != err {
		t.Errorf("Close after the timeout: %v, want %v", err2, err)
	}
}

// TestNCCLUnderMpirun starts one rank per GPU (up to 4) with mpirun: the ID
// travels over MPI (BootstrapNCCL), as under -dist nccl.
func TestNCCLUnderMpirun(t *testing.T) {
	openNCCLGPU(t)
	n := min(gpuCount(t, 2), 4)
	mpitest.Pass(t, n, "TestChildNCCLMPI")
}

// TestChildNCCLMPI is one rank of TestNCCLUnderMpirun, on the GPU of its
// local rank.
func TestChildNCCLMPI(t *testing.T) {
	mpitest.Child(t)
	local, _ := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
	d, err := Open(local, OptionsFromEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	boot, err := mpi.Open(mpi.Timeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer boot.Close()
	c, err := BootstrapNCCL(d, boot, NCCLTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if c.Rank() != boot.Rank() || c.Size() != boot.Size() {
		t.Errorf("NCCL rank %d of %d, MPI rank %d of %d", c.Rank(), c.Size(), boot.Rank(), boot.Size())
	}
	devicetest.RunComm(t, c, c.Device())
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
