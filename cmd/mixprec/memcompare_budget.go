package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/internal/train"
	"github.com/mixprec/mixprec/memplan"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/nn/models"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/tensor"
)

// memcompare's memory-budget modes: -budget-sweep (peak memory and step
// time from the smallest budget any plan fits to the peak without one,
// beside checkpointing every √n units) and -mem-budget B -verify N (issue
// 36's acceptance check for one budget).

// session is one fresh copy of a workload's model on a device: the chain
// the planner plans over, its optimiser, one step's forward pass for the
// planner's dry step, and a training step.
type session struct {
	model nn.Chain
	opt   optim.Optimizer
	loss  func(g *autograd.Graph) *autograd.Var // the step's forward pass, loss scaled
	// step takes one training step with its graph made with opts; inspect,
	// when set, runs between backward and the optimiser's step.
	step    func(opts []autograd.Option, inspect func()) (float64, error)
	release func()
}

// budgeted is a workload the budget modes can run.
type budgeted interface {
	workload
	session(dev device.Device, low dtype.DType) *session
}

func (w *classifierWorkload) session(dev device.Device, low dtype.DType) *session {
	rng := rand.New(rand.NewPCG(w.seed, 1))
	net := w.spec.Build(rng)
	nn.To(net, dev)
	opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
	scaler := amp.NewGradScaler(amp.For(low))
	x, y := classifierBatch(rng, w.spec, w.batch)
	st := &train.Step{Dev: dev, Net: net, Opt: opt, Scaler: scaler, Low: low}
	return &session{model: net, opt: opt,
		loss: func(g *autograd.Graph) *autograd.Var { return scaler.Scale(g, st.Loss(g, x, y)) },
		step: func(opts []autograd.Option, inspect func()) (float64, error) {
			st.Options, st.Sync = opts, nil
			if inspect != nil {
				st.Sync = func() error { inspect(); return nil } // Sync runs between backward and the step
			}
			return st.Run(x, y)
		},
		release: func() { optim.Release(opt); nn.Release(net) }}
}

// classifierBatch is the synthetic batch memcompare trains a classifier
// on.
func classifierBatch(rng *rand.Rand, spec models.Spec, batch int) (tensor.Host, []int32) {
	x := tensor.NormalHost(rng, 0, 1, append([]int{batch}, spec.Input...)...)
	y := make([]int32, batch)
	for i := range y {
		y[i] = int32(rng.IntN(spec.Classes))
	}
	return x, y
}

func (w *gptWorkload) session(dev device.Device, low dtype.DType) *session {
	r := w.newRun(dev, low)
	return &session{model: r.m, opt: r.opt,
		loss: func(g *autograd.Graph) *autograd.Var { return r.scaler.Scale(g, r.loss(g, w, low)) },
		step: func(opts []autograd.Option, inspect func()) (float64, error) {
			g := autograd.NewGraph(dev, opts...)
			defer g.Release()
			l := r.loss(g, w, low)
			g.Backward(r.scaler.Scale(g, l))
			if inspect != nil {
				inspect()
			}
			if err := r.update(); err != nil {
				return 0, err
			}
			return float64(l.Value.Item()), nil
		},
		release: r.release}
}

// profileOf measures a fresh session's step for the planner; release
// frees the session once planning is done (planning may take a second dry
// step on it: memplan.Profile.Bounded).
func profileOf(dev device.Device, w budgeted, low dtype.DType) (p *memplan.Profile, release func(), err error) {
	s := w.session(dev, low)
	p, err = memplan.Measure(memplan.Config{Dev: dev, Model: s.model, Loss: s.loss, Optim: s.opt})
	if err != nil {
		s.release()
		return nil, nil, err
	}
	return p, s.release, nil
}

