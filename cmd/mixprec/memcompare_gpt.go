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

func (w *gptWorkload) start(dev device.Device, c mcConfig, prof *profile.Profiler) (func() (float64, error), *amp.GradScaler, func()) {
	rng := rand.New(rand.NewPCG(w.seed, 1))
	m := models.NewGPT(w.cfg, rng)
	nn.To(m, dev)
	if c.Checkpoint {
		m.Segments = w.segments
	}
	opt := optim.NewAdamWGroups(optim.DecayGroups(m.Params(), 0.1), optim.LR(1e-3), optim.Betas(0.9, 0.99))
	scaler := amp.NewGradScaler(amp.For(c.Low))
	n := w.batch * w.cfg.Block
	x, y := make([]int32, n), make([]int32, n)
	for i := range x {
		x[i], y[i] = int32(rng.IntN(w.cfg.Vocab)), int32(rng.IntN(w.cfg.Vocab))
	}
	step := func() (float64, error) {
		g := autograd.NewGraph(dev, prof.Graph())
		defer g.Release()
		if c.Low != dtype.F32 {
			amp.Autocast(g, c.Low)
		}
		loss := m.Loss(g, m.Forward(g, g.InputIDs(x, w.batch, w.cfg.Block)), y)
		g.Backward(scaler.Scale(g, loss))
		if err := scaler.Unscale(opt); err != nil {
			return 0, err
		}
		optim.ClipGradNorm(opt.Params(), 1)
		if _, err := scaler.Step(opt); err != nil {
			return 0, err
		}
		if err := scaler.Update(); err != nil {
			return 0, err
		}
		opt.ZeroGrad()
		return float64(loss.Value.Item()), nil
	}
	return step, scaler, func() { optim.Release(opt); nn.Release(m) }
}
