package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
)

type allreduceRow struct {
	MiB     int     `json:"mib"`
	Ms      float64 `json:"ms"`
	AlgGBs  float64 `json:"alg_gb_per_s"` // bytes / time
	BusGBs  float64 `json:"bus_gb_per_s"` // alg * 2(n-1)/n: what each link carried, comparable across rank counts
	Samples int     `json:"reps"`
}

// cmdAllReduce runs `mixprec bench allreduce` under mpirun: in-place F32
// all-reduces of 1 to 64 MiB of device buffers through the communicator
// -dist opens (MPI, or NCCL on GPUs), timed on every rank, reported by
// rank 0 as the mean of the ranks' medians.
func cmdAllReduce(args []string, stdout, stderr io.Writer) error {
	const about = "Times in-place F32 all-reduces of 1 to 64 MiB across the ranks of an MPI job\n" +
		"(mpirun -np N mixprec bench allreduce [-dist nccl -device cuda]) and reports GB/s,\n" +
		"algorithm and bus bandwidth."
	fs := cli.NewFlagSet("mixprec bench allreduce", about)
	var reps, maxMiB int
	cli.IntVar(fs, &reps, "reps", 10, 1, 0, "timed all-reduces per size, after one warm-up")
	cli.IntVar(fs, &maxMiB, "max-mib", 64, 1, 1024, "largest buffer in MiB (sizes double from 1)")
	asJSON := fs.Bool("json", false, "print the results as one JSON object")
	var dist cli.DistFlags
	dist.Register(fs)
	dist.Engine = "mpi" // the default here: this command is about the engine
	devName := "cpu"
	fs.Var(cli.NewChoice(&devName, "auto", "cpu", "cuda"), "device", "where the buffers live: cpu (MPI through host memory), cuda (NCCL on the GPUs, or MPI through the host)")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	if dist.Engine == "none" {
		return cli.Usagef("-dist none: bench allreduce needs mpi or nccl")
	}
	if err := dist.BindDevice(); err != nil {
		return err
	}
	dev, _, err := cli.OpenDevice(devName)
	if err != nil {
		return err
	}
	comm, closeDist, err := dist.Open(dev)
	if err != nil {
		return err
	}
	defer closeDist()
	n := comm.Size()
	var rows []allreduceRow
	for mib := 1; mib <= maxMiB; mib *= 2 {
		buf := dev.Alloc(dtype.F32, mib<<20/4, device.Temp)
		dev.Fill(buf, 1)
		if err := comm.AllReduce(buf, device.Sum); err != nil { // warm-up
			return err
		}
		times := make([]float64, reps)
		for i := range times {
			if err := comm.Barrier(); err != nil {
				return err
			}
			start := time.Now()
			if err := comm.AllReduce(buf, device.Sum); err != nil {
				return err
			}
			times[i] = time.Since(start).Seconds()
		}
		dev.Free(buf)
		med := []float32{float32(median(times))}
		if err := distributed.AllReduceHost(comm, dev, med, device.Sum); err != nil { // the mean of the ranks' medians
			return err
		}
		sec := float64(med[0]) / float64(n)
		alg := float64(mib<<20) / sec / 1e9
		rows = append(rows, allreduceRow{MiB: mib, Ms: 1000 * sec, AlgGBs: alg, BusGBs: alg * 2 * float64(n-1) / float64(n), Samples: reps})
	}
	if comm.Rank() != 0 {
		return nil
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"ranks": n, "engine": dist.Engine, "device": dev.Name(), "results": rows})
	}
	fmt.Fprintf(stdout, "all-reduce, F32 in place, %d ranks, %s on %s (median of %d)\n%8s %10s %10s %10s\n", n, dist.Engine, dev.Name(), reps, "MiB", "ms", "alg GB/s", "bus GB/s")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%8d %10.2f %10.2f %10.2f\n", r.MiB, r.Ms, r.AlgGBs, r.BusGBs)
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
