package profile

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mixprec/mixprec/datasets"
	"github.com/mixprec/mixprec/device"
)

// DefaultTraceSteps is how many steps a trace holds unless Trace says
// otherwise: enough to see a steady state, few enough that Perfetto opens
// the file at once (about 25 events per MLP step, 150 per CNN step).
const DefaultTraceSteps = 100

// Trace makes the profiler keep a timeline of its first steps (at most
// steps of them; DefaultTraceSteps when steps <= 0) for WriteTrace.
func Trace(steps int) Option {
	if steps <= 0 {
		steps = DefaultTraceSteps
	}
	return func(p *Profiler) { p.tr = &tracer{limit: steps} }
}

// Tracks of the trace: the training loop, the device's stream, and one per
// loader worker from workerTID on (the loop's own goroutine, when it
// builds batches, is worker -1).
const (
	loopTID   = 1
	streamTID = 2
	workerTID = 11
)

// tracer keeps the events of the steps being traced.
type tracer struct {
	limit  int
	on     bool // tracing the step in progress
	mark   int  // len(events) when the step began
	events []tevent
	mem    []tmem
	last   [device.NumCategories]int64 // the memory counters last written
	stream bool                        // some events are on the device's track

	loader  atomic.Bool // loader events are wanted now
	mu      sync.Mutex  // guards workers, which loader workers append to
	workers []tworker
}

// tevent is a complete event: row id (or stepID) from start for dur
// nanoseconds on track tid.
type tevent struct {
	id         int
	tid        int
	start, dur int64
	step       int
}

const stepID = -1

type tmem struct {
	ts   int64
	live [device.NumCategories]int64
}

type tworker struct {
	worker, batch int
	start, end    int64
}

func (t *tracer) startStep(k int) {
	t.on = k < t.limit
	t.mark = len(t.events)
	t.loader.Store(t.on)
}

// span records row id's work from start to now on the loop's track, and
// the memory in use when it ended.
func (t *tracer) span(p *Profiler, id int, start, now int64) {
	if !t.on {
		return
	}
	t.events = append(t.events, tevent{id: id, tid: loopTID, start: start, dur: now - start})
	live := p.dev.MemStats().Live.ByCategory
	if live != t.last || len(t.mem) == 0 {
		t.last = live
		t.mem = append(t.mem, tmem{now, live})
	}
}

func (t *tracer) device(id int, start, dur int64) {
	if t.on {
		t.events = append(t.events, tevent{id: id, tid: streamTID, start: start, dur: dur})
		t.stream = true
	}
}

func (t *tracer) endStep(k int, start, now int64) {
	if t.on {
		t.events = append(t.events, tevent{id: stepID, tid: loopTID, start: start, dur: now - start, step: k})
	}
	if k+1 >= t.limit {
		t.loader.Store(false)
	}
}

// dropStep forgets the events of a step that was not counted.
func (t *tracer) dropStep() {
	if t.on {
		t.events = t.events[:t.mark]
	}
}

// Loader is the datasets option that puts the loader's workers on the
// trace, one track each: pass it to datasets.Batches. Without a trace it
// does nothing.
func (p *Profiler) Loader() datasets.Option {
	if p == nil || p.tr == nil {
		return datasets.OnFill(nil)
	}
	t0 := p.t0
	return datasets.OnFill(func(worker, batch int, start, end time.Time) {
		t := p.tr
		if !t.loader.Load() {
			return
		}
		t.mu.Lock()
		t.workers = append(t.workers, tworker{worker, batch, int64(start.Sub(t0)), int64(end.Sub(t0))})
		t.mu.Unlock()
	})
}

// WriteTrace writes the trace as Chrome Trace Event JSON, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: a complete event per step
// and per op or part on the training loop's track, the device time of
// each interval on a track for the device's stream (asynchronous devices
// only; placed in stream order from when the host queued it), a track per
// loader worker with an event per batch built, and the bytes in use by
// category as counters. Times are microseconds from the profiler's
// creation. It is an error to call it on a profiler made without Trace.
func (p *Profiler) WriteTrace(w io.Writer) error {
	if p == nil || p.tr == nil {
		return fmt.Errorf("profile: WriteTrace on a profiler made without Trace")
	}
	t := p.tr
	t.mu.Lock()
	workers := append([]tworker(nil), t.workers...)
	t.mu.Unlock()

	bw := bufio.NewWriter(w)
	first := true
	emit := func(format string, a ...any) {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		fmt.Fprintf(bw, format, a...)
	}
	bw.WriteString(`{"displayTimeUnit":"ms","otherData":{"device":` + strconv.Quote(p.dev.Name()) +
		`,"steps_traced":` + strconv.Itoa(min(p.steps, t.limit)) + `},"traceEvents":[` + "\n")
	meta := func(tid int, name string) {
		emit(`{"name":"thread_name","ph":"M","pid":1,"tid":%d,"args":{"name":%s}}`, tid, strconv.Quote(name))
		emit(`{"name":"thread_sort_index","ph":"M","pid":1,"tid":%d,"args":{"sort_index":%d}}`, tid, tid)
	}
	emit(`{"name":"process_name","ph":"M","pid":1,"args":{"name":"mixprec"}}`)
	meta(loopTID, "training loop")
	if t.stream {
		meta(streamTID, p.dev.Name()+" stream")
	}
	named := map[int]bool{}
	for _, wk := range workers {
		if !named[wk.worker] {
			named[wk.worker] = true
			name := "loader worker " + strconv.Itoa(wk.worker)
			if wk.worker < 0 {
				name = "loader (in the training loop)"
			}
			meta(workerTID+wk.worker, name)
		}
	}
	for _, e := range t.events {
		if e.id == stepID {
			emit(`{"name":"step %d","cat":"step","ph":"X","pid":1,"tid":%d,"ts":%s,"dur":%s,"args":{"step":%d}}`,
				e.step+1, e.tid, us(e.start), us(e.dur), e.step+1)
			continue
		}
		op, phase := p.names(e.id)
		name, cat := op, phase
		switch {
		case e.id >= p.partID(0):
			cat = "part"
		case phase != "forward":
			name += " " + phase
		}
		emit(`{"name":%s,"cat":%s,"ph":"X","pid":1,"tid":%d,"ts":%s,"dur":%s,"args":{"op":%s,"phase":%s}}`,
			strconv.Quote(name), strconv.Quote(cat), e.tid, us(e.start), us(e.dur), strconv.Quote(op), strconv.Quote(phase))
	}
	for _, wk := range workers {
		emit(`{"name":"batch %d","cat":"loader","ph":"X","pid":1,"tid":%d,"ts":%s,"dur":%s,"args":{"batch":%d}}`,
			wk.batch, workerTID+wk.worker, us(wk.start), us(wk.end-wk.start), wk.batch)
	}
	for _, m := range t.mem {
		var args []byte
		for c := device.Category(0); c < device.NumCategories; c++ {
			if c > 0 {
				args = append(args, ',')
			}
			args = strconv.AppendQuote(args, c.String())
			args = append(args, ':')
			args = strconv.AppendInt(args, m.live[c], 10)
		}
		emit(`{"name":"memory bytes","ph":"C","pid":1,"ts":%s,"args":{%s}}`, us(m.ts), args)
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// us formats nanoseconds as the trace's microseconds.
func us(ns int64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64) }
