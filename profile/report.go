package profile

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// Row is one line of the profile: an op in a phase, a part of the step, or
// the host's overhead.
type Row struct {
	Name  string `json:"name"`  // the op ("linear"), the part ("optimizer", "data") or "host"
	Phase string `json:"phase"` // forward, backward, recompute; step or wait for parts; overhead
	Calls int    `json:"calls"`
	// Ms is the wall time on the host, in milliseconds.
	Ms float64 `json:"ms"`
	// DeviceMs is the time on an asynchronous device (a GPU), measured
	// with its markers; absent on the CPU.
	DeviceMs float64 `json:"device_ms,omitempty"`
}

// Summary is the profile in three figures, each a share of the steps'
// wall time: compute (ops, the optimiser's step and the scaler's unscale),
// data loading (the wait for batches) and overhead (the rest, the host's
// own work), plus communication when a data-parallel run waited for it.
type Summary struct {
	Steps       int     `json:"steps"`
	StepMs      float64 `json:"step_ms"` // mean wall time of a step
	ComputePct  float64 `json:"compute_pct"`
	DataPct     float64 `json:"data_pct"`
	OverheadPct float64 `json:"overhead_pct"`
	CommPct     float64 `json:"comm_pct,omitempty"`
	// DeviceTime says compute is the device's time: on a GPU the host
	// only queues the work, so the share of the step the device was busy
	// with it is what counts, and overhead is what neither explains.
	DeviceTime bool `json:"device_time,omitempty"`
}

// Report is the profile as the programs' JSON summaries carry it.
type Report struct {
	Summary Summary `json:"summary"`
	Ops     []Row   `json:"ops"`
}

// Rows returns a row for every op, part and the overhead that took time or
// calls, longest first (by device time where there is one).
func (p *Profiler) Rows() []Row {
	if p == nil {
		return nil
	}
	var rows []Row
	dev := p.dt != nil
	for id, r := range p.rows {
		if r.calls == 0 && r.ns == 0 && r.devNs == 0 {
			continue
		}
		name, phase := p.names(id)
		calls := r.calls
		if id == p.overheadID() {
			calls = p.steps
		}
		row := Row{Name: name, Phase: phase, Calls: calls, Ms: float64(r.ns) / 1e6}
		if dev {
			row.DeviceMs = float64(r.devNs) / 1e6
		}
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if dev && rows[i].DeviceMs != rows[j].DeviceMs {
			return rows[i].DeviceMs > rows[j].DeviceMs
		}
		return rows[i].Ms > rows[j].Ms
	})
	return rows
}

// Summary returns the profile's three figures.
func (p *Profiler) Summary() Summary {
	if p == nil || p.steps == 0 {
		return Summary{}
	}
	s := Summary{Steps: p.steps, StepMs: float64(p.total) / 1e6 / float64(p.steps), DeviceTime: p.dt != nil && p.dt.err == nil}
	total := float64(p.total)
	var compute, data, comm, overhead int64
	for id, r := range p.rows {
		ns := r.ns
		if s.DeviceTime && p.computes(id) {
			ns = r.devNs
		}
		switch id {
		case p.partID(Data):
			data += ns
		case p.partID(Comm):
			comm += ns
		case p.overheadID():
			overhead += ns
		default:
			compute += ns
		}
	}
	pct := func(ns int64) float64 { return 100 * float64(ns) / total }
	s.ComputePct, s.DataPct, s.CommPct = pct(compute), pct(data), pct(comm)
	if s.DeviceTime {
		// The device's busy time and the host's waits overlap where the
		// host ran ahead; what is left is the overhead.
		s.OverheadPct = max(0, 100-s.ComputePct-s.DataPct-s.CommPct)
	} else {
		s.OverheadPct = pct(overhead)
	}
	return s
}

// Report returns the summary and the rows.
func (p *Profiler) Report() Report {
	return Report{Summary: p.Summary(), Ops: p.Rows()}
}

// Table writes the profile as a table (op, phase, calls, total ms, share
// of the step time, mean µs per call; on a GPU also the device's time)
// followed by the three-line summary.
func (p *Profiler) Table(w io.Writer) error {
	if p == nil {
		return nil
	}
	s := p.Summary()
	if s.Steps == 0 {
		_, err := fmt.Fprintln(w, "profile: no steps were profiled")
		return err
	}
	dev := p.dt != nil
	total := float64(p.total) / 1e6
	cells := [][]string{{"op", "phase", "calls", "total ms", "% step", "mean µs"}}
	if dev {
		cells[0] = append(cells[0], "device ms", "% step")
	}
	var sumMs, sumDev float64
	for _, r := range p.Rows() {
		c := []string{r.Name, r.Phase, fmt.Sprint(r.Calls), fmt.Sprintf("%.3f", r.Ms),
			fmt.Sprintf("%.1f%%", 100*r.Ms/total), fmt.Sprintf("%.1f", 1e3*r.Ms/float64(max(r.Calls, 1)))}
		if dev {
			c = append(c, fmt.Sprintf("%.3f", r.DeviceMs), fmt.Sprintf("%.1f%%", 100*r.DeviceMs/total))
		}
		cells = append(cells, c)
		sumMs += r.Ms
		sumDev += r.DeviceMs
	}
	c := []string{"total", "", fmt.Sprint(s.Steps), fmt.Sprintf("%.3f", sumMs), fmt.Sprintf("%.1f%%", 100*sumMs/total),
		fmt.Sprintf("%.1f", 1e3*sumMs/float64(s.Steps))}
	if dev {
		c = append(c, fmt.Sprintf("%.3f", sumDev), "")
	}
	cells = append(cells, c)

	var b strings.Builder
	fmt.Fprintf(&b, "profile: %d steps on %s, %.3f ms per step\n", s.Steps, p.dev.Name(), s.StepMs)
	width := make([]int, len(cells[0]))
	for _, row := range cells {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range cells {
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i < 2: // the names, left-aligned
				b.WriteString(c + pad + "  ")
			case i == len(row)-1:
				b.WriteString(pad + c)
			default:
				b.WriteString(pad + c + "  ")
			}
		}
		b.WriteString("\n")
	}
	what := "Compute time (" + p.dev.Name() + ")"
	if s.DeviceTime {
		what = "Device time (" + p.dev.Name() + ")"
	}
	fmt.Fprintf(&b, "%s: %.1f%%\n", what, s.ComputePct)
	fmt.Fprintf(&b, "Data loading time: %.1f%%\n", s.DataPct)
	if s.CommPct > 0 {
		fmt.Fprintf(&b, "Communication time: %.1f%%\n", s.CommPct)
	}
	fmt.Fprintf(&b, "Host overhead: %.1f%%\n", s.OverheadPct)
	if err := p.Err(); err != nil {
		fmt.Fprintf(&b, "(%v)\n", err)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
