package memplan_test

import (
	"testing"

	"github.com/mixprec/mixprec/device/cpu"
	"github.com/mixprec/mixprec/memplan"
)

// TestParseBudget reads every form a budget takes and refuses the rest.
func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want memplan.Budget
		ok   bool
	}{
		{"512MiB", memplan.Budget{Bytes: 512 << 20}, true},
		{"1.5GiB", memplan.Budget{Bytes: 3 << 29}, true},
		{"800MB", memplan.Budget{Bytes: 800e6}, true},
		{"800mb", memplan.Budget{Bytes: 800e6}, true},
		{" 64 KiB ", memplan.Budget{Bytes: 64 << 10}, true},
		{"2kB", memplan.Budget{Bytes: 2000}, true},
		{"1TB", memplan.Budget{Bytes: 1e12}, true},
		{"1073741824", memplan.Budget{Bytes: 1 << 30}, true},
		{"4096B", memplan.Budget{Bytes: 4096}, true},
		{"2e9B", memplan.Budget{Bytes: 2e9}, true},
		{"1", memplan.Budget{Bytes: 1}, true},
		{"0.8", memplan.Budget{OfFree: 0.8}, true},
		{"1.0", memplan.Budget{OfFree: 1}, true},
		{"0.6x", memplan.Budget{OfPeak: 0.6}, true},
		{"1X", memplan.Budget{OfPeak: 1}, true},
		{"", memplan.Budget{}, false},
		{"0", memplan.Budget{}, false},
		{"-5MiB", memplan.Budget{}, false},
		{"0.5B", memplan.Budget{}, false},
		{"1.5", memplan.Budget{}, false},
		{"0.0", memplan.Budget{}, false},
		{"1.2x", memplan.Budget{}, false},
		{"0x", memplan.Budget{}, false},
		{"1e9", memplan.Budget{}, false},
		{"12 parsecs", memplan.Budget{}, false},
		{"MiB", memplan.Budget{}, false},
		{"NaNMB", memplan.Budget{}, false},
		{"InfMB", memplan.Budget{}, false},
		{"9EiB", memplan.Budget{}, false},
		{"10000000TB", memplan.Budget{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := memplan.ParseBudget(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("ParseBudget(%q) = %+v, %v; want %+v, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
			if err != nil {
				return
			}
			// What String writes reads back the same.
			if again, err := memplan.ParseBudget(got.String()); err != nil || (got.Bytes == 0 && again != got) {
				t.Errorf("ParseBudget(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}

// TestResolve turns each form into bytes: a size as it is, a fraction of
// free memory from the device, a fraction of the peak from the profile.
func TestResolve(t *testing.T) {
	dev := cpu.New()
	free, _, err := dev.FreeMemory()
	if err != nil {
		t.Skip(err)
	}
	got, err := memplan.Budget{Bytes: 12345}.Resolve(dev, nil)
	if err != nil || got != 12345 {
		t.Errorf("12345 bytes resolve to %d, %v", got, err)
	}
	got, err = memplan.Budget{OfFree: 0.5}.Resolve(dev, nil)
	// Free memory moves as other processes run: within a tenth of it.
	if err != nil || float64(got) < 0.4*float64(free) || float64(got) > 0.6*float64(free) {
		t.Errorf("half of free memory (%d) resolves to %d, %v", free, got, err)
	}
}
