package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/mixprec/mixprec/cudaops"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/internal/cli"
)

// deviceReport is what `mixprec device -json` prints.
type deviceReport struct {
	Backend         string   `json:"backend"`
	Linked          []string `json:"linked"`
	CUDAUnavailable string   `json:"cuda_unavailable,omitempty"`
	GPU             *gpuInfo `json:"gpu,omitempty"`
}

type gpuInfo struct {
	Name            string `json:"name"`
	Compute         string `json:"compute_capability"`
	Multiprocessors int    `json:"multiprocessors"`
	MemoryBytes     int64  `json:"memory_bytes"`
	Driver          string `json:"driver_cuda_version"`
	DriverPath      string `json:"driver_path"`
	CUBLAS          string `json:"cublas_version"`
	CUBLASPath      string `json:"cublas_path"`
	Warning         string `json:"warning,omitempty"` // no cuBLAS: GEMMs on mixprec's own kernel`
	PTX             string `json:"ptx"`
	TF32            bool   `json:"tf32"`
	ZeroOnFree      bool   `json:"zero_on_free"`
}

// cmdDevice reports the backend -device auto chooses and, for CUDA, the
// GPU and the libraries behind it, or why CUDA is unavailable.
func cmdDevice(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("mixprec device", "Shows the backend -device auto chooses and, for CUDA, the GPU and the libraries\n"+
		"behind it, or why CUDA is unavailable.")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return err
	}
	dev, note, err := cli.OpenDevice("auto")
	if err != nil {
		return err
	}
	r := deviceReport{Backend: dev.Name(), Linked: device.Backends()}
	if note != "" {
		r.CUDAUnavailable = strings.TrimPrefix(note, "device cuda: ")
	}
	if d, ok := dev.(*cudaops.Device); ok {
		i := d.Info()
		r.GPU = &gpuInfo{
			Name: i.Name, Compute: fmt.Sprintf("%d.%d", i.Major, i.Minor), Multiprocessors: i.Multiprocessors,
			MemoryBytes: i.TotalMemory, Driver: i.Driver(), DriverPath: i.DriverPath,
			CUBLAS: i.CUBLASVersion, CUBLASPath: i.CUBLASPath, Warning: i.Warning, PTX: i.PTX,
			TF32: i.Options.TF32, ZeroOnFree: i.Options.ZeroOnFree,
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(r)
	}
	fmt.Fprintf(stdout, "backend: %s (-device auto; linked: %s)\n", r.Backend, strings.Join(r.Linked, ", "))
	if g := r.GPU; g != nil {
		fmt.Fprintf(stdout, "gpu: %s\n", g.Name)
		fmt.Fprintf(stdout, "compute capability: %s (%d multiprocessors)\n", g.Compute, g.Multiprocessors)
		fmt.Fprintf(stdout, "memory: %s\n", device.FormatBytes(g.MemoryBytes))
		fmt.Fprintf(stdout, "driver: CUDA %s (%s)\n", g.Driver, g.DriverPath)
		if g.CUBLASPath != "" {
			fmt.Fprintf(stdout, "cublas: %s (%s)\n", g.CUBLAS, g.CUBLASPath)
		} else {
			fmt.Fprintf(stdout, "cublas: none: %s\n", g.Warning)
		}
		fmt.Fprintf(stdout, "kernels: %s PTX, compiled by the driver for this GPU\n", g.PTX)
		fmt.Fprintf(stdout, "tf32 for f32 gemm: %v (MIXPREC_CUDA_TF32); zero on free: %v (MIXPREC_CUDA_ZERO_ON_FREE)\n", g.TF32, g.ZeroOnFree)
	}
	if r.CUDAUnavailable != "" {
		fmt.Fprintf(stdout, "CUDA unavailable: %s\n", r.CUDAUnavailable)
	}
	return nil
}
