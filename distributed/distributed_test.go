package distributed_test

import (
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
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/distributed"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/mpi"
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

func mpirun(t *testing.T, np int, run string, env ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found (Debian's openmpi-bin; make test installs it): data parallelism not tested")
	}
	args := []string{"--oversubscribe", "-np", fmt.Sprint(np)}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	for _, e := range append(env, "MIXPREC_MPI_CHILD=1") {
		args = append(args, "-x", e)
	}
	args = append(args, os.Args[0], "-test.run", "^"+run+"$", "-test.v")
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

const steps = 6

var data = datasets.Synthetic(96, []int{1, 6, 6}, 10, 3)

// train runs steps of SGD on a small MLP with batches of batch samples of
// this rank's shard (ranks processes), averaging gradients when dp is set,
// and returns the final weights. Initialisation differs by rank: New must
// make the copies equal. With overflowAt >= 0 and rank 1, that step's
// loss is scaled by Inf on rank 1 alone.
func train(t *testing.T, dp func(nn.Module) *distributed.DataParallel, rank, ranks, batch, overflowAt int, low dtype.DType) ([]safetensors.Tensor, int) {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(uint64(1+rank), 1))
	model := nn.NewSequential(nn.Flatten(), nn.NewLinear(36, 16, rng), nn.ReLU(), nn.NewLinear(16, 10, rng))
	nn.To(model, dev)
	defer nn.Release(model)
	var d *distributed.DataParallel
	if dp != nil {
		d = dp(model)
	}
	opt := optim.NewSGD(model.Params(), optim.LR(0.1), optim.Momentum(0.9))
	defer optim.Release(opt)
	scaler := amp.NewGradScaler(amp.For(low), amp.InitScale(256))
	opts := []datasets.Option{datasets.Shuffle(4), datasets.Prefetch(0)}
	if ranks > 1 {
		opts = append(opts, datasets.Shard(rank, ranks))
	}
	step := 0
	for epoch := 0; step < steps; epoch++ {
		for b := range datasets.Batches(data, batch, append(opts, datasets.Epoch(epoch))...) {
			g := autograd.NewGraph(dev)
			if d != nil && os.Getenv("MIXPREC_DP_ATTACH") == "1" {
				d.Attach(g) // average while backward runs
			}
			if low != dtype.F32 {
				amp.Autocast(g, low)
			}
			loss := nn.CrossEntropy(g, model.Forward(g, g.Input(b.X)), b.Y)
			if step == overflowAt && rank == 1 {
				loss = g.Scale(loss, float32(math.Inf(1)))
			}
			g.Backward(scaler.Scale(g, loss))
			if d != nil {
				if err := d.SyncGrads(); err != nil {
					t.Fatal(err)
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
	return nn.Weights(model), scaler.Skipped()
}

func TestTwoRanksMatchOneUnderMpirun(t *testing.T) {
	for _, c := range []struct {
		low      dtype.DType
		overflow int
		attach   string
	}{{dtype.F32, -1, "0"}, {dtype.F32, -1, "1"}, {dtype.F16, 2, "1"}} {
		t.Run(c.low.String()+"/attach"+c.attach, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "ranks.safetensors")
			log, err := mpirun(t, 2, "TestChildTrain", "MIXPREC_DP_OUT="+out, "MIXPREC_DP_LOW="+c.low.String(),
				fmt.Sprintf("MIXPREC_DP_OVERFLOW=%d", c.overflow), "MIXPREC_DP_ATTACH="+c.attach)
			if err != nil {
				t.Fatalf("2 ranks under mpirun: %v\n%s", err, log)
			}
			f, err := safetensors.ReadFile(out)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			// One process, batch 16, rank 0's initialisation: the same
			// samples per step as the two ranks of batch 8 together.
			overflow := -1
			want, skipped := train(t, nil, 0, 1, 16, overflow, c.low)
			if c.overflow >= 0 {
				if got := f.Metadata["skipped"]; got != "1" {
					t.Errorf("ranks skipped %s steps after an overflow on rank 1 alone, want 1 on every rank", got)
				}
				return // the single process has no overflow to compare with
			}
			if f.Metadata["skipped"] != fmt.Sprint(skipped) {
				t.Errorf("ranks skipped %s steps, one process %d", f.Metadata["skipped"], skipped)
			}
			for _, w := range want {
				g := f.Tensor(w.Name)
				for j := range w.F32 {
					if d := math.Abs(float64(g.F32[j] - w.F32[j])); d > 1e-5+1e-4*math.Abs(float64(w.F32[j])) {
						t.Fatalf("%s[%d]: 2 ranks x batch 8 give %v, 1 rank x batch 16 gives %v", w.Name, j, g.F32[j], w.F32[j])
					}
				}
			}
		})
	}
}

// TestChildTrain is one rank of TestTwoRanksMatchOneUnderMpirun.
func TestChildTrain(t *testing.T) {
	if os.Getenv("MIXPREC_MPI_CHILD") != "1" {
		t.Skip("runs as a rank under mpirun, started by its parent test")
	}
	c, err := mpi.Open(mpi.Timeout(time.Minute))
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
	ws, skipped := train(t, func(m nn.Module) *distributed.DataParallel {
		d, err := distributed.New(c, entries(m), distributed.BucketBytes(2048)) // several buckets
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, c.Rank(), c.Size(), 8, overflow, low)
	// Every rank must hold the same weights; rank 0 reports them.
	for _, w := range ws {
		sum := make([]float32, len(w.F32))
		copy(sum, w.F32)
		if err := c.AllReduceF32(sum, 1); err != nil {
			t.Fatal(err)
		}
		for j := range sum {
			if sum[j] != w.F32[j] {
				t.Fatalf("rank %d: %s[%d] = %v differs from the ranks' average %v", c.Rank(), w.Name, j, w.F32[j], sum[j])
			}
		}
	}
	if c.Rank() == 0 {
		if err := safetensors.WriteFile(os.Getenv("MIXPREC_DP_OUT"), ws, map[string]string{"skipped": fmt.Sprint(skipped)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestModelsMustMatchUnderMpirun(t *testing.T) {
	log, _ := mpirun(t, 2, "TestChildMismatch")
	if !strings.Contains(log, `rank 1's model differs from rank 0's: entry 0 is "0.weight [16 36]" on rank 0 and "0.weight [17 36]" here`) ||
		!strings.Contains(log, "rank 0: another rank's model differs") {
		t.Fatalf("mismatched models were not reported on both ranks:\n%s", log)
	}
}

// TestChildMismatch is one rank of TestModelsMustMatchUnderMpirun.
func TestChildMismatch(t *testing.T) {
	if os.Getenv("MIXPREC_MPI_CHILD") != "1" {
		t.Skip("runs as a rank under mpirun, started by its parent test")
	}
	c, err := mpi.Open(mpi.Timeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.NewSequential(nn.NewLinear(36, 16+c.Rank(), rng))
	nn.To(model, cpu.New())
	defer nn.Release(model)
	_, err = distributed.New(c, entries(model))
	t.Log(err)
}
