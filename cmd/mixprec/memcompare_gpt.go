package main

import (
	"math/rand/v2"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
)

// gptWorkload is examples/gpt's model and step at its default recipe
// (AdamW with decay groups, clipping), on random ids of the Austen
// corpus's vocabulary size; its checkpointed columns checkpoint blocks.
type gptWorkload struct {
	cfg      models.GPTConfig
	batch    int
	segments int
	seed     uint64
}

func newGPTWorkload(batch int, batchSet bool, ckpt cli.Checkpoint, seed uint64) *gptWorkload {
	w := &gptWorkload{cfg: models.GPTConfig{Vocab: 81, Block: 64, Layers: 4, Heads: 4, Embd: 128}, batch: 12, seed: seed}
	if batchSet {
		w.batch = batch
	}
	w.segments = ckpt.Segments(w.cfg.Layers) // auto: each block its own segment
	return w
}

func (w *gptWorkload) batchSize() int    { return w.batch }
func (w *gptWorkload) segmentCount() int { return len(nn.Split(w.cfg.Layers, w.segments)) - 1 }

// gptRun is the GPT workload's model, optimiser, scaler and batch, made
// afresh from the workload's seed.
type gptRun struct {
	m      *models.GPT
	opt    optim.Optimizer
	scaler *amp.GradScaler
	x, y   []int32
}

func (w *gptWorkload) newRun(dev device.Device, low dtype.DType) *gptRun {
	rng := rand.New(rand.NewPCG(w.seed, 1))
	m := models.NewGPT(w.cfg, rng)
	nn.To(m, dev)
	r := &gptRun{m: m, scaler: amp.NewGradScaler(amp.For(low))}
	r.opt = optim.NewAdamWGroups(optim.DecayGroups(m.Params(), 0.1), optim.LR(1e-3), optim.Betas(0.9, 0.99))
	r.x, r.y = gptBatch(rng, w.cfg, w.batch)
	return r
}

// loss records the batch's forward pass on g, under autocast to low.
func (r *gptRun) loss(g *autograd.Graph, w *gptWorkload, low dtype.DType) *autograd.Var {
	if low != dtype.F32 {
		amp.Autocast(g, low)
	}
	return r.m.Loss(g, r.m.Forward(g, g.InputIDs(r.x, w.batch, w.cfg.Block)), r.y)
}

// update is the recipe's step after backward: unscale, clip to norm 1,
// the scaler's step and update, and zeroed gradients.
func (r *gptRun) update() error {
	if err := r.scaler.Unscale(r.opt); err != nil {
		return err
	}
	optim.ClipGradNorm(r.opt.Params(), 1)
	if _, err := r.scaler.Step(r.opt); err != nil {
		return err
	}
	if err := r.scaler.Update(); err != nil {
		return err
	}
	r.opt.ZeroGrad()
	return nil
}

func (r *gptRun) release() { optim.Release(r.opt); nn.Release(r.m) }

// gptBatch is the random windows memcompare trains the GPT on.
func gptBatch(rng *rand.Rand, cfg models.GPTConfig, batch int) ([]int32, []int32) {
	n := batch * cfg.Block
	x, y := make([]int32, n), make([]int32, n)
	for i := range x {
		x[i], y[i] = int32(rng.IntN(cfg.Vocab)), int32(rng.IntN(cfg.Vocab))
	}
	return x, y
}

func (w *gptWorkload) start(dev device.Device, c mcConfig, prof *profile.Profiler) (func() (float64, error), *amp.GradScaler, func()) {
	r := w.newRun(dev, c.Low)
	if c.Checkpoint {
		r.m.Segments = w.segments
	}
	step := func() (float64, error) {
		g := autograd.NewGraph(dev, prof.Graph())
		defer g.Release()
		loss := r.loss(g, w, c.Low)
		g.Backward(r.scaler.Scale(g, loss))
		if err := r.update(); err != nil {
			return 0, err
		}
		return float64(loss.Value.Item()), nil
	}
	return step, r.scaler, r.release
}