// runPlan trains a fresh session under pl (nil: no plan) for one warm-up
// step and steps timed steps, and returns the peak over all of them (the
// first step allocates the optimiser's state) and the median step time.
func runPlan(dev device.Device, w budgeted, low dtype.DType, pl *memplan.Plan, steps int, bar *cli.Progress) (int64, float64, error) {
	s := w.session(dev, low)
	defer s.release()
	if pl != nil {
		pl.Apply(s.model)
	}
	if err := dev.Sync(); err != nil {
		return 0, 0, err
	}
	dev.ResetPeak()
	var times []float64
	for i := range steps + 1 {
		t0 := time.Now()
		if _, err := s.step(pl.Options(), nil); err != nil {
			return 0, 0, err
		}
		if err := dev.Sync(); err != nil {
			return 0, 0, err
		}
		if i > 0 {
			times = append(times, float64(time.Since(t0).Microseconds())/1000)
		}
		bar.Update(i+1, "")
	}
	slices.Sort(times)
	return dev.MemStats().Peak.Total, times[len(times)/2], nil
}

// sweepRow is one line of the sweep: a plan for a budget, or another
// choice, with what the planner predicted and what a training run
// measured.
type sweepRow struct {
	Config     string    `json:"config"`       // "unconstrained", "plan", "every √n units", "every block"
	Budget     *int64    `json:"budget_bytes"` // null for the choices made without one
	Predicted  int64     `json:"predicted_peak_bytes"`
	Peak       int64     `json:"peak_bytes"`
	Error      cli.Float `json:"predicted_error"` // (predicted - measured) / measured
	StepMillis cli.Float `json:"step_ms"`
	TimeRatio  cli.Float `json:"time_ratio"`         // to the unconstrained row
	Overhead   cli.Float `json:"predicted_overhead"` // the plan's predicted step-time overhead
	Recomputed string    `json:"recomputed"`         // the spans of units recomputed, "" for none
	ConvChunk  bool      `json:"conv_chunk_bounded,omitempty"`
}

type sweepReport struct {
	Model   string     `json:"model"`
	Device  string     `json:"device"`
	AMP     string     `json:"amp"`
	Batch   int        `json:"batch"`
	Steps   int        `json:"steps"`
	Units   int        `json:"units"`
	Minimum int64      `json:"minimum_budget_bytes"`
	Rows    []sweepRow `json:"rows"`
}

// spansText writes spans as the plan's table names them: "0-2 5 7-9".
func spansText(spans []nn.Span) string {
	var parts []string
	for _, s := range spans {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, " ")
}

// choiceOf is a row of the sweep: a plan, or another choice of spans as
// a plan.
type choiceOf struct {
	name string
	plan *memplan.Plan
}

// planSweep makes the sweep's rows from p: the unconstrained step, plans
// for points budgets from the smallest any plan fits to the unconstrained
// peak, checkpointing every √n units and, for the GPT, every block.
func planSweep(p *memplan.Profile, model string, points int) ([]choiceOf, error) {
	n := len(p.Units)
	minPlan, _, err := p.Minimum()
	if err != nil {
		return nil, err
	}
	unconstrained := p.Unconstrained
	spansPlan := func(spans []nn.Span) (*memplan.Plan, error) { return p.PlanSpans(unconstrained, spans) }
	none, err := spansPlan(nil)
	if err != nil {
		return nil, err
	}
	choices := []choiceOf{{"unconstrained", none}}
	for i := range points {
		budget := minPlan.Budget + (unconstrained-minPlan.Budget)*int64(i)/int64(points-1)
		pl, err := p.Plan(budget)
		if err != nil {
			return nil, fmt.Errorf("planning for %s: %w", device.FormatBytes(budget), err)
		}
		choices = append(choices, choiceOf{"plan", pl})
	}
	sqrt, err := spansPlan(nn.EvenSpans(n, 0))
	if err != nil {
		return nil, err
	}
	choices = append(choices, choiceOf{"every √n units", sqrt})
	if model == "gpt" {
		var blocks []nn.Span
		for i := 0; i+1 < n; i += 2 {
			blocks = append(blocks, nn.Span{Lo: i, Hi: i + 2})
		}
		every, err := spansPlan(blocks)
		if err != nil {
			return nil, err
		}
		choices = append(choices, choiceOf{"every block", every})
	}
	return choices, nil
}

