package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/mixprec/mixprec/cudaops"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
)

// matmulResult is one dtype's figures; a zero rate means not measured.
type matmulResult struct {
	DType      string  `json:"dtype"`
	CPUTFLOPS  float64 `json:"cpu_tflops"`
	GPUTFLOPS  float64 `json:"gpu_tflops"`
	Speedup    float64 `json:"speedup"`
	CPUSeconds float64 `json:"cpu_seconds_per_gemm"`
	GPUSeconds float64 `json:"gpu_seconds_per_gemm"`
}

type matmulReport struct {
	N              int            `json:"n"`
	CPUN           int            `json:"cpu_n"`
	Reps           int            `json:"reps"`
	CPUReps        int            `json:"cpu_reps"`
	GPU            string         `json:"gpu,omitempty"`
	GPUUnavailable string         `json:"gpu_unavailable,omitempty"`
	Results        []matmulResult `json:"results"`
}

// cmdBench runs `mixprec bench matmul`: square GEMMs (C = A*B, every
// operand of one dtype, as torch.mm) through the device interface on the
// CPU backend and on the GPU, reporting TFLOP/s (2n^3 per GEMM) and the
// ratio. The CPU runs a smaller size by default, since n=4096 takes minutes
// there; rates of different sizes compare fairly once both are large
// enough to keep the machine busy.
func cmdBench(args []string, stdout, stderr io.Writer) error {
	const about = "Times square GEMMs (C = A*B, every operand in one dtype) on the CPU and the GPU\n" +
		"and reports TFLOP/s (2n^3 per GEMM) and the ratio."
	if len(args) > 0 && args[0] == "allreduce" {
		return cmdAllReduce(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "matmul" {
		switch {
		case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
			fmt.Fprintf(stdout, "usage: mixprec bench matmul [flags]\n\n%s\n\nmixprec bench matmul -h lists the flags.\n", about)
			return flag.ErrHelp
		case len(args) == 0:
			return cli.Usagef("want a benchmark: mixprec bench matmul or allreduce")
		}
		return cli.Usagef("unknown benchmark %q: want matmul or allreduce", args[0])
	}
	fs := cli.NewFlagSet("mixprec bench matmul", about)
	var n, reps, cpuN, cpuReps int
	cli.IntVar(fs, &n, "n", 4096, 1, maxN, "matrix size on the GPU")
	dts := []dtype.DType{dtype.F32, dtype.F16, dtype.BF16}
	fs.Var((*dtypeList)(&dts), "dtypes", "comma-separated dtypes")
	cli.IntVar(fs, &reps, "reps", 20, 1, 0, "timed GEMMs per dtype on the GPU, after 3 warm-up ones")
	cli.IntVar(fs, &cpuN, "cpu-n", 2048, 1, maxN, "matrix size on the CPU (-gpu-only skips the CPU)")
	cli.IntVar(fs, &cpuReps, "cpu-reps", 3, 1, 0, "timed GEMMs per dtype on the CPU, after one warm-up")
	gpuOnly := fs.Bool("gpu-only", false, "skip the CPU; an error when no GPU opens")
	asJSON := fs.Bool("json", false, "print the results as one JSON object")
	if err := cli.Parse(fs, args[1:], stdout); err != nil {
		return err
	}
	if *gpuOnly {
		cpuN = 0
	}

	rep := matmulReport{N: n, CPUN: cpuN, Reps: reps, CPUReps: cpuReps}
	cpuDev, err := device.Open("cpu")
	if err != nil {
		return err
	}
	var gpuDev *cudaops.Device
	if d, err := device.Open("cuda"); err != nil {
		rep.GPUUnavailable = strings.TrimPrefix(err.Error(), "device cuda: ")
	} else {
		gpuDev = d.(*cudaops.Device)
		rep.GPU = gpuDev.Info().Name
	}
	if *gpuOnly && gpuDev == nil {
		// A table of dashes would look like a result.
		return fmt.Errorf("-gpu-only: no GPU to time: %s", rep.GPUUnavailable)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "matmul: C = A*B, square, every operand in the dtype; TFLOP/s = 2n^3 / time\n")
		if cpuN > 0 {
			fmt.Fprintf(stdout, "cpu: n=%d, %d GEMMs per dtype\n", cpuN, cpuReps)
		}
		if gpuDev != nil {
			fmt.Fprintf(stdout, "gpu: %s, n=%d, %d GEMMs per dtype (CUDA events)\n", rep.GPU, n, reps)
		} else {
			fmt.Fprintf(stdout, "gpu: unavailable: %s\n", rep.GPUUnavailable)
		}
	}
	for _, dt := range dts {
		r := matmulResult{DType: dt.String()}
		if cpuN > 0 {
			sec, err := timeGemm(cpuDev, dt, cpuN, cpuReps, 1, cpuWarm, func(fn func()) (time.Duration, error) {
				start := time.Now()
				fn()
				return time.Since(start), cpuDev.Sync()
			})
			if err != nil {
				return err
			}
			r.CPUSeconds, r.CPUTFLOPS = sec, flops(cpuN)/sec/1e12
		}
		if gpuDev != nil {
			sec, err := timeGemm(gpuDev, dt, n, reps, 3, 0, gpuDev.Time)
			if err != nil {
				return err
			}
			r.GPUSeconds, r.GPUTFLOPS = sec, flops(n)/sec/1e12
		}
		if r.CPUTFLOPS > 0 && r.GPUTFLOPS > 0 {
			r.Speedup = r.GPUTFLOPS / r.CPUTFLOPS
		}
		rep.Results = append(rep.Results, r)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(rep)
	}
	fmt.Fprintf(stdout, "%-6s %12s %12s %10s\n", "dtype", "CPU TFLOP/s", "GPU TFLOP/s", "GPU/CPU")
	for _, r := range rep.Results {
		fmt.Fprintf(stdout, "%-6s %12s %12s %10s\n", r.DType, tflops(r.CPUTFLOPS), tflops(r.GPUTFLOPS), speedup(r.Speedup))
	}
	return nil
}

func flops(n int) float64 { return 2 * float64(n) * float64(n) * float64(n) }

func tflops(v float64) string {
	if v == 0 {
		return "-"
	}
	if v < 0.1 {
		return fmt.Sprintf("%.4f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func speedup(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fx", v)
}

// timeGemm returns the seconds one n x n GEMM in dt takes on dev: warm
// untimed GEMMs (and more until minWarm has passed), then reps timed by
// clock (which runs its argument and measures it).
func timeGemm(dev device.Device, dt dtype.DType, n, reps, warm int, minWarm time.Duration, clock func(func()) (time.Duration, error)) (float64, error) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(dt)))
	host := make([]float32, n*n)
	bufs := make([]device.Buffer, 3)
	for i := range bufs {
		bufs[i] = dev.Alloc(dt, n*n, device.Temp)
		defer dev.Free(bufs[i])
		for j := range host {
			host[j] = float32(rng.Float64()*2 - 1)
		}
		dev.CopyFromHost(bufs[i], host)
	}
	p := device.GemmParams{M: n, N: n, K: n, Alpha: 1}
	for start := time.Now(); warm > 0 || time.Since(start) < minWarm; warm-- {
		dev.Gemm(bufs[2], bufs[0], bufs[1], p)
	}
	if err := dev.Sync(); err != nil {
		return 0, err
	}
	d, err := clock(func() {
		for range reps {
			dev.Gemm(bufs[2], bufs[0], bufs[1], p)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %v GEMM: %w", dev.Name(), dt, err)
	}
	return d.Seconds() / float64(reps), nil
}

// cpuWarm is the least time the CPU GEMMs of a dtype are warmed up for.
// On a virtual machine a core that sat idle (while the program started)
// runs slow for a while once work reaches it: on this project's 2-vCPU
// machine the first dtype of a run read 40-60% low after one warm-up
// GEMM, 10-25% low after 0.3 s of them, and steady (f32 341-358 GFLOP/s
// at n=1024, as later dtypes) after 1 s. Time, rather than a count,
// covers large and small matrices alike.
const cpuWarm = time.Second

// maxN bounds the matrix sizes: three n x n F32 operands of 32768 take
// 12 GiB, more than a benchmark should ask of a machine.
const maxN = 32768

// dtypeList is the -dtypes flag: dtypes parsed once, when the flag is.
type dtypeList []dtype.DType

func (l *dtypeList) String() string {
	if l == nil {
		return ""
	}
	var s []string
	for _, dt := range *l {
		s = append(s, dt.String())
	}
	return strings.Join(s, ",")
}

func (l *dtypeList) Set(s string) error {
	var dts []dtype.DType
	for _, name := range strings.Split(s, ",") {
		dt, err := dtype.Parse(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("%q: want a comma-separated list of f32, f16 and bf16", name)
		}
		dts = append(dts, dt)
	}
	*l = dts
	return nil
}

// Arg names the flag's value in help.
func (*dtypeList) Arg() string { return "f32,f16,bf16" }
