package memplan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/mixprec/mixprec/device"
)

// Budget is a memory budget as a user gives it: bytes, a fraction of the
// device's free memory, or a fraction of the step's peak without
// recomputation. Exactly one field is set.
type Budget struct {
	// Bytes is a budget in bytes.
	Bytes int64
	// OfFree is a fraction (0, 1] of the memory the device could give the
	// program: what it holds already (MemStats' Reserved) and what is
	// still free (device.MemInfo), when the budget is resolved.
	OfFree float64
	// OfPeak is a fraction (0, 1] of the peak of a step that recomputes
	// nothing (Profile.Unconstrained): "fit in 60% of what it takes now".
	OfPeak float64
}

// units are the suffixes ParseBudget knows, with their sizes: decimal
// (kB, MB, ...) and binary (KiB, MiB, ...), matched without regard to case.
var units = []struct {
	suffix string
	size   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"b", 1},
}

// ParseBudget reads a memory budget: a size with a unit ("512MiB",
// "1.5GiB", "800MB", "2e9B"), a plain number of bytes ("1073741824"), a
// fraction of the device's free memory written with a point ("0.8", "1.0"),
// or a fraction of the unconstrained peak written with an x ("0.6x").
func ParseBudget(s string) (Budget, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Budget{}, errors.New("empty memory budget; want a size such as 512MiB, 1.5GiB or 800MB, or a fraction such as 0.8 (of free memory) or 0.6x (of the unconstrained peak)")
	}
	lower := strings.ToLower(t)
	if num, ok := strings.CutSuffix(lower, "x"); ok {
		f, err := fraction(num)
		if err != nil {
			return Budget{}, fmt.Errorf("memory budget %q: %v of the unconstrained peak", s, err)
		}
		return Budget{OfPeak: f}, nil
	}
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			return sized(s, strings.TrimSpace(num), u.size)
		}
	}
	if strings.ContainsAny(lower, ".e") {
		f, err := fraction(lower)
		if err != nil {
			return Budget{}, fmt.Errorf("memory budget %q: %v of free memory (a size needs a unit: 512MiB, 1.5GiB, 800MB)", s, err)
		}
		return Budget{OfFree: f}, nil
	}
	return sized(s, lower, 1)
}

// sized is the budget num units of size bytes each, whole bytes.
func sized(s, num string, size float64) (Budget, error) {
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return Budget{}, fmt.Errorf("memory budget %q: want a size such as 512MiB, 1.5GiB or 800MB, plain bytes, or a fraction such as 0.8 or 0.6x", s)
	}
	b := v * size
	if b < 1 || b >= 1<<62 {
		return Budget{}, fmt.Errorf("memory budget %q: want a size from 1 byte to 4 EiB", s)
	}
	return Budget{Bytes: int64(b)}, nil
}

// fraction reads a number in (0, 1].
func fraction(num string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, errors.New("want a fraction above 0 and at most 1")
	}
	return f, nil
}

// String is the budget as ParseBudget reads it.
func (b Budget) String() string {
	switch {
	case b.OfFree > 0:
		f := strconv.FormatFloat(b.OfFree, 'f', -1, 64)
		if !strings.Contains(f, ".") {
			f += ".0" // "1" would be one byte
		}
		return f
	case b.OfPeak > 0:
		return strconv.FormatFloat(b.OfPeak, 'g', -1, 64) + "x"
	}
	return device.FormatBytes(b.Bytes)
}

// Set parses s into b, so that a Budget is a flag.Value.
func (b *Budget) Set(s string) error {
	v, err := ParseBudget(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Resolve is the budget in bytes for a step whose profile is p on dev: a
// fraction of free memory is taken of dev's (device.MemInfo), a fraction
// of the peak of p's step without recomputation.
func (b Budget) Resolve(dev device.Device, p *Profile) (int64, error) {
	switch {
	case b.OfFree > 0:
		m, ok := dev.(device.MemInfo)
		if !ok {
			return 0, fmt.Errorf("memory budget %v: %s cannot say how much memory is free; give a size (512MiB)", b, dev.Name())
		}
		free, _, err := m.FreeMemory()
		if err != nil {
			return 0, fmt.Errorf("memory budget %v: %w", b, err)
		}
		return int64(b.OfFree * float64(free+dev.MemStats().Reserved)), nil
	case b.OfPeak > 0:
		return int64(b.OfPeak * float64(p.Unconstrained)), nil
	}
	return b.Bytes, nil
}