// budgetSweep measures the workload once, plans for points budgets from
// the smallest any plan fits to the unconstrained peak, and trains each
// plan, the unconstrained step and checkpointing every √n units (and, for
// the GPT, every block) for steps timed steps.
func budgetSweep(dev device.Device, w budgeted, model string, a cli.AMP, steps, points int, stderr io.Writer) (sweepReport, error) {
	low := a.DType()
	rep := sweepReport{Model: model, Device: dev.Name(), AMP: a.String(), Batch: w.batchSize(), Steps: steps}
	p, release, err := profileOf(dev, w, low)
	if err != nil {
		return rep, err
	}
	// The measured session stays until every plan is made.
	plans, err := func() ([]choiceOf, error) {
		defer release()
		return planSweep(p, model, points)
	}()
	if err != nil {
		return rep, err
	}
	rep.Units, rep.Minimum = len(p.Units), plans[1].plan.Budget
	for _, c := range plans {
		label := c.name
		if c.name == "plan" {
			label = "plan for " + device.FormatBytes(c.plan.Budget)
		}
		bar := cli.NewProgress(stderr, "memcompare "+label, steps+1)
		peak, ms, err := runPlan(dev, w, low, c.plan, steps, bar)
		bar.Done()
		if err != nil {
			return rep, fmt.Errorf("%s: %w", label, err)
		}
		row := sweepRow{Config: c.name, Predicted: c.plan.Peak, Peak: peak, Error: cli.Float(float64(c.plan.Peak-peak) / float64(peak)),
			StepMillis: cli.Float(ms), Overhead: cli.Float(c.plan.Overhead), Recomputed: spansText(c.plan.Spans), ConvChunk: c.plan.ConvChunk != 0}
		if c.name == "plan" {
			b := c.plan.Budget
			row.Budget = &b
		}
		rep.Rows = append(rep.Rows, row)
	}
	for i := range rep.Rows {
		rep.Rows[i].TimeRatio = rep.Rows[i].StepMillis / rep.Rows[0].StepMillis
	}
	return rep, nil
}

// printSweep writes the sweep as a table.
func printSweep(w io.Writer, rep sweepReport) {
	fmt.Fprintf(w, "\n%-16s %12s %12s %12s %9s %10s %7s %9s  %s\n", "config", "budget", "predicted", "peak", "pred err", "step", "ratio", "overhead", "recomputed")
	for _, r := range rep.Rows {
		budget := "-"
		if r.Budget != nil {
			budget = mib(*r.Budget)
		}
		re := r.Recomputed
		if re == "" {
			re = "nothing"
		}
		if r.ConvChunk {
			re += " (convolutions one image at a time)"
		}
		fmt.Fprintf(w, "%-16s %12s %12s %12s %+8.2f%% %7.1f ms %6.2fx %8.1f%%  %s\n", r.Config, budget, mib(r.Predicted), mib(r.Peak),
			100*float64(r.Error), float64(r.StepMillis), float64(r.TimeRatio), 100*float64(r.Overhead), re)
	}
	fmt.Fprintf(w, "\n%d units; budgets from the smallest any plan fits (%s) to the peak without one; time ratios are to the unconstrained row,\n"+
		"measured here; the predicted overhead is the planner's, from its dry step\n", rep.Units, mib(rep.Minimum))
}

// verifyReport is -verify's result: issue 36's acceptance for one budget.
type verifyReport struct {
	Model      string    `json:"model"`
	Device     string    `json:"device"`
	AMP        string    `json:"amp"`
	Batch      int       `json:"batch"`
	Steps      int       `json:"steps"`
	Budget     int64     `json:"budget_bytes"`
	Predicted  int64     `json:"predicted_peak_bytes"`
	Peak       int64     `json:"peak_bytes"`
	Error      cli.Float `json:"predicted_error"` // (predicted - measured) / measured
	Within     bool      `json:"within_budget"`
	Bitwise    bool      `json:"bitwise"` // losses, gradients and weights, step by step, those of the run without a plan
	StepMillis cli.Float `json:"step_ms"`
	PlainMs    cli.Float `json:"unconstrained_step_ms"`
	TimeRatio  cli.Float `json:"time_ratio"`
	Overhead   cli.Float `json:"predicted_overhead"`
	// Unconstrained is the run without a plan's peak, UnconstrainedPredicted
	// the planner's prediction of it.
	Unconstrained          int64  `json:"unconstrained_peak_bytes"`
	UnconstrainedPredicted int64  `json:"unconstrained_predicted_bytes"`
	Recomputed             string `json:"recomputed"`
	plan                   *memplan.Plan
}

