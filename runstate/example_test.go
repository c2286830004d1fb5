package runstate_test

import (
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/runstate"
	"github.com/mixprec/mixprec/tensor"
)

// exampleRun is a small F16 training run: a model, AdamW and a loss scaler.
type exampleRun struct {
	dev    device.Device
	model  nn.Module
	opt    *optim.Adam
	scaler *amp.GradScaler
	x      tensor.Host
	y      []int32
}

func newExampleRun() *exampleRun {
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(7, 0))
	model := nn.NewSequential(nn.NewLinear(4, 8, rng), nn.ReLU(), nn.NewDropout(0.1, rng), nn.NewLinear(8, 3, rng))
	nn.To(model, dev)
	return &exampleRun{
		dev:    dev,
		model:  model,
		opt:    optim.NewAdamW(model.Params(), optim.LR(1e-2)),
		scaler: amp.NewGradScaler(),
		x:      tensor.UniformHost(rand.New(rand.NewPCG(1, 1)), -1, 1, 16, 4),
		y:      []int32{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0},
	}
}

// step trains one step and returns its loss.
func (r *exampleRun) step() float32 {
	g := autograd.NewGraph(r.dev)
	defer g.Release()
	amp.Autocast(g, dtype.F16)
	loss := nn.CrossEntropy(g, r.model.Forward(g, g.Input(r.x)), r.y)
	g.Backward(r.scaler.Scale(g, loss))
	if _, err := r.scaler.Step(r.opt); err != nil {
		log.Fatal(err)
	}
	if err := r.scaler.Update(); err != nil {
		log.Fatal(err)
	}
	r.opt.ZeroGrad()
	return loss.Value.Item()
}

func (r *exampleRun) state(config map[string]string) runstate.Run {
	return runstate.Run{Model: r.model, Optimizer: r.opt, Scaler: r.scaler, Config: config}
}

func (r *exampleRun) release() {
	nn.Release(r.model)
	optim.Release(r.opt)
}

// Checkpoint a run after three steps, then continue it in a fresh process's
// worth of state: the resumed run's next loss is the uninterrupted run's,
// bit for bit (dropout's random stream, AdamW's moments and the loss
// scaler's state all come back), and a run with another configuration is
// refused.
func Example() {
	root, err := os.MkdirTemp("", "runstate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	config := map[string]string{"model": "tiny", "amp": "f16", "batch": "16"}

	first := newExampleRun()
	defer first.release()
	for range 3 {
		first.step()
	}
	dir, err := runstate.Save(root, first.state(config), runstate.Position{Step: 3}, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(dir))
	uninterrupted := first.step()

	resumed := newExampleRun()
	defer resumed.release()
	latest, err := runstate.Latest(root)
	if err != nil {
		log.Fatal(err)
	}
	pos, err := runstate.Load(latest, resumed.state(config))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed at step", pos.Step)
	fmt.Println("same next loss:", resumed.step() == uninterrupted)

	other := newExampleRun()
	defer other.release()
	_, err = runstate.Load(latest, other.state(map[string]string{"model": "tiny", "amp": "f16", "batch": "32"}))
	fmt.Println("another batch size refused:", err != nil)
	// Output:
	// step-00000003
	// resumed at step 3
	// same next loss: true
	// another batch size refused: true
}

// A run owns its directory while it lives: a second Lock of it, here by
// the same process, is refused naming the holder, and Unlock frees it.
func ExampleLock() {
	root, err := os.MkdirTemp("", "runstate-lock")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	held, err := runstate.Lock(root)
	if err != nil {
		log.Fatal(err)
	}
	_, err = runstate.Lock(root)
	var locked *runstate.LockedError
	fmt.Println("refused, naming this process:", errors.As(err, &locked) && locked.PID == os.Getpid())
	if err := held.Unlock(); err != nil {
		log.Fatal(err)
	}
	again, err := runstate.Lock(root)
	fmt.Println("free again:", err == nil)
	again.Unlock()
	// Output:
	// refused, naming this process: true
	// free again: true
}

// A newest checkpoint that is corrupt is passed over, with its reason, for
// the newest that loads.
func ExampleLoadNewest() {
	root, err := os.MkdirTemp("", "runstate-newest")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	config := map[string]string{"model": "tiny"}
	run := newExampleRun()
	defer run.release()
	for step := 1; step <= 2; step++ {
		run.step()
		if _, err := runstate.Save(root, run.state(config), runstate.Position{Step: step}, 2); err != nil {
			log.Fatal(err)
		}
	}
	weights := filepath.Join(runstate.Dir(root, 2), "model.safetensors")
	b, err := os.ReadFile(weights)
	if err != nil {
		log.Fatal(err)
	}
	b[len(b)-1] ^= 1 // a flipped bit in the last weight
	if err := os.WriteFile(weights, b, 0o600); err != nil {
		log.Fatal(err)
	}

	resumed := newExampleRun()
	defer resumed.release()
	dir, pos, passed, err := runstate.LoadNewest(root, resumed.state(config))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed from", filepath.Base(dir), "at step", pos.Step)
	for _, p := range passed {
		fmt.Println("passed over", filepath.Base(p.Dir)+":", strings.Contains(p.Err.Error(), "SHA-256"))
	}
	// Output:
	// resumed from step-00000001 at step 1
	// passed over step-00000002: true
}
