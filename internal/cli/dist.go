package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/mixprec/mixprec/cudaops"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/mpi"
)

// DistFlags select data-parallel training across processes.
type DistFlags struct {
	Engine  string        // "none", "mpi" or "nccl"
	Timeout time.Duration // a collective that takes longer means a rank is gone
}

// Register defines -dist and -dist-timeout on fs.
func (d *DistFlags) Register(fs *flag.FlagSet) {
	d.Engine = "none"
	fs.Var(NewChoice(&d.Engine, "none", "mpi", "nccl"), "dist", "data-parallel training, one process per rank started with mpirun -np N:\n"+
		"mpi reduces gradients through host memory (CPUs, or GPUs without NCCL);\n"+
		"nccl reduces them on the GPUs (needs -device cuda and libnccl.so.2; each\n"+
		"rank of a machine takes its own GPU). -batch is per rank; rank 0 prints")
	d.Timeout = 5 * time.Minute // before Var, which takes the default it shows in help from the value
	fs.Var(&durationValue{&d.Timeout}, "dist-timeout", "end every rank with an error when a collective takes longer (a rank stalled or died)")
}

// localRankVars are where launchers put a process's rank among those on
// its machine: Open MPI's mpirun, torchrun, MPICH and Slurm.
var localRankVars = []string{"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}

// BindDevice gives each rank of a machine its own GPU under -dist nccl, as
// torch.cuda.set_device(local_rank) does: unless $MIXPREC_CUDA_DEVICE is
// set already, it sets it to the rank among the processes of this machine
// that the launcher reports (see localRankVars), which is the device
// -device cuda then opens. Call it before opening the device. Other engines
// leave the environment alone.
func (d *DistFlags) BindDevice() error {
	if d.Engine != "nccl" {
		return nil
	}
	return bindDevice(os.Getenv, os.Setenv)
}

func bindDevice(getenv func(string) string, setenv func(k, v string) error) error {
	if getenv("MIXPREC_CUDA_DEVICE") != "" {
		return nil
	}
	for _, k := range localRankVars {
		s := getenv(k)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("-dist nccl: $%s=%q is not a local rank", k, s)
		}
		return setenv("MIXPREC_CUDA_DEVICE", strconv.Itoa(n))
	}
	return nil
}

// Open starts what -dist asks for on dev, the device the model lives on,
// and returns the communicator (nil without -dist, so that callers test for
// data parallelism with comm != nil) and the function that closes it, never
// nil. Under -dist nccl, dev must be the CUDA backend; the ranks start
// through MPI (mpirun), or, outside mpirun, from $RANK, $WORLD_SIZE and
// $NCCL_COMM_ID as torchrun sets them (cudaops.OpenNCCLFromEnv).
func (d *DistFlags) Open(dev device.Device) (comm device.Comm, closeFn func() error, err error) {
	none := func() error { return nil }
	switch d.Engine {
	case "", "none":
		return nil, none, nil
	case "mpi":
		c, err := mpi.Open(mpi.Timeout(d.Timeout))
		if err != nil {
			return nil, none, err
		}
		if c.Size() == 1 && !underLauncher() {
			// Started by hand: one process would train alone, silently.
			c.Close()
			return nil, none, Usagef("-dist mpi: MPI found a world of one process: this program was not started by mpirun; start the ranks with mpirun -np N, or leave out -dist")
		}
		return c, c.Close, nil
	case "nccl":
		cd, ok := dev.(*cudaops.Device)
		if !ok {
			return nil, none, Usagef("-dist nccl needs -device cuda (the device is %s); use -dist mpi on the CPU", dev.Name())
		}
		if os.Getenv("OMPI_COMM_WORLD_SIZE") == "" && os.Getenv("WORLD_SIZE") != "" {
			c, err := cudaops.OpenNCCLFromEnv(cd, cudaops.NCCLTimeout(d.Timeout))
			if err != nil {
				return nil, none, err
			}
			return c, c.Close, nil
		}
		boot, err := mpi.Open(mpi.Timeout(d.Timeout))
		if err != nil {
			return nil, none, fmt.Errorf("-dist nccl starts its ranks through MPI: %w", err)
		}
		c, err := cudaops.BootstrapNCCL(cd, boot, cudaops.NCCLTimeout(d.Timeout))
		if err != nil {
			return nil, none, errors.Join(err, boot.Close())
		}
		return c, func() error { return errors.Join(c.Close(), boot.Close()) }, nil
	}
	return nil, none, fmt.Errorf("-dist %q: want none, mpi or nccl", d.Engine)
}

// underLauncher reports whether an MPI launcher started this process:
// Open MPI's mpirun, MPICH's or Slurm's say so in the environment.
func underLauncher() bool {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

type durationValue struct{ p *time.Duration }

func (v *durationValue) String() string {
	if v == nil || v.p == nil {
		return "5m0s"
	}
	return v.p.String()
}

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 90s or 5m")
	}
	*v.p = d
	return nil
}

// Arg names the flag's value in help.
func (*durationValue) Arg() string { return "duration" }