// fingerprint is a running digest of a run: every step's loss and every
// gradient's bits, and the weights at the end.
type fingerprint struct {
	steps [][32]byte
}

// digest hashes the bits of ts.
func digest(ts ...*tensor.Tensor) [32]byte {
	h := sha256.New()
	for _, t := range ts {
		if t == nil {
			h.Write([]byte{0})
			continue
		}
		for _, v := range t.ToHost() {
			b := math.Float32bits(v)
			h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
		}
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// verifyRun trains a fresh session for n steps under pl (nil: none) and
// returns its fingerprint, its peak over the steps and the median time of
// all but the first.
func verifyRun(dev device.Device, w budgeted, low dtype.DType, pl *memplan.Plan, n int, bar *cli.Progress) (fingerprint, int64, float64, error) {
	var fp fingerprint
	s := w.session(dev, low)
	defer s.release()
	if pl != nil {
		pl.Apply(s.model)
	}
	params := s.opt.Params()
	grads := func() []*tensor.Tensor {
		out := make([]*tensor.Tensor, len(params))
		for i, p := range params {
			out[i] = p.Grad
		}
		return out
	}
	if err := dev.Sync(); err != nil {
		return fp, 0, 0, err
	}
	dev.ResetPeak()
	var times []float64
	for i := range n {
		var g [32]byte
		var hashing time.Duration
		t0 := time.Now()
		l, err := s.step(pl.Options(), func() {
			h0 := time.Now()
			g = digest(grads()...)
			hashing = time.Since(h0)
		})
		if err != nil {
			return fp, 0, 0, err
		}
		if err := dev.Sync(); err != nil {
			return fp, 0, 0, err
		}
		// The gradients' digest is taken inside the step, but its time
		// is not the step's: take it out.
		d := time.Since(t0) - hashing
		if i > 0 {
			times = append(times, float64(d.Microseconds())/1000)
		}
		lb := math.Float32bits(float32(l))
		fp.steps = append(fp.steps, sha256.Sum256(append(g[:], byte(lb), byte(lb>>8), byte(lb>>16), byte(lb>>24))))
		bar.Update(i+1, "")
	}
	var weights []*tensor.Tensor
	for _, p := range params {
		weights = append(weights, p.Value)
	}
	fp.steps = append(fp.steps, digest(weights...))
	peak := dev.MemStats().Peak.Total
	slices.Sort(times)
	ms := math.NaN()
	if len(times) > 0 {
		ms = times[len(times)/2]
	}
	return fp, peak, ms, nil
}

// verifyBudget is -mem-budget B -verify N: the workload trained N steps
// without a plan, then planned for B (one dry step) and trained N steps
// under the plan, compared.
func verifyBudget(dev device.Device, w budgeted, model string, a cli.AMP, b cli.MemBudget, n int, stderr io.Writer) (verifyReport, error) {
	low := a.DType()
	rep := verifyReport{Model: model, Device: dev.Name(), AMP: a.String(), Batch: w.batchSize(), Steps: n}
	// Planned first, so that a budget nothing fits is refused at once.
	p, release, err := profileOf(dev, w, low)
	if err != nil {
		return rep, err
	}
	budget, err := b.Budget().Resolve(dev, p)
	if err != nil {
		release()
		return rep, cli.Usagef("-mem-budget %v: %v", b, err)
	}
	pl, err := p.Plan(budget)
	release()
	var inf *memplan.InfeasibleError
	if errors.As(err, &inf) {
		return rep, cli.Usagef("-mem-budget %v: %v", b, err)
	}
	if err != nil {
		return rep, err
	}
	bar := cli.NewProgress(stderr, "memcompare without a plan", n)
	plain, plainPeak, plainMs, err := verifyRun(dev, w, low, nil, n, bar)
	bar.Done()
	if err != nil {
		return rep, err
	}
	bar = cli.NewProgress(stderr, "memcompare with the plan", n)
	planned, peak, ms, err := verifyRun(dev, w, low, pl, n, bar)
	bar.Done()
	if err != nil {
		return rep, err
	}
	rep.Budget, rep.Predicted, rep.Peak = budget, pl.Peak, peak
	rep.Error = cli.Float(float64(pl.Peak-peak) / float64(peak))
	rep.Within = peak <= budget
	rep.Bitwise = slices.Equal(plain.steps, planned.steps)
	rep.StepMillis, rep.PlainMs = cli.Float(ms), cli.Float(plainMs)
	rep.TimeRatio = cli.Float(ms / plainMs)
	rep.Overhead = cli.Float(pl.Overhead)
	rep.Unconstrained, rep.UnconstrainedPredicted = plainPeak, p.Unconstrained
	rep.Recomputed = spansText(pl.Spans)
	rep.plan = pl
	return rep, nil
}

// printVerify writes the check's lines.
func printVerify(w io.Writer, rep verifyReport, b cli.MemBudget) {
	yes := map[bool]string{true: "yes", false: "NO"}
	fmt.Fprintf(w, "\n%v\n\n", rep.plan)
	fmt.Fprintf(w, "budget            %s (-mem-budget %v)\n", mib(rep.Budget), b)
	fmt.Fprintf(w, "measured peak     %s (within the budget: %s)\n", mib(rep.Peak), yes[rep.Within])
	fmt.Fprintf(w, "predicted peak    %s (error %+.2f%% of the measured)\n", mib(rep.Predicted), 100*float64(rep.Error))
	fmt.Fprintf(w, "unconstrained     %s measured, %s predicted\n", mib(rep.Unconstrained), mib(rep.UnconstrainedPredicted))
	fmt.Fprintf(w, "bitwise           %s (every step's loss and gradients, and the final weights, over %d steps)\n", yes[rep.Bitwise], rep.Steps)
	fmt.Fprintf(w, "step time         %.1f ms planned, %.1f ms without a plan: %.2fx (predicted overhead %.1f%%), medians of steps 2-%d measured here\n",
		float64(rep.StepMillis), float64(rep.PlainMs), float64(rep.TimeRatio), 100*float64(rep.Overhead), rep.Steps)
}

// verifyFailed is the check's verdict: nil when the run held the budget,
// matched the prediction within 5% and changed no bit.
func verifyFailed(rep verifyReport) error {
	var bad []string
	if !rep.Within {
		bad = append(bad, fmt.Sprintf("the measured peak %s is over the budget %s", mib(rep.Peak), mib(rep.Budget)))
	}
	if math.Abs(float64(rep.Error)) > 0.05 {
		bad = append(bad, fmt.Sprintf("the prediction is %+.1f%% off", 100*float64(rep.Error)))
	}
	if !rep.Bitwise {
		bad = append(bad, "the run under the plan is not bitwise the run without one")
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("verification failed: %s", strings.Join(bad, "; "))
}

// budgetFlags are memcompare's flags for its budget modes, and the GPT's
// dropout.
type budgetFlags struct {
	sweep   bool
	points  int
	budget  cli.MemBudget
	verify  int
	dropout float64
}

// register defines them on fs.
func (bf *budgetFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&bf.sweep, "budget-sweep", false, "instead of the comparison: plan for memory budgets from the smallest any plan fits\n"+
		"to the peak without one (-points of them), train each plan, and compare peak memory\n"+
		"and step time, beside checkpointing every √n units; -amp is the precision (default off)")
	cli.FloatVar(fs, &bf.dropout, "dropout", 0, "dropout", true, "the gpt's dropout probability, below 1 (examples/gpt's -dropout)")
	cli.IntVar(fs, &bf.points, "points", 8, 2, 64, "budgets in -budget-sweep")
	fs.Var(&bf.budget, "mem-budget", "with -verify: the budget to check (512MiB, 1.5GiB, 800MB, 0.8 of free memory,\n0.6x of the unconstrained peak)")
	cli.IntVar(fs, &bf.verify, "verify", 0, 0, 1<<20, "instead of the comparison: train N steps without a plan and N under -mem-budget's,\n"+
		"and print the acceptance check (measured peak against the budget and the prediction,\n"+
		"bitwise equality, step time ratio); exits 1 when it fails; -amp is the precision (default off)")
}

// check refuses the combinations that cannot work, given the model, the
// -amp, -profile and -png of the command line.
func (bf *budgetFlags) check(fs *flag.FlagSet, model string, low cli.AMP, prof bool, png string) error {
	budgetMode := bf.sweep || bf.verify > 0
	switch {
	case bf.sweep && (bf.verify > 0 || bf.budget.On()):
		return cli.Usagef("-budget-sweep chooses its own budgets: it takes neither -verify nor -mem-budget")
	case bf.verify > 0 && !bf.budget.On():
		return cli.Usagef("-verify %d needs -mem-budget, the budget to check", bf.verify)
	case bf.budget.On() && bf.verify == 0:
		return cli.Usagef("-mem-budget %v needs -verify N (or use -budget-sweep)", bf.budget)
	case budgetMode && isSet(fs, "checkpoint"):
		return cli.Usagef("-checkpoint is the comparison's: the budget modes plan the checkpointing themselves")
	case budgetMode && prof:
		return cli.Usagef("-profile is the comparison's: the budget modes take none")
	case bf.verify > 0 && png != "":
		return cli.Usagef("-png draws the comparison or -budget-sweep, not -verify")
	case bf.dropout >= 1 || (isSet(fs, "dropout") && model != "gpt"):
		return cli.Usagef("-dropout %v: the gpt's dropout, a probability below 1", bf.dropout)
	case !budgetMode && isSet(fs, "points"):
		return cli.Usagef("-points is -budget-sweep's")
	case !budgetMode && !low.On():
		return cli.Usagef("-amp %v: the comparison's AMP + checkpointing column needs f16 or bf16", low)
	}
	return nil
}

// budgetModes runs -budget-sweep or -verify and reports.
func budgetModes(w budgeted, model string, a cli.AMP, bf budgetFlags, steps int, png string, asJSON bool,
	dev device.Device, note string, stdout, stderr io.Writer) error {
	b, verify, points, sweep := bf.budget, bf.verify, bf.points, bf.sweep
	// The report is written once everything is measured, so that a
	// budget nothing fits leaves standard output empty.
	header := func(mode string) {
		fmt.Fprintf(stdout, "memcompare: model %s, batch %d, amp %v, device %s, synthetic inputs: %s\n", model, w.batchSize(), a, dev.Name(), mode)
		if note != "" {
			fmt.Fprintf(stdout, "(CUDA not used: %s)\n", note)
		}
	}
	if !sweep {
		rep, err := verifyBudget(dev, w, model, a, b, verify, stderr)
		if err != nil {
			return err
		}
		if asJSON {
			if err := cli.PrintJSON(stdout, rep); err != nil {
				return err
			}
		} else {
			header(fmt.Sprintf("-mem-budget %v checked over %d steps", b, verify))
			printVerify(stdout, rep, b)
		}
		return verifyFailed(rep)
	}
	rep, err := budgetSweep(dev, w, model, a, steps, points, stderr)
	if err != nil {
		return err
	}
	if png != "" {
		if err := drawSweep(png, rep); err != nil {
			return err
		}
	}
	if asJSON {
		return cli.PrintJSON(stdout, rep)
	}
	header(fmt.Sprintf("a budget sweep over %d budgets, %d timed steps each", points, steps))
	printSweep(stdout, rep)
	if png != "" {
		fmt.Fprintf(stdout, "chart written to %s\n", png)
	}
	return nil
}
