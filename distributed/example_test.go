package distributed_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
)

// solo is a world of one process. A program gets its communicator from
// mpi.Open (-dist mpi) or cudaops.BootstrapNCCL (-dist nccl) and is started
// with mpirun -np N; the loop is the same.
type solo struct{}

func (solo) Rank() int                                      { return 0 }
func (solo) Size() int                                      { return 1 }
func (solo) AllReduce(device.Buffer, device.ReduceOp) error { return nil }
func (solo) Broadcast(device.Buffer, int) error             { return nil }
func (solo) Barrier() error                                 { return nil }
func (solo) Abort(reason error)                             { panic(reason) }
func (solo) Close() error                                   { return nil }

// A data-parallel training loop: every rank trains on its shard of each
// epoch, gradients are averaged while backward runs (Attach) and finished
// by SyncGrads before the optimiser (and clipping) see them.
func Example() {
	var comm device.Comm = solo{}
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 0))
	model := nn.NewSequential(nn.NewLinear(16, 32, rng), nn.ReLU(), nn.NewLinear(32, 4, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	var entries []distributed.Entry
	for _, e := range nn.State(model) {
		entries = append(entries, distributed.Entry{Name: e.Name, Var: e.Var})
	}
	dp, err := distributed.New(comm, entries) // every rank starts from rank 0's weights
	if err != nil {
		panic(err)
	}
	opt := optim.NewSGD(model.Params(), optim.LR(0.1))
	defer optim.Release(opt)
	data := datasets.Synthetic(256, []int{16}, 4, 7)
	var loss float32
	for epoch := range 3 {
		for b := range datasets.Batches(data, 32, datasets.Shuffle(1), datasets.Epoch(epoch), datasets.Shard(comm.Rank(), comm.Size())) {
			g := autograd.NewGraph(dev)
			dp.Attach(g)
			l := nn.CrossEntropy(g, model.Forward(g, g.Input(b.X)), b.Y)
			g.Backward(l)
			if err := dp.SyncGrads(); err != nil {
				panic(err)
			}
			optim.ClipGradNorm(model.Params(), 1)
			opt.Step()
			opt.ZeroGrad()
			loss = l.Value.Item()
			g.Release()
		}
	}
	fmt.Printf("rank %d of %d: last loss %.2f\n", comm.Rank(), comm.Size(), loss)
	// Output: rank 0 of 1: last loss 1.41
}
