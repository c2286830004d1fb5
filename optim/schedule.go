package optim

import "math"

// Schedule gives the learning rate for a 0-based step.
type Schedule func(step int) float32

// Constant is a fixed learning rate.
func Constant(lr float32) Schedule { return func(int) float32 { return lr } }

// Cosine decays from base to min over total steps along a half cosine, after
// a linear warm-up from 0 over warmup steps (torch's CosineAnnealingLR with
// a warm-up in front).
func Cosine(base, min float32, warmup, total int) Schedule {
	return func(step int) float32 {
		if step < warmup {
			return base * float32(step+1) / float32(warmup)
		}
		span := max(total-warmup, 1)
		t := math.Min(float64(step-warmup)/float64(span), 1)
		return min + (base-min)*float32(0.5*(1+math.Cos(math.Pi*t)))
	}
}

// WarmupCosine is nanoGPT's schedule: a linear warm-up to base over warmup
// steps, base·(step+1)/(warmup+1), then a half cosine from base down to min
// at step decay, and min after it.
func WarmupCosine(base, min float32, warmup, decay int) Schedule {
	return func(step int) float32 {
		switch {
		case step < warmup:
			return float32(float64(base) * float64(step+1) / float64(warmup+1))
		case step > decay:
			return min
		}
		t := float64(step-warmup) / float64(max(decay-warmup, 1))
		return float32(float64(min) + 0.5*(1+math.Cos(math.Pi*t))*float64(base-min))
	}
}

// OneCycle is torch's OneCycleLR with cosine annealing: from max/div up to
// max over the first pct of total steps, then down to max/(div*finalDiv).
// PyTorch's defaults are pct 0.3, div 25, finalDiv 1e4.
func OneCycle(maxLR float32, total int, pct, div, finalDiv float64) Schedule {
	start := float64(maxLR) / div
	end := start / finalDiv
	up := int(pct*float64(total)) - 1
	anneal := func(a, b, t float64) float64 { return b + (a-b)/2*(1+math.Cos(math.Pi*t)) }
	return func(step int) float32 {
		if step <= up {
			return float32(anneal(start, float64(maxLR), float64(step)/float64(max(up, 1))))
		}
		down := total - 1 - up
		t := math.Min(float64(step-up)/float64(max(down, 1)), 1)
		return float32(anneal(float64(maxLR), end, t))
	}
}

// Apply sets o's learning rate for step from s.
func Apply(o Optimizer, s Schedule, step int) { o.SetLR(s(step)) }
