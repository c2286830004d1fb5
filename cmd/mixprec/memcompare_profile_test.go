package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// TestMemcompareProfile checks memcompare -profile: a table per
// configuration on standard error, and with -json a profile per result
// whose shares add up to the whole.
func TestMemcompareProfile(t *testing.T) {
	r := clitest.Run(t, nil, "memcompare", "-model", "mlp", "-batch", "32", "-steps", "2", "-device", "cpu", "-profile", "-json")
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	var rep struct {
		Results []struct {
			Config  string `json:"config"`
			Profile *struct {
				Summary map[string]float64 `json:"summary"`
				Ops     []struct {
					Name, Phase string
					Calls       int
				} `json:"ops"`
			} `json:"profile"`
		} `json:"results"`
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.Stdout)
	}
	if len(rep.Results) != 5 {
		t.Fatalf("%d results, want 5", len(rep.Results))
	}
	for _, res := range rep.Results {
		if res.Profile == nil {
			t.Errorf("%s: no profile", res.Config)
			continue
		}
		s := res.Profile.Summary
		if s["steps"] != 2 {
			t.Errorf("%s: %v steps profiled, want the 2 timed ones", res.Config, s["steps"])
		}
		if tot := s["compute_pct"] + s["data_pct"] + s["overhead_pct"]; tot < 99.999 || tot > 100.001 {
			t.Errorf("%s: shares add up to %v%%", res.Config, tot)
		}
		if !strings.Contains(r.Stderr, res.Config+":\nprofile: 2 steps") {
			t.Errorf("stderr has no table for %s:\n%s", res.Config, r.Stderr)
		}
	}
}
