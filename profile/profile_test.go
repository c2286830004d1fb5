package profile_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/amp"
	"github.com/mixprec/mixprec/autograd"
	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/nn"
	"github.com/mixprec/mixprec/optim"
	"github.com/mixprec/mixprec/profile"
)

// tee passes a graph's events on to the profiler and notes which op ran in
// which phase, independently of the profiler's own books.
type tee struct {
	p   *profile.Profiler
	ran map[string]bool // "op phase"
}

func (t *tee) OpStart(op autograd.Op, ph autograd.Phase) { t.p.OpStart(op, ph) }
func (t *tee) OpEnd(op autograd.Op, ph autograd.Phase) {
	t.ran[op.String()+" "+ph.String()] = true
	t.p.OpEnd(op, ph)
}

// setup is a small training run: a model, its data, an optimiser and the
// autocast dtype.
type setup struct {
	name     string
	build    func(rng *rand.Rand) *nn.Sequential
	shape    []int
	low      dtype.DType
	segments int
}

var setups = []setup{
	{"mlp", func(rng *rand.Rand) *nn.Sequential {
		return nn.NewSequential(nn.NewLinear(784, 256, rng), nn.ReLU(), nn.NewLinear(256, 10, rng))
	}, []int{784}, dtype.F32, 0},
	{"mlp f16 checkpointed", func(rng *rand.Rand) *nn.Sequential {
		return nn.NewSequential(nn.NewLinear(256, 128, rng), nn.ReLU(), nn.NewLinear(128, 64, rng), nn.Tanh(), nn.NewLinear(64, 10, rng))
	}, []int{256}, dtype.F16, 2},
	{"cnn bf16", func(rng *rand.Rand) *nn.Sequential {
		return nn.NewSequential(nn.NewConv2d(1, 4, 3, rng, nn.Padding(1)), nn.ReLU(), nn.MaxPool2d(2),
			nn.Flatten(), nn.NewLinear(4*6*6, 10, rng))
	}, []int{1, 12, 12}, dtype.BF16, 0},
}

// train runs steps steps of s, profiled by p through obs (p itself, or a
// tee), and returns the wall time of the steps as the test measured it:
// from before the loop to the end of the last step's body (the loader's
// shutdown after the last batch is no step's).
func train(t *testing.T, s setup, p *profile.Profiler, obs autograd.Observer, steps int, opts ...datasets.Option) time.Duration {
	t.Helper()
	dev := cpu.New()
	rng := rand.New(rand.NewPCG(1, 2))
	net := s.build(rng)
	nn.To(net, dev)
	defer nn.Release(net)
	opt := optim.NewSGD(net.Params(), optim.LR(0.01), optim.Momentum(0.9))
	defer optim.Release(opt)
	scaler := amp.NewGradScaler(amp.For(s.low))
	data := datasets.Synthetic(steps*32, s.shape, 10, 3)
	// A collection due now would otherwise land between the test's clock
	// and the first step: time that is no step's, milliseconds of it on a
	// loaded machine.
	runtime.GC()
	start := time.Now()
	var end time.Time
	for b := range p.Steps(datasets.Batches(data, 32, append(opts, p.Loader())...)) {
		g := autograd.NewGraph(dev, autograd.WithObserver(obs))
		if s.low != dtype.F32 {
			amp.Autocast(g, s.low)
		}
		x := g.Input(b.X)
		var logits *autograd.Var
		if s.segments > 0 {
			logits = nn.CheckpointSequential(g, net.Layers, s.segments, x)
		} else {
			logits = net.Forward(g, x)
		}
		loss := nn.CrossEntropy(g, logits, b.Y)
		g.Backward(scaler.Scale(g, loss))
		if err := p.Phase(profile.Unscale, func() error { return scaler.Unscale(opt) }); err != nil {
			t.Fatal(err)
		}
		if err := p.Phase(profile.Optim, func() error { _, err := scaler.Step(opt); return err }); err != nil {
			t.Fatal(err)
		}
		if err := scaler.Update(); err != nil {
			t.Fatal(err)
		}
		opt.ZeroGrad()
		loss.Value.Item()
		g.Release()
		end = time.Now()
	}
	return end.Sub(start)
}

