package autograd

import (
	"fmt"

	"github.com/mixprec/mixprec/device"
)

// RNG is a counter-based random stream for operations such as dropout. A
// draw of n numbers returns a key naming them (the seed and the counter
// before the draw) and advances the counter by n, so every mask is a pure
// function of the seed, the number of draws before it and the element's
// position, on every backend.
type RNG struct {
	Seed    uint64
	Counter uint64
	// rank and ranks split every draw among the ranks of a data-parallel
	// run (Shard); 0 and 0 for one process.
	rank, ranks int
}

// NewRNG returns a stream starting at counter 0.
func NewRNG(seed uint64) *RNG { return &RNG{Seed: seed} }

// Shard makes r the stream of rank rank of ranks processes that train on
// parts of one batch: a draw of n numbers is the rank-th n of a draw of
// ranks·n, and the counter advances by ranks·n on every rank. Each rank
// then draws other masks than the others, and when rank r holds the r-th
// part of the batch (the batch dimension first), the masks a single
// process would draw for the whole batch. Seed and Counter, a run's
// saved state, stay the same on every rank.
func (r *RNG) Shard(rank, ranks int) {
	if ranks < 1 || rank < 0 || rank >= ranks {
		panic(fmt.Sprintf("autograd.RNG.Shard(%d, %d): want 0 <= rank < ranks", rank, ranks))
	}
	r.rank, r.ranks = rank, ranks
}

func (r *RNG) next(n int) device.RandKey {
	k := device.RandKey{Seed: r.Seed, Offset: r.Counter + uint64(r.rank*n)}
	r.Counter += uint64(max(r.ranks, 1) * n)
	return k
}

// drawSource is where a graph's random keys come from: the RNG itself, a
// recording of the draws (a checkpointed segment's forward pass), or a
// replay of a recording (its recomputation).
type drawSource interface {
	draw(r *RNG, n int) device.RandKey
}

type freshDraws struct{}

func (freshDraws) draw(r *RNG, n int) device.RandKey { return r.next(n) }

type recorder struct {
	src  drawSource
	keys []device.RandKey
}

func (rc *recorder) draw(r *RNG, n int) device.RandKey {
	k := rc.src.draw(r, n)
	rc.keys = append(rc.keys, k)
	return k
}

type replayer struct {
	keys []device.RandKey
	pos  int
}

func (rp *replayer) draw(r *RNG, n int) device.RandKey {
	if rp.pos >= len(rp.keys) {
		panic(fmt.Sprintf("autograd: a checkpointed segment drew random numbers %d times when recomputed, %d times in its forward pass; it must be deterministic", rp.pos+1, len(rp.keys)))
	}
	k := rp.keys[rp.pos]
	rp.pos++
	return k
}

// Draw returns the key for n random numbers from r, recorded or replayed as
// checkpointing requires. Operations that use randomness call it.
func (g *Graph) Draw(r *RNG, n int) device.RandKey { return g.rng.draw(r, n) }
