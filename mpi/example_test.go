package mpi_test

import (
	"fmt"
	"log"
	"time"

	"github.com/mixprec/mixprec/mpi"
)

// A program opens MPI once, at start, and learns its rank and the world's
// size. Started without mpirun, the world is this process alone; where
// Open MPI is not installed, Open returns an error saying what to install,
// and the program can still train on one process, as this one does.
func Example() {
	rank, size := 0, 1
	comm, err := mpi.Open(mpi.Timeout(time.Minute))
	if err != nil {
		log.Printf("training without MPI: %v", err)
	} else {
		defer comm.Close()
		rank, size = comm.Rank(), comm.Size()
	}
	fmt.Printf("rank %d of %d\n", rank, size)
	// Output: rank 0 of 1
}
