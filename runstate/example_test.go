package runstate_test

import (
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"

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
