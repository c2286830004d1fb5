package cli

import (
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/device/cpu"
)

func TestDistFlags(t *testing.T) {
	for _, c := range []struct {
		args    []string
		engine  string
		timeout time.Duration
		bad     bool
	}{
		{nil, "none", 5 * time.Minute, false},
		{[]string{"-dist", "mpi"}, "mpi", 5 * time.Minute, false},
		{[]string{"-dist", "nccl", "-dist-timeout", "90s"}, "nccl", 90 * time.Second, false},
		{[]string{"-dist", "gloo"}, "", 0, true},
		{[]string{"-dist-timeout", "0s"}, "", 0, true},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var d DistFlags
		d.Register(fs)
		err := fs.Parse(c.args)
		if c.bad {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", c.args, d)
			}
			continue
		}
		if err != nil || d.Engine != c.engine || d.Timeout != c.timeout {
			t.Errorf("%q: %+v, %v; want engine %s, timeout %v", c.args, d, err, c.engine, c.timeout)
		}
	}
}

// TestDistOpen checks the openers that need neither MPI running nor a GPU:
// none gives no communicator, nccl on the CPU is a usage error said before
// anything starts, and a missing libmpi is an error naming it.
func TestDistOpen(t *testing.T) {
	dev := cpu.New()
	comm, closeFn, err := (&DistFlags{Engine: "none"}).Open(dev)
	if comm != nil || closeFn == nil || err != nil || closeFn() != nil {
		t.Errorf("-dist none: %v, %v; want no communicator, a no-op close, no error", comm, err)
	}
	comm, closeFn, err = (&DistFlags{Engine: "nccl", Timeout: time.Second}).Open(dev)
	var usage *UsageError
	if comm != nil || closeFn == nil || !errors.As(err, &usage) || !strings.Contains(err.Error(), "-dist nccl needs -device cuda (the device is cpu)") {
		t.Errorf("-dist nccl on the CPU: %v, %v; want a usage error saying it needs -device cuda", comm, err)
	}
	t.Setenv("MIXPREC_LIBMPI", "/nonexistent/libmpi.so.40")
	comm, closeFn, err = (&DistFlags{Engine: "mpi", Timeout: time.Second}).Open(dev)
	if comm != nil || closeFn == nil || err == nil || !strings.Contains(err.Error(), "cannot load /nonexistent/libmpi.so.40") {
		t.Errorf("-dist mpi without libmpi: %v, %v; want an error naming the library", comm, err)
	}
}

// TestBindDevice checks which GPU -dist nccl gives each rank: its local
// rank as the launcher reports it, unless MIXPREC_CUDA_DEVICE says.
func TestBindDevice(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string // MIXPREC_CUDA_DEVICE afterwards
		bad  bool
	}{
		{map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "1", "LOCAL_RANK": "3"}, "1", false},
		{map[string]string{"LOCAL_RANK": "3"}, "3", false},
		{map[string]string{"SLURM_LOCALID": "2"}, "2", false},
		{map[string]string{"MIXPREC_CUDA_DEVICE": "5", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, "5", false},
		{map[string]string{}, "", false},
		{map[string]string{"LOCAL_RANK": "x"}, "", true},
	} {
		env := map[string]string{}
		for k, v := range c.env {
			env[k] = v
		}
		err := bindDevice(func(k string) string { return env[k] }, func(k, v string) error { env[k] = v; return nil })
		if (err != nil) != c.bad || env["MIXPREC_CUDA_DEVICE"] != c.want {
			t.Errorf("%v: MIXPREC_CUDA_DEVICE=%q, %v; want %q (error %v)", c.env, env["MIXPREC_CUDA_DEVICE"], err, c.want, c.bad)
		}
	}
	t.Setenv("MIXPREC_CUDA_DEVICE", "")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
	if err := (&DistFlags{Engine: "mpi"}).BindDevice(); err != nil {
		t.Fatal(err)
	}
	if v := os.Getenv("MIXPREC_CUDA_DEVICE"); v != "" {
		t.Errorf("-dist mpi set MIXPREC_CUDA_DEVICE=%s; only nccl binds devices", v)
	}
}
