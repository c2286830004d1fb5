// Command mixprec holds mixprec's tools:
//
//	mixprec device          which backend and GPU are available, or why CUDA is not
//	mixprec bench matmul    GEMM timing on the CPU and the GPU in F32, F16 and BF16
//	mixprec memcompare      one model under FP32, AMP and checkpointing: peak memory
//	                        per category, step time and loss, as a table and a PNG
//	mixprec plot            -metrics files drawn into a PNG: loss, test accuracy, loss
//	                        scale and memory against the step, runs overlaid
//	mixprec fetch austen    Jane Austen's novels from Debian's archive into the data
//	                        directory (the GPT's corpus)
//	mixprec fetch mnist     MNIST through the Go module proxy into the data directory,
//	                        SHA-256 checked (a corrupt cached file is fetched again)
//
// Exit status: 0 on success and for -h, 1 when a command fails, 2 for a bad
// command line.
package main

import (
	"fmt"
	"io"
	"os"

	_ "github.com/mixprec/mixprec/device/cpu" // the CPU backend
	"github.com/mixprec/mixprec/internal/cli"
)

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"device", "show the backend chosen and the GPU's properties, or why CUDA is unavailable", cmdDevice},
	{"bench", "bench matmul: time GEMM on the CPU and GPU in f32, f16 and bf16", cmdBench},
	{"memcompare", "train one model under FP32, AMP and checkpointing and compare peak memory and step time", cmdMemcompare},
	{"plot", "draw -metrics files (loss, accuracy, loss scale, memory), several runs overlaid, into a PNG", cmdPlot},
	{"fetch", "fetch a data set (austen: the GPT's corpus; mnist) into the data directory", cmdFetch},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: mixprec <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun mixprec <command> -h for a command's flags.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a command and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return cli.ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return cli.ExitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return cli.Exit(stderr, "mixprec "+c.name, cli.Catch(func() error { return c.run(args[1:], stdout, stderr) }))
		}
	}
	return cli.Exit(stderr, "mixprec", cli.Usagef("unknown command %q (want device, bench, memcompare, plot or fetch; mixprec -h lists them)", args[0]))
}
