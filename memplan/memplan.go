// Package memplan fits a training step into a memory budget: it chooses
// which parts of a model to recompute during backward (gradient
// checkpointing) so that the step's peak memory is at most the budget,
// with the least recomputation, and says so before the first step.
//
// Checkpointing by hand means guessing which layers to checkpoint and
// learning from an out-of-memory crash that the guess was wrong. mixprec
// accounts every byte it allocates (device.MemStats) and recomputes
// bitwise, so the guess can be a measurement instead:
//
//   - Measure takes one dry step at the real batch shape with every unit
//     of the model's chain (an nn.Chain: layers, residual blocks, a
//     transformer block's attention and MLP halves) checkpointed on its
//     own, and reads the device's accounting around each unit's first run,
//     its recomputation and its backward pass: what each unit keeps, what
//     its output alone costs, what its backward pass needs on top, how
//     long it takes to recompute, and the memory that no choice changes
//     (parameters, gradients, optimiser state as it will be after its
//     first step, autocast's weight copies, the largest workspace).
//   - From those figures the profile estimates the peak of a step under
//     any choice of spans to recompute (Profile.Estimate; see model.go):
//     kept bytes add up, and a recomputed span's activations come back,
//     all at once, for its backward pass. The estimate errs high where a
//     step frees values early (autograd.Graph.Free), which is what lets
//     it guide a search without ever promising too little.
//   - Profile.Plan searches the choices (a label-setting dynamic
//     programme over the chain) for the one with the least recomputation
//     time whose estimated peak fits, measures that choice's peak with a
//     dry step of its own (Profile.Peak: exact on the device it ran on,
//     since a step's allocations do not depend on the values), and
//     searches again against a budget corrected by the measurement, a few
//     times; the cheapest choice measured within the budget is the Plan,
//     to print, inspect and apply (Plan.Apply). A budget nothing fits is
//     an *InfeasibleError naming the smallest that does and what it is
//     made of. Where convolutions' scratch is what does not fit, a second
//     dry step measures the step with it bounded (autograd.ConvChunk) and
//     plans with that.
//   - Plan.FitEval fits the program's evaluation into the budget too: a
//     forward pass without gradients between steps, often in batches
//     larger than training's, measured at the program's batch and at
//     halves of it until one fits beside the training state.
//   - A Monitor holds training to the plan: a step, or an evaluation,
//     whose measured peak goes over the budget is reported, so that the
//     program stops and saves before it runs out of memory.
//
// Recomputation changes no number: losses and gradients under any plan
// are bitwise those of the step without one.
package memplan
