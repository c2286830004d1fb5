package cli

import (
	"flag"
	"fmt"
	"time"
)

// DistFlags select data-parallel training across processes.
type DistFlags struct {
	Engine  string        // "none" or "mpi"
	Timeout time.Duration // a collective that takes longer means a rank is gone
}

// Register defines -dist and -dist-timeout on fs.
func (d *DistFlags) Register(fs *flag.FlagSet) {
	d.Engine = "none"
	fs.Var(NewChoice(&d.Engine, "none", "mpi"), "dist", "data-parallel training: mpi, one process per rank, started with mpirun -np N\n(-batch is per rank; rank 0 prints)")
	fs.Var(&durationValue{&d.Timeout}, "dist-timeout", "end every rank with an error when a collective takes longer (a rank stalled or died)")
	d.Timeout = 5 * time.Minute
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
