package cli_test

import (
	"fmt"
	"math"
	"os"

	"github.com/mixprec/mixprec/internal/cli"
)

// A program's typed flags are parsed once, when the command line is; a bad
// value is a one-line usage error and exit status 2.
func Example() {
	fs := cli.NewFlagSet("prog", "Does one thing.")
	ckpt := cli.CheckpointOff
	fs.Var(&ckpt, "checkpoint", "gradient checkpointing")
	err := cli.Parse(fs, []string{"-checkpoint", "auto"}, os.Stdout)
	fmt.Println(ckpt, ckpt.Segments(3), err)

	err = cli.Parse(fs, []string{"-checkpoint", "0"}, os.Stdout)
	fmt.Println(cli.Exit(os.Stdout, "prog", err))
	// Output:
	// auto 3 <nil>
	// prog: invalid value "0" for flag -checkpoint: 0 segments: use off for no checkpointing
	// 2
}

// A summary with a loss that is not finite is still strict JSON.
func ExamplePrintJSON() {
	cli.PrintJSON(os.Stdout, struct {
		Loss cli.Float `json:"loss"`
		LR   cli.Float `json:"lr"`
	}{cli.Float(math.NaN()), 0.05})
	// Output: {"loss":null,"lr":0.05}
}
