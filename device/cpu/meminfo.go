package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// FreeMemory reports the host's available and total memory
// (device.MemInfo): MemAvailable and MemTotal of /proc/meminfo, the
// kernel's estimate of what can be allocated without swapping.
func (d *Device) FreeMemory() (free, total int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, fmt.Errorf("cpu: free memory: %w", err)
	}
	return parseMeminfo(data)
}

// parseMeminfo reads MemAvailable and MemTotal, in kB, from the text of
// /proc/meminfo.
func parseMeminfo(data []byte) (free, total int64, err error) {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "MemAvailable" && name != "MemTotal") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("cpu: free memory: /proc/meminfo line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("cpu: free memory: /proc/meminfo line %q", sc.Text())
		}
		if name == "MemAvailable" {
			free = kb << 10
		} else {
			total = kb << 10
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("cpu: free memory: /proc/meminfo has no MemAvailable and MemTotal")
	}
	return free, total, nil
}
