package mpi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/mpi"
	"github.com/mixprec/mixprec/mpi/mpitest"
)

func TestCollectivesUnderMpirun(t *testing.T) {
	mpitest.Pass(t, 3, "TestChildCollectives")
}

// TestChildCollectives is one rank of TestCollectivesUnderMpirun.
func TestChildCollectives(t *testing.T) {
	c := mpitest.Comm(t, time.Minute)
	if c.Size() != 3 {
		t.Fatalf("size %d, want 3", c.Size())
	}
	devicetest.RunComm(t, c, cpu.New())
}

// TestStalledRankUnderMpirun stalls the last of three ranks: the others'
// barrier times out, and their errors name the stalled rank, not
// themselves (they used to say only that another rank had stalled).
func TestStalledRankUnderMpirun(t *testing.T) {
	start := time.Now()
	out, _ := mpitest.Run(t, 3, "TestChildStalled")
	if !strings.Contains(out, "barrier (collective 1) did not complete within 2s: rank 2 did not reach it and did not answer for 2s: stalled or died") {
		t.Fatalf("a stalled rank did not make the others' barrier fail with an error naming it:\n%s", out)
	}
	for _, wrong := range []string{"rank 0 did not", "rank 1 did not", "ranks 0", "ranks 1"} {
		if strings.Contains(out, wrong) {
			t.Errorf("a rank that took part is named as stalled (%q):\n%s", wrong, out)
		}
	}
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the job took %v to end", d)
	}
}

// TestChildStalled is one rank of TestStalledRankUnderMpirun: the last
// rank stops taking part, the others' barrier times out and one of them
// aborts the job.
func TestChildStalled(t *testing.T) {
	c := mpitest.Comm(t, 2*time.Second)
	if c.Rank() == c.Size()-1 {
		time.Sleep(30 * time.Second) // stalled; the abort ends this process
		return
	}
	err := c.Barrier()
	if err == nil {
		t.Fatal("barrier with a stalled rank succeeded")
	}
	fmt.Println(err)
	time.Sleep(time.Second) // the other rank that timed out prints too
	c.Abort(err)
}

// TestErrorsReturn makes MPI fail (a broadcast from a root whose sizes do
// not match) and requires a Go error in one line with MPI's words, not
// Open MPI's abort dump or a crash: the communicator returns errors.
func TestErrorsReturnUnderMpirun(t *testing.T) {
	out, _ := mpitest.Run(t, 2, "TestChildTruncate")
	if !strings.Contains(out, "mpi: rank 1: broadcast failed: MPI_ERR_TRUNCATE") || strings.Contains(out, "MPI_ERRORS_ARE_FATAL") ||
		strings.Contains(out, "goroutine ") || strings.Contains(out, "SIGSEGV") {
		t.Fatalf("a truncated message did not come back as one error line:\n%s", out)
	}
}

// TestChildTruncate is one rank of TestErrorsReturnUnderMpirun: rank 0
// broadcasts more than rank 1 has room for.
func TestChildTruncate(t *testing.T) {
	c := mpitest.Comm(t, 20*time.Second)
	dev := cpu.New()
	n := 8
	if c.Rank() == 1 {
		n = 4
	}
	b := dev.Alloc(dtype.F32, n, device.Temp)
	err := c.Broadcast(b, 0)
	if c.Rank() == 1 {
		fmt.Println(err)
		if err == nil {
			t.Fatal("a truncated broadcast succeeded")
		}
	} else {
		time.Sleep(time.Second) // rank 1 prints before the job ends
	}
	c.Abort(fmt.Errorf("done"))
}

func TestMissingLibrary(t *testing.T) {
	t.Setenv("MIXPREC_LIBMPI", "/nonexistent/libmpi.so.40")
	if _, err := mpi.Open(); err == nil || !strings.Contains(err.Error(), "cannot load /nonexistent/libmpi.so.40") {
		t.Errorf("Open without the library: %v, want an error naming it", err)
	}
}
