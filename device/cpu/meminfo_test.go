package cpu

import (
	"runtime"
	"testing"
)

// TestParseMeminfo reads MemAvailable and MemTotal from /proc/meminfo's
// text, in kB, and refuses text without them.
func TestParseMeminfo(t *testing.T) {
	for _, tc := range []struct {
		name        string
		text        string
		free, total int64
		ok          bool
	}{
		{"linux", "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\nBuffers: 5 kB\n", 20000000 << 10, 24000000 << 10, true},
		{"no available", "MemTotal:       24000000 kB\nMemFree:         1000 kB\n", 0, 0, false},
		{"bad number", "MemTotal: x kB\nMemAvailable: 1 kB\n", 0, 0, false},
		{"other unit", "MemTotal: 1 MB\nMemAvailable: 1 kB\n", 0, 0, false},
		{"empty", "", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			free, total, err := parseMeminfo([]byte(tc.text))
			if (err == nil) != tc.ok || free != tc.free || total != tc.total {
				t.Errorf("parseMeminfo = %d, %d, %v; want %d, %d, ok %v", free, total, err, tc.free, tc.total, tc.ok)
			}
		})
	}
}

// TestFreeMemory asks this machine: on Linux there is some memory free,
// and no more than there is.
func TestFreeMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/meminfo is Linux's")
	}
	free, total, err := New().FreeMemory()
	if err != nil || free <= 0 || free > total {
		t.Errorf("FreeMemory = %d, %d, %v; want 0 < free <= total", free, total, err)
	}
}
