package devicetest

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// RunComm checks the collectives of c, a communicator of up to 8 ranks,
// on buffers of dev, and must be called on every rank at once (each a
// process of the test binary, as under mpirun): all-reduce (sum and
// average) and broadcast in every dtype, checked exactly (rank r holds
// r+1+(i%50)/4, whose sums over up to 8 ranks are exact in every dtype at
// every partial sum), an all-reduce of 48 MiB, a barrier, and no
// temporaries left live.
func RunComm(t *testing.T, c device.Comm, dev device.Device) {
	t.Helper()
	n, size := 1000, c.Size()
	temp := dev.MemStats().Live.Category(device.Temp)
	for _, dt := range dtype.All {
		for _, op := range []device.ReduceOp{device.Sum, device.Avg} {
			vals := make([]float32, n)
			for i := range vals {
				vals[i] = float32(c.Rank()+1) + float32(i%50)/4
			}
			b := dev.Alloc(dt, n, device.Temp)
			dev.CopyFromHost(b, vals)
			if err := c.AllReduce(b, op); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, n)
			dev.CopyToHost(got, b)
			dev.Free(b)
			for i, g := range got {
				sum := float32(size*(size+1)/2) + float32(size)*float32(i%50)/4
				want := sum
				if op == device.Avg {
					want = dtype.Round(dt, sum*(1/float32(size)))
				}
				if g != want {
					t.Fatalf("rank %d of %d: %v all-reduce %v: element %d = %v, want %v", c.Rank(), size, dt, op, i, g, want)
				}
			}
		}
		b := dev.Alloc(dt, 7, device.Temp)
		r := float32(c.Rank())
		dev.CopyFromHost(b, []float32{r, r + 0.5, r, r, r, r, r})
		if err := c.Broadcast(b, size-1); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 7)
		dev.CopyToHost(got, b)
		dev.Free(b)
		if got[0] != float32(size-1) || got[1] != float32(size)-0.5 {
			t.Fatalf("rank %d: %v broadcast from rank %d: %v", c.Rank(), dt, size-1, got)
		}
	}
	// 48 MiB: more than one of NCCL's chunks, and than mpi's pieces.
	big := dev.Alloc(dtype.F32, 12<<20, device.Temp)
	dev.Fill(big, float32(c.Rank()+1))
	if err := c.AllReduce(big, device.Sum); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, big.Len())
	dev.CopyToHost(got, big)
	for _, i := range []int{0, 1 << 20, 12<<20 - 1} {
		if want := float32(size * (size + 1) / 2); got[i] != want {
			t.Fatalf("rank %d: 48 MiB all-reduce: element %d = %v, want %v", c.Rank(), i, got[i], want)
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	dev.Free(big)
	if left := dev.MemStats().Live.Category(device.Temp) - temp; left != 0 {
		t.Errorf("rank %d: the collectives left %d bytes of temporaries live", c.Rank(), left)
	}
}
