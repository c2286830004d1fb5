package distributed

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/mixprec/mixprec/device"
)

// MismatchError says the ranks of a job differ where they must agree: in
// their settings (AgreeSettings) or their models (New). Every rank returns
// the same one, so each can stop at once and any one can report it.
type MismatchError struct{ Msg string }

func (e *MismatchError) Error() string { return e.Msg }

// AgreeSettings compares every rank's settings (a flag's name and its
// value, as "-batch" and "64"), which must be the same on every rank for
// the ranks to train one model together: a model, a batch, a learning rate
// or a seed that differed would fail late with an obscure MPI error, or
// train silently wrong. When any differs, every rank returns the same
// *MismatchError, naming each setting that differs and which ranks have
// which value. Every rank must call it, before anything else collective.
func AgreeSettings(comm device.Comm, dev device.Device, settings map[string]string) error {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(&b, "%s\x00%s\n", k, settings[k])
	}
	all, err := gatherText(comm, dev, b.String())
	if err != nil {
		return fmt.Errorf("distributed: comparing the ranks' settings: %w", err)
	}
	ranks := make([]map[string]string, len(all))
	keys := map[string]bool{}
	for r, text := range all {
		ranks[r] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			if k, v, ok := strings.Cut(line, "\x00"); ok {
				ranks[r][k], keys[k] = v, true
			}
		}
	}
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		byValue := map[string][]int{}
		for r := range ranks {
			v, ok := ranks[r][k]
			if !ok {
				v = "(unset)"
			}
			byValue[v] = append(byValue[v], r)
		}
		if len(byValue) == 1 {
			continue
		}
		values := slices.Collect(maps.Keys(byValue))
		sort.Slice(values, func(i, j int) bool { return byValue[values[i]][0] < byValue[values[j]][0] })
		var parts []string
		for _, v := range values {
			parts = append(parts, fmt.Sprintf("%s on %s", v, rankList(byValue[v])))
		}
		diffs = append(diffs, fmt.Sprintf("%s (%s)", k, strings.Join(parts, ", ")))
	}
	if len(diffs) > 0 {
		return &MismatchError{fmt.Sprintf("distributed: the ranks must train with the same settings, and differ in %s", strings.Join(diffs, "; "))}
	}
	return nil
}

// rankList spells ranks as "rank 1" or "ranks 0, 2 and 3".
func rankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	return "ranks " + strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// gatherText gives every rank every rank's s, in rank order, through F32
// all-reduces, the one reduction every Comm has: first the lengths, each
// rank filling its own slot, then a row of bytes per rank, each rank
// filling its own (a byte is an exact float, and the others add zeros).
func gatherText(comm device.Comm, dev device.Device, s string) ([]string, error) {
	n, me := comm.Size(), comm.Rank()
	lens := make([]float32, n)
	lens[me] = float32(len(s))
	if err := AllReduceHost(comm, dev, lens, device.Sum); err != nil {
		return nil, err
	}
	width := 0
	for _, l := range lens {
		width = max(width, int(l))
	}
	rows := make([]float32, n*width)
	for i := range len(s) {
		rows[me*width+i] = float32(s[i])
	}
	if err := AllReduceHost(comm, dev, rows, device.Sum); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for r := range n {
		b := make([]byte, int(lens[r]))
		for i := range b {
			b[i] = byte(rows[r*width+i])
		}
		out[r] = string(b)
	}
	return out, nil
}
