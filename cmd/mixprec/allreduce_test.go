package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestAllReduceFlags checks bench allreduce's refusals: one line and exit
// 2 for a command line that cannot work, before any MPI is started.
func TestAllReduceFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "allreduce", "-dist", "none"}, "needs mpi or nccl"},
		{[]string{"bench", "allreduce", "-dist", "nccl", "-device", "cpu"}, "-dist nccl needs -device cuda"},
		{[]string{"bench", "allreduce", "-max-mib", "0"}, "-max-mib"},
		{[]string{"bench", "allreduce", "-device", "tpu"}, "-device"},
	} {
		r := clitest.Run(t, nil, c.args...)
		if r.Code != 2 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.Code, r.Stderr, c.want)
		}
		if p := clitest.OneLine(r.Stderr); p != "" {
			t.Errorf("%v: stderr has %s: %q", c.args, p, r.Stderr)
		}
	}
}

// TestAllReduceUnderMpirun runs the command on 2 ranks of CPU buffers and
// reads rank 0's JSON: one row per size, each with a positive time and
// bandwidth, and nothing printed by rank 1.
func TestAllReduceUnderMpirun(t *testing.T) {
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (Debian's openmpi-bin; make test installs it): bench allreduce not tested")
	}
	args := []string{"--oversubscribe", "-np", "2"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(args, "-x", "MIXPREC_CLITEST_MAIN=1", os.Args[0], "bench", "allreduce", "-max-mib", "4", "-reps", "3", "-json")
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	var rep struct {
		Ranks   int    `json:"ranks"`
		Engine  string `json:"engine"`
		Results []allreduceRow
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("not one JSON object from rank 0 alone: %v\n%s", err, out)
	}
	if rep.Ranks != 2 || rep.Engine != "mpi" || len(rep.Results) != 3 {
		t.Fatalf("got %+v, want 2 ranks over mpi and sizes 1, 2, 4 MiB", rep)
	}
	for i, r := range rep.Results {
		if r.MiB != 1<<i || !(r.Ms > 0) || !(r.AlgGBs > 0) || r.BusGBs != r.AlgGBs { // 2(n-1)/n = 1 for n = 2
			t.Errorf("row %d: %+v", i, r)
		}
	}
}