// TestPartsSumToStepTime trains small models with the profiler on and
// checks that its rows add up to the wall time of the steps, which the
// test measures around the loop, within 2%; that every step is counted;
// and that each op and part was called as often as the model calls it.
func TestPartsSumToStepTime(t *testing.T) {
	const steps = 40
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			p := profile.New(cpu.New())
			wall := train(t, s, p, p, steps)
			if p.StepCount() != steps {
				t.Fatalf("%d steps profiled, want %d", p.StepCount(), steps)
			}
			var sum float64
			calls := map[string]int{}
			for _, r := range p.Rows() {
				if r.Ms < 0 {
					t.Errorf("row %s %s: %v ms", r.Name, r.Phase, r.Ms)
				}
				sum += r.Ms
				calls[r.Name+" "+r.Phase] = r.Calls
			}
			steps := p.Elapsed().Seconds() * 1e3
			if math.Abs(sum-steps) > 1e-6*steps {
				t.Errorf("rows add up to %.6f ms, the steps took %.6f ms", sum, steps)
			}
			wallMs := wall.Seconds() * 1e3
			t.Logf("rows %.3f ms, loop %.3f ms (%.2f%% apart)", sum, wallMs, 100*(wallMs-sum)/wallMs)
			if math.Abs(sum-wallMs) > 0.02*wallMs {
				t.Errorf("rows add up to %.3f ms, the loop took %.3f ms by the test's clock: more than 2%% apart", sum, wallMs)
			}
			perStep := map[string]int{"data wait": 1, "optimizer step": 1, "unscale step": 1, "host overhead": 1,
				"cross_entropy forward": 1, "cross_entropy backward": 1}
			switch s.name {
			case "mlp":
				perStep["linear forward"], perStep["linear backward"] = 2, 2
				perStep["relu forward"], perStep["relu backward"] = 1, 1
			case "mlp f16 checkpointed":
				// A segment's first forward runs without a record, inside its
				// checkpoint row; backward recomputes its ops one by one
				// (recompute) and then runs their backward functions.
				perStep["checkpoint forward"], perStep["checkpoint backward"] = 2, 2
				perStep["linear recompute"], perStep["linear backward"] = 3, 3
				perStep["relu recompute"], perStep["relu backward"] = 1, 1
				perStep["tanh recompute"], perStep["tanh backward"] = 1, 1
				perStep["cast recompute"] = 6                              // the three layers' weights and biases, cast again
				perStep["cast backward"] = 3                               // the biases (the weights' gradients go straight to F32: device.NarrowGemmer; F32 cross-entropy reads the F16 logits as they are)
				perStep["scale forward"], perStep["scale backward"] = 1, 1 // the loss scaler's, for F16
			case "cnn bf16":
				perStep["conv forward"], perStep["conv backward"] = 1, 1
				perStep["max_pool forward"], perStep["max_pool backward"] = 1, 1
				perStep["relu forward"], perStep["relu backward"] = 1, 1
				perStep["reshape forward"], perStep["reshape backward"] = 1, 1
				perStep["linear forward"], perStep["linear backward"] = 1, 1
				perStep["cast forward"], perStep["cast backward"] = 4, 3 // the four parameters (the linear weight's gradient goes straight to F32; F32 cross-entropy reads the BF16 logits as they are)
			}
			for k, n := range perStep {
				if calls[k] != n*p.StepCount() {
					t.Errorf("%s: %d calls, want %d per step over %d steps", k, calls[k], n, p.StepCount())
				}
			}
			for k := range calls {
				if _, ok := perStep[k]; !ok {
					t.Errorf("unexpected row %s (%d calls)", k, calls[k])
				}
			}
			sum2 := p.Summary()
			if tot := sum2.ComputePct + sum2.DataPct + sum2.OverheadPct; math.Abs(tot-100) > 1e-6 {
				t.Errorf("summary shares add up to %v%%, want 100%%", tot)
			}
		})
	}
}

