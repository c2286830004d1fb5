// Command mixprec holds mixprec's tools:
//
//	mixprec device          which backend and GPU are available, or why CUDA is not
//	mixprec bench matmul    GEMM timing on the CPU and the GPU in F32, F16 and BF16
//	mixprec memcompare      one model under FP32, AMP and checkpointing: peak memory
//	                        per category, step time and loss, as a table and a PNG
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	_ "github.com/mixprec/mixprec/device/cpu" // the CPU backend
)

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"device", "show the backend chosen and the GPU's properties, or why CUDA is unavailable", cmdDevice},
	{"bench", "bench matmul: time GEMM on the CPU and GPU in f32, f16 and bf16", cmdBench},
	{"memcompare", "train one model under FP32, AMP and checkpointing and compare peak memory and step time", cmdMemcompare},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: mixprec <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun mixprec <command> -h for a command's flags.")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "help" || os.Args[1] == "--help" {
		usage(os.Stderr)
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(os.Args[2:], os.Stdout, os.Stderr); err != nil {
				if !errors.Is(err, flag.ErrHelp) {
					fmt.Fprintf(os.Stderr, "mixprec %s: %v\n", c.name, err)
				}
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "mixprec: unknown command %q\n\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}
