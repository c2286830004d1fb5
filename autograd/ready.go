package autograd

// OnGradReady calls fn with each parameter as soon as Backward has
// finished its gradient, while the rest of backward is still running: what
// data-parallel training needs to start averaging gradients early. A
// parameter's gradient is complete once every op on the tape that read it
// has passed its gradient back, so the graph counts each parameter's uses
// as ops are recorded and its gradients as they arrive. Parameters whose
// uses cannot all be seen on this tape (any inside a Checkpoint segment,
// which recomputes on a tape of its own) are reported when backward ends,
// as is any other parameter that got no call yet; each is reported at most
// once per graph, every parameter the graph used (inside segments too).
// Call it before the
// forward pass; fn runs on the goroutine that called Backward.
func (g *Graph) OnGradReady(fn func(p *Var)) {
	g.check()
	g.enter()
	defer g.leave()
	if len(g.tape) > 0 {
		panic("autograd.OnGradReady: call it before recording operations")
	}
	g.ready = &readiness{fn: fn, uses: map[*Var]int{}, got: map[*Var]int{}}
}

// readiness is OnGradReady's bookkeeping. Its methods do nothing on a nil
// receiver, which is a graph without a hook.
type readiness struct {
	fn      func(*Var)
	uses    map[*Var]int // ops recorded that read the parameter
	got     map[*Var]int // gradients accumulated into it
	order   []*Var       // parameters in order of first use
	done    map[*Var]bool
	defered bool // some uses are off the tape: report everything at the end
	parent  *readiness
}

// forRecompute is the readiness of a checkpointed segment's recomputation:
// it adds the parameters the segment uses to the graph's list, which
// reports them when the graph's backward ends.
func (r *readiness) forRecompute() *readiness {
	if r == nil {
		return nil
	}
	return &readiness{parent: r}
}

func (r *readiness) count(in []*Var) {
	if r == nil {
		return
	}
	if r.parent != nil {
		r.parent.count(in)
		return
	}
	for _, v := range in {
		if v != nil && v.param {
			if r.uses[v] == 0 {
				r.order = append(r.order, v)
			}
			r.uses[v]++
		}
	}
}

func (r *readiness) uncertain() {
	if r != nil {
		r.defered = true
	}
}

func (r *readiness) arrived(v *Var) {
	if r == nil || r.defered || r.parent != nil {
		return
	}
	r.got[v]++
	if r.got[v] == r.uses[v] {
		r.report(v)
	}
}

func (r *readiness) report(v *Var) {
	if r.done == nil {
		r.done = map[*Var]bool{}
	}
	if !r.done[v] {
		r.done[v] = true
		r.fn(v)
	}
}

// finish reports, at the end of backward, every used parameter not yet
// reported, in reverse order of first use (the order backward reaches them).
func (r *readiness) finish() {
	if r == nil || r.parent != nil {
		return
	}
	for i := len(r.order) - 1; i >= 0; i-- {
		r.report(r.order[i])
	}
}
