package distributed_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/cudaops"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/mpi"
	"github.com/mixprec/mixprec/mpi/mpitest"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/safetensors"
)

func entries(m nn.Module) []distributed.Entry {
	var out []distributed.Entry
	for _, e := range nn.State(m) {
		out = append(out, distributed.Entry{Name: e.Name, Var: e.Var})
	}
	return out
}

const steps = 6

var data = datasets.Synthetic(96, []int{1, 6, 6}, 10, 3)

// config is one training run of train.
type config struct {
	dev         device.Device // nil: the CPU
	rank, ranks int
	batch       int         // per rank
	overflowAt  int         // the step whose loss rank 1 scales by Inf, or -1
	low         dtype.DType // autocast's dtype; F32 for none
	attach      bool        // average while backward runs
	segments    int         // checkpointed segments; 0 for none
	clip        float64     // the gradients' largest norm; 0 for no clipping
}

// result is what train returns.
type result struct {
	weights []safetensors.Tensor
	skipped int // steps the scaler skipped
	clipped int // steps whose gradient norm was above c.clip
}

// train runs steps of SGD on a small MLP with batches of c.batch samples
// of this rank's shard (c.ranks processes), averaging gradients when dp is
// set, and returns the final weights. Initialisation differs by rank: New
// must make the copies equal. With overflowAt >= 0, that step's loss is
// scaled by Inf on rank 1 alone. Clipping sees the averaged gradients:
// SyncGrads, then the scaler's Unscale, then ClipGradNorm, as with DDP.
func train(t *testing.T, dp func(nn.Module) *distributed.DataParallel, c config) result {
	dev := c.dev
	if dev == nil {
		dev = cpu.New()
	}
	rng := rand.New(rand.NewPCG(uint64(1+c.rank), 1))
	model := nn.NewSequential(nn.Flatten(), nn.NewLinear(36, 16, rng), nn.ReLU(), nn.NewLinear(16, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	var d *distributed.DataParallel
	if dp != nil {
		d = dp(model)
	}
	opt := optim.NewSGD(model.Params(), optim.LR(0.1), optim.Momentum(0.9))
	defer optim.Release(opt)
	scaler := amp.NewGradScaler(amp.For(c.low), amp.InitScale(256))
	opts := []datasets.Option{datasets.Shuffle(4), datasets.Prefetch(0)}
	if c.ranks > 1 {
		opts = append(opts, datasets.Shard(c.rank, c.ranks))
	}
	var res result
	step := 0
	for epoch := 0; step < steps; epoch++ {
		for b := range datasets.Batches(data, c.batch, append(opts, datasets.Epoch(epoch))...) {
			g := autograd.NewGraph(dev)
			if d != nil && c.attach {
				d.Attach(g)
			}
			if c.low != dtype.F32 {
				amp.Autocast(g, c.low)
			}
			x := g.Input(b.X)
			var out *autograd.Var
			if c.segments > 0 {
				out = nn.CheckpointSequential(g, model.Layers, c.segments, x)
			} else {
				out = model.Forward(g, x)
			}
			loss := nn.CrossEntropy(g, out, b.Y)
			if step == c.overflowAt && c.rank == 1 {
				loss = g.Scale(loss, float32(math.Inf(1)))
			}
			g.Backward(scaler.Scale(g, loss))
			if d != nil {
				if err := d.SyncGrads(); err != nil {
					t.Fatal(err)
				}
			}
			if c.clip > 0 {
				if err := scaler.Unscale(opt); err != nil {
					t.Fatal(err)
				}
				if norm := optim.ClipGradNorm(model.Params(), c.clip); norm > c.clip {
					res.clipped++
				}
			}
			if _, err := scaler.Step(opt); err != nil {
				t.Fatal(err)
			}
			if err := scaler.Update(); err != nil {
				t.Fatal(err)
			}
			opt.ZeroGrad()
			g.Release()
			step++
			if step == steps {
				break
			}
		}
	}
	res.weights, res.skipped = nn.Weights(model), scaler.Skipped()
	return res
}

// within compares weights with F32's tolerance.
func within(t *testing.T, what string, got *safetensors.File, want []safetensors.Tensor) {
	t.Helper()
	for _, w := range want {
		g := got.Tensor(w.Name)
		for j := range w.F32 {
			if !dtype.Close(dtype.F32, float64(g.F32[j]), float64(w.F32[j]), 0) {
				t.Fatalf("%s[%d]: %s give %v, 1 rank x batch 16 gives %v", w.Name, j, what, g.F32[j], w.F32[j])
			}
		}
	}
}

func TestTwoRanksMatchOneUnderMpirun(t *testing.T) {
	for _, c := range []struct {
		low      dtype.DType
		overflow int
		attach   string
	}{{dtype.F32, -1, "0"}, {dtype.F32, -1, "1"}, {dtype.F16, 2, "1"}} {
		t.Run(c.low.String()+"/attach"+c.attach, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "ranks.safetensors")
			log := mpitest.Pass(t, 2, "TestChildTrain", "MIXPREC_DP_OUT="+out, "MIXPREC_DP_LOW="+c.low.String(),
				fmt.Sprintf("MIXPREC_DP_OVERFLOW=%d", c.overflow), "MIXPREC_DP_ATTACH="+c.attach)
			f, err := safetensors.ReadFile(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if c.overflow >= 0 {
				if got := f.Metadata["skipped"]; got != "1" {
					t.Errorf("ranks skipped %s steps after an overflow on rank 1 alone, want 1 on every rank", got)
				}
				return // the single process has no overflow to compare with
			}
			// One process, batch 16, rank 0's initialisation: the same
			// samples per step as the two ranks of batch 8 together.
			want := train(t, nil, config{ranks: 1, batch: 16, overflowAt: -1, low: c.low})
			if f.Metadata["skipped"] != fmt.Sprint(want.skipped) {
				t.Errorf("ranks skipped %s steps, one process %d", f.Metadata["skipped"], want.skipped)
			}
			within(t, "2 ranks x batch 8", f, want.weights)
		})
	}
}

// newDP returns train's constructor of data parallelism over comm, with
// small buckets so that a model has several.
func newDP(t *testing.T, comm device.Comm) func(nn.Module) *distributed.DataParallel {
	return func(m nn.Module) *distributed.DataParallel {
		d, err := distributed.New(comm, entries(m), distributed.BucketBytes(2048))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

// sameOnEveryRank fails unless every rank holds the same weights.
func sameOnEveryRank(t *testing.T, c *mpi.Comm, ws []safetensors.Tensor) {
	t.Helper()
	for _, w := range ws {
		avg := make([]float32, len(w.F32))
		copy(avg, w.F32)
		if err := c.AllReduceF32(avg, device.Avg); err != nil {
			t.Fatal(err)
		}
		for j := range avg {
			if avg[j] != w.F32[j] {
				t.Fatalf("rank %d: %s[%d] = %v differs from the ranks' average %v", c.Rank(), w.Name, j, w.F32[j], avg[j])
			}
		}
	}
}

// TestChildTrain is one rank of TestTwoRanksMatchOneUnderMpirun.
func TestChildTrain(t *testing.T) {
	c := mpitest.Comm(t, time.Minute)
	low, err := dtype.Parse(os.Getenv("MIXPREC_DP_LOW"))
	if err != nil {
		t.Fatal(err)
	}
	var overflow int
	fmt.Sscan(os.Getenv("MIXPREC_DP_OVERFLOW"), &overflow)
	res := train(t, newDP(t, c), config{rank: c.Rank(), ranks: c.Size(), batch: 8, overflowAt: overflow, low: low,
		attach: os.Getenv("MIXPREC_DP_ATTACH") == "1"})
	sameOnEveryRank(t, c, res.weights)
	if c.Rank() == 0 {
		if err := safetensors.WriteFile(os.Getenv("MIXPREC_DP_OUT"), res.weights, map[string]string{"skipped": fmt.Sprint(res.skipped)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointingUnderMpirun checks that data parallelism composes with
// gradient checkpointing: on 2 ranks, a model checkpointed in 2 segments
// ends with the same bits as without checkpointing, in F32 and under F16
// autocast, averaging during backward (recomputed segments report their
// gradients at the end of backward, so the buckets go in another order).
func TestCheckpointingUnderMpirun(t *testing.T) {
	mpitest.Pass(t, 2, "TestChildCheckpointing")
}

// TestChildCheckpointing is one rank of TestCheckpointingUnderMpirun.
func TestChildCheckpointing(t *testing.T) {
	c := mpitest.Comm(t, time.Minute)
	for _, low := range []dtype.DType{dtype.F32, dtype.F16} {
		cfg := config{rank: c.Rank(), ranks: c.Size(), batch: 8, overflowAt: -1, low: low, attach: true}
		plain := train(t, newDP(t, c), cfg)
		cfg.segments = 2
		ckpt := train(t, newDP(t, c), cfg)
		sameOnEveryRank(t, c, ckpt.weights)
		if plain.skipped != ckpt.skipped {
			t.Errorf("%v: %d steps skipped with checkpointing, %d without", low, ckpt.skipped, plain.skipped)
		}
		for i, w := range plain.weights {
			g := ckpt.weights[i]
			for j := range w.F32 {
				if math.Float32bits(g.F32[j]) != math.Float32bits(w.F32[j]) {
					t.Fatalf("%v: %s[%d] is %v with checkpointing, %v without", low, w.Name, j, g.F32[j], w.F32[j])
				}
			}
		}
	}
	// The programs report the loss over every rank with AllReduceHost.
	v := []float32{float32(c.Rank() + 1), 2}
	if err := distributed.AllReduceHost(c, cpu.New(), v, device.Sum); err != nil || v[0] != 3 || v[1] != 4 {
		t.Errorf("AllReduceHost sum over 2 ranks: %v, %v; want [3 4]", v, err)
	}
}

// TestClippingUnderMpirun checks that data parallelism composes with
// gradient clipping: clipping the averaged gradients (after SyncGrads) on 2
// ranks x batch 8 gives what 1 rank x batch 16 gives, with the same steps
// clipped.
func TestClippingUnderMpirun(t *testing.T) {
	// The norms of this run lie between 0.65 and 0.75: two of the six steps
	// clip, each norm at least 0.008 from the bound.
	const maxNorm = 0.72
	out := filepath.Join(t.TempDir(), "ranks.safetensors")
	log := mpitest.Pass(t, 2, "TestChildClipping", "MIXPREC_DP_OUT="+out, fmt.Sprintf("MIXPREC_DP_CLIP=%g", maxNorm))
	f, err := safetensors.ReadFile(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	want := train(t, nil, config{ranks: 1, batch: 16, overflowAt: -1, low: dtype.F32, clip: maxNorm})
	t.Logf("%d of %d steps clipped at norm %g", want.clipped, steps, maxNorm)
	if want.clipped == 0 || want.clipped == steps {
		t.Fatalf("%d of %d steps' gradient norms were above %g: the test should clip some and leave others", want.clipped, steps, maxNorm)
	}
	if got := f.Metadata["clipped"]; got != fmt.Sprint(want.clipped) {
		t.Errorf("2 ranks clipped %s steps, 1 rank %d", got, want.clipped)
	}
	within(t, "2 ranks x batch 8, clipped", f, want.weights)
}

// TestChildClipping is one rank of TestClippingUnderMpirun.
func TestChildClipping(t *testing.T) {
	c := mpitest.Comm(t, time.Minute)
	var maxNorm float64
	fmt.Sscan(os.Getenv("MIXPREC_DP_CLIP"), &maxNorm)
	res := train(t, newDP(t, c), config{rank: c.Rank(), ranks: c.Size(), batch: 8, overflowAt: -1, low: dtype.F32, attach: true, clip: maxNorm})
	sameOnEveryRank(t, c, res.weights)
	if c.Rank() == 0 {
		if err := safetensors.WriteFile(os.Getenv("MIXPREC_DP_OUT"), res.weights, map[string]string{"clipped": fmt.Sprint(res.clipped)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestModelsMustMatchUnderMpirun(t *testing.T) {
	log, _ := mpitest.Run(t, 2, "TestChildMismatch")
	if n := strings.Count(log, `rank 1's model differs from rank 0's: entry 0 is "0.weight [16 36]" on rank 0 and "0.weight [17 36]" on rank 1`); n != 2 {
		t.Fatalf("mismatched models were reported with the difference by %d ranks, want both:\n%s", n, log)
	}
}

// TestChildMismatch is one rank of TestModelsMustMatchUnderMpirun.
func TestChildMismatch(t *testing.T) {
	c := mpitest.Comm(t, time.Minute)
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.NewSequential(nn.NewLinear(36, 16+c.Rank(), rng))
	nn.To(model, cpu.New())
	defer nn.Release(model)
	_, err := distributed.New(c, entries(model))
	t.Log(err)
}

// cudaForNCCL returns the CUDA device with NCCL loadable, or skips the test
// saying which is missing (a GPU machine's run sets MIXPREC_REQUIRE_CUDA=1
// to make a missing GPU a failure).
func cudaForNCCL(t *testing.T) device.Device {
	t.Helper()
	dev := devicetest.Open(t, "cuda")
	if _, err := cudaops.NewNCCLID(); err != nil {
		t.Skipf("NCCL not tested: %v", err)
	}
	return dev
}

// TestNCCLRanksMatchOne is TestTwoRanksMatchOneUnderMpirun on two GPUs
// with NCCL: two processes of batch 8, one per GPU, joined by an ID this
// process makes, end where one process of batch 16 on one GPU does; and an
// overflow on rank 1 alone makes both skip the step.
func TestNCCLRanksMatchOne(t *testing.T) {
	dev := cudaForNCCL(t)
	if d, err := cudaops.Open(1, cudaops.Options{}); err != nil {
		t.Skipf("needs 2 GPUs: %v", err)
	} else {
		d.Close()
	}
	for _, c := range []struct {
		low      dtype.DType
		overflow int
	}{{dtype.F32, -1}, {dtype.F16, 2}} {
		t.Run(c.low.String(), func(t *testing.T) {
			id, err := cudaops.NewNCCLID() // this process hosts the ranks' rendezvous
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "ranks.safetensors")
			var procs [2]*exec.Cmd
			var logs [2]strings.Builder
			for r := range procs {
				cmd := exec.Command(os.Args[0], "-test.run", "^TestChildNCCLTrain$", "-test.v")
				cmd.Env = append(os.Environ(), "MIXPREC_NCCL_CHILD=1", "MIXPREC_NCCL_ID="+id.String(),
					fmt.Sprintf("RANK=%d", r), "WORLD_SIZE=2", fmt.Sprintf("MIXPREC_CUDA_DEVICE=%d", r),
					"MIXPREC_DP_OUT="+out, "MIXPREC_DP_LOW="+c.low.String(), fmt.Sprintf("MIXPREC_DP_OVERFLOW=%d", c.overflow))
				cmd.Stdout, cmd.Stderr = &logs[r], &logs[r]
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				procs[r] = cmd
			}
			for r, cmd := range procs {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("rank %d: %v\n%s", r, err, logs[r].String())
				}
			}
			f, err := safetensors.ReadFile(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, logs[0].String())
			}
			if c.overflow >= 0 {
				if got := f.Metadata["skipped"]; got != "1" {
					t.Errorf("ranks skipped %s steps after an overflow on rank 1 alone, want 1 on every rank", got)
				}
				return
			}
			want := train(t, nil, config{dev: dev, ranks: 1, batch: 16, overflowAt: -1, low: c.low})
			within(t, "2 GPUs x batch 8 over NCCL", f, want.weights)
		})
	}
}

// TestChildNCCLTrain is one rank of TestNCCLRanksMatchOne.
func TestChildNCCLTrain(t *testing.T) {
	if os.Getenv("MIXPREC_NCCL_CHILD") != "1" {
		t.Skip("runs as one rank of an NCCL job, started by its parent test")
	}
	dev, err := device.Open("cuda")
	if err != nil {
		t.Fatal(err)
	}
	c, err := cudaops.OpenNCCLFromEnv(dev.(*cudaops.Device), cudaops.NCCLTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	low, err := dtype.Parse(os.Getenv("MIXPREC_DP_LOW"))
	if err != nil {
		t.Fatal(err)
	}
	var overflow int
	fmt.Sscan(os.Getenv("MIXPREC_DP_OVERFLOW"), &overflow)
	res := train(t, newDP(t, c), config{dev: dev, rank: c.Rank(), ranks: c.Size(), batch: 8, overflowAt: overflow, low: low, attach: true})
	// Every rank must hold the same weights.
	for _, w := range res.weights {
		avg := append([]float32(nil), w.F32...)
		if err := distributed.AllReduceHost(c, dev, avg, device.Avg); err != nil {
			t.Fatal(err)
		}
		for j := range avg {
			if avg[j] != w.F32[j] {
				t.Fatalf("rank %d: %s[%d] = %v differs from the ranks' average %v", c.Rank(), w.Name, j, w.F32[j], avg[j])
			}
		}
	}
	if c.Rank() == 0 {
		if err := safetensors.WriteFile(os.Getenv("MIXPREC_DP_OUT"), res.weights, map[string]string{"skipped": fmt.Sprint(res.skipped)}); err != nil {
			t.Fatal(err)
		}
	}
}

// twinComm is a world of two ranks in one process whose other rank holds
// the same values as this one: every collective leaves buffers as they are
// (the average of two equal values is the value). It measures what data
// parallelism costs around the communication itself.
type twinComm struct{}

func (twinComm) Rank() int                                           { return 0 }
func (twinComm) Size() int                                           { return 2 }
func (twinComm) AllReduce(b device.Buffer, op device.ReduceOp) error { return nil }
func (twinComm) Broadcast(b device.Buffer, root int) error           { return nil }
func (twinComm) Barrier() error                                      { return nil }
func (twinComm) Abort(reason error)                                  { panic(reason) }
func (twinComm) Close() error                                        { return nil }

// BenchmarkSyncGrads is one step's gradient averaging for the MNIST MLP
// (784-256-10, 0.8 MB of gradients in one bucket) on the CPU, without the
// communication: the packing and unpacking around it.
func BenchmarkSyncGrads(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	dev := cpu.New()
	model := nn.NewSequential(nn.NewLinear(784, 256, rng), nn.ReLU(), nn.NewLinear(256, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	d, err := distributed.New(twinComm{}, entries(model))
	if err != nil {
		b.Fatal(err)
	}
	g := autograd.NewGraph(dev)
	x := datasets.Synthetic(64, []int{784}, 10, 1)
	for batch := range datasets.Batches(x, 64) {
		g.Backward(nn.CrossEntropy(g, model.Forward(g, g.Input(batch.X)), batch.Y))
	}
	g.Release()
	b.SetBytes(4 * int64(784*256+256+256*10+10))
	b.ResetTimer()
	for range b.N {
		if err := d.SyncGrads(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSettingsMustMatchUnderMpirun starts three ranks whose settings
// differ: every rank returns the same error, naming each setting and which
// ranks have which value.
func TestSettingsMustMatchUnderMpirun(t *testing.T) {
	log, _ := mpitest.Run(t, 3, "TestChildSettings")
	want := "distributed: the ranks must train with the same settings, and differ in -batch (64 on ranks 0 and 2, 32 on rank 1); -lr (0.1 on ranks 0 and 1, 0.2 on rank 2)"
	if n := strings.Count(log, want); n != 3 {
		t.Fatalf("%d ranks said %q, want all three:\n%s", n, want, log)
	}
	if n := strings.Count(log, "--- PASS: TestChildSettings"); n != 3 {
		t.Fatalf("%d ranks passed, want 3:\n%s", n, log)
	}
}

// TestChildSettings is one rank of TestSettingsMustMatchUnderMpirun; it
// also checks that settings that agree pass, on the same communicator.
func TestChildSettings(t *testing.T) {
	c := mpitest.Comm(t, time.Minute)
	dev := cpu.New()
	same := map[string]string{"-model": "mlp", "-seed": "7", "data": "60000 samples"}
	if err := distributed.AgreeSettings(c, dev, same); err != nil {
		t.Fatalf("settings that agree: %v", err)
	}
	mine := map[string]string{"-model": "mlp", "-batch": "64", "-lr": "0.1"}
	if c.Rank() == 1 {
		mine["-batch"] = "32"
	}
	if c.Rank() == 2 {
		mine["-lr"] = "0.2"
	}
	err := distributed.AgreeSettings(c, dev, mine)
	var mismatch *distributed.MismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("settings that differ: %v, want a MismatchError", err)
	}
	fmt.Println(err)
}

// TestPackedBytes: the most a reduction packs at once is the largest
// bucket of several parameters, in F32; a bucket of one parameter is
// reduced in place and packs nothing.
func TestPackedBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	dev := cpu.New()
	// Buckets take the parameters last first, as backward finishes them:
	// the biases and weights of 10, 10x20, 20, 20x30 and 30 (860 floats)
	// fill one of 1,000 floats, and 30x40 (1,200) goes alone.
	model := nn.NewSequential(nn.NewLinear(40, 30, rng), nn.NewLinear(30, 20, rng), nn.NewLinear(20, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	for _, c := range []struct {
		bucket int
		want   int64
	}{
		{4 << 20, 4 * (40*30 + 30 + 30*20 + 20 + 20*10 + 10)}, // one bucket of everything
		{4 * 1000, 4 * (10 + 20*10 + 20 + 30*20 + 30)},
		{4, 0}, // every parameter alone
	} {
		d, err := distributed.New(solo{}, entries(model), distributed.BucketBytes(c.bucket))
		if err != nil {
			t.Fatal(err)
		}
		if got := d.PackedBytes(); got != c.want {
			t.Errorf("buckets of %d bytes: PackedBytes %d, want %d", c.bucket, got, c.want)
		}
	}
}