// traceFile is what a test reads of a Chrome trace.
type traceFile struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Cat  string         `json:"cat"`
		Tid  int            `json:"tid"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	OtherData map[string]any `json:"otherData"`
}

// TestTrace writes the trace of a few steps of each setup and reads it
// back as JSON: an event for every op that ran in every phase it ran in,
// one per traced step (no more than asked for), every op inside its step
// on the loop's track, a named track per loader worker with its batches,
// and memory counters for every category.
func TestTrace(t *testing.T) {
	const steps, traced = 8, 5
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			p := profile.New(cpu.New(), profile.Trace(traced))
			ran := &tee{p: p, ran: map[string]bool{}}
			train(t, s, p, ran, steps, datasets.Workers(2))
			var buf bytes.Buffer
			if err := p.WriteTrace(&buf); err != nil {
				t.Fatal(err)
			}
			var tf traceFile
			if err := json.Unmarshal(buf.Bytes(), &tf); err != nil {
				t.Fatalf("the trace is not JSON: %v\n%.500s", err, buf.String())
			}
			threads := map[int]string{}
			type span struct{ ts, end float64 }
			var stepSpans []span
			opsSeen := map[string]bool{}
			var ops []span
			workerBatches := map[int]int{}
			memory := 0
			for _, e := range tf.TraceEvents {
				switch {
				case e.Ph == "M" && e.Name == "thread_name":
					threads[e.Tid] = fmt.Sprint(e.Args["name"])
				case e.Ph == "X" && e.Cat == "step":
					stepSpans = append(stepSpans, span{e.Ts, e.Ts + e.Dur})
				case e.Ph == "X" && e.Cat == "loader":
					workerBatches[e.Tid]++
				case e.Ph == "X":
					opsSeen[fmt.Sprint(e.Args["op"], " ", e.Args["phase"])] = true
					if e.Dur < 0 {
						t.Errorf("event %s has duration %v", e.Name, e.Dur)
					}
					ops = append(ops, span{e.Ts, e.Ts + e.Dur})
				case e.Ph == "C":
					memory++
					for c := device.Category(0); c < device.NumCategories; c++ {
						if _, ok := e.Args[c.String()]; !ok {
							t.Fatalf("memory counter without %s: %v", c, e.Args)
						}
					}
				}
			}
			if len(stepSpans) != traced {
				t.Errorf("%d step events, want %d (the first %d of %d steps)", len(stepSpans), traced, traced, steps)
			}
			for k := range ran.ran {
				if !opsSeen[k] {
					t.Errorf("%s ran but has no event in the trace", k)
				}
			}
			for _, want := range []string{"data wait", "optimizer step", "unscale step"} {
				if !opsSeen[want] {
					t.Errorf("no %s event", want)
				}
			}
			for _, o := range ops {
				if !slices.ContainsFunc(stepSpans, func(s span) bool { return o.ts >= s.ts && o.end <= s.end+0.001 }) {
					t.Errorf("an event at %v-%v µs lies in no step", o.ts, o.end)
					break
				}
			}
			if threads[1] != "training loop" {
				t.Errorf("track 1 is %q, want the training loop", threads[1])
			}
			// Which worker builds which batch is up to the scheduler: each
			// track with batches must be a named worker's.
			built := 0
			for tid, n := range workerBatches {
				if w := tid - 11; w < 0 || w >= 2 || threads[tid] != fmt.Sprint("loader worker ", w) {
					t.Errorf("%d batches on track %d, named %q; want loader worker 0 or 1", n, tid, threads[tid])
				}
				built += n
			}
			if built < traced {
				t.Errorf("%d batches on the loader tracks, want at least the %d traced steps'", built, traced)
			}
			if memory == 0 {
				t.Errorf("no memory counters")
			}
			if tf.OtherData["steps_traced"] != float64(traced) {
				t.Errorf("otherData %v, want steps_traced %d", tf.OtherData, traced)
			}
		})
	}
}

// TestTable checks the table's header, one line per row and the summary's
// three lines.
func TestTable(t *testing.T) {
	p := profile.New(cpu.New())
	train(t, setups[0], p, p, 5)
	var b strings.Builder
	if err := p.Table(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if want := len(p.Rows()) + 6; len(lines) != want {
		t.Errorf("%d lines, want %d (title, header, %d rows, total, 3 summary lines):\n%s", len(lines), want, len(p.Rows()), out)
	}
	for _, want := range []string{"profile: 5 steps on cpu", "op ", "phase", "calls", "total ms", "% step", "mean µs",
		"linear", "forward", "backward", "optimizer", "data", "host", "total", "Compute time (cpu): ", "Data loading time: ", "Host overhead: "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var empty strings.Builder
	profile.New(cpu.New()).Table(&empty)
	if !strings.Contains(empty.String(), "no steps") {
		t.Errorf("table of nothing: %q", empty.String())
	}
}

// TestReportJSON checks the JSON the programs' summaries carry.
func TestReportJSON(t *testing.T) {
	p := profile.New(cpu.New())
	train(t, setups[0], p, p, 3)
	b, err := json.Marshal(p.Report())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Summary map[string]any `json:"summary"`
		Ops     []struct {
			Name  string   `json:"name"`
			Phase string   `json:"phase"`
			Calls int      `json:"calls"`
			Ms    *float64 `json:"ms"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"compute_pct", "data_pct", "overhead_pct", "steps", "step_ms"} {
		if _, ok := got.Summary[k]; !ok {
			t.Errorf("summary lacks %s: %s", k, b)
		}
	}
	if len(got.Ops) == 0 || got.Ops[0].Name == "" || got.Ops[0].Phase == "" || got.Ops[0].Calls == 0 || got.Ops[0].Ms == nil {
		t.Errorf("ops: %s", b)
	}
}
