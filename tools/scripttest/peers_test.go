package scripttest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBenchPeerRunner runs the unit tests of the benchmark runner
// (tools/peers/test_peers.py: thread settings, environments, the OpenBLAS
// core probe's choice, interleaving, the figures' medians and ratios). They
// need Python 3 but not PyTorch; the tests that need PyTorch skip without it.
func TestBenchPeerRunner(t *testing.T) {
	py := ""
	for _, c := range []string{"/usr/bin/python3", "python3"} {
		if p, err := exec.LookPath(c); err == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("no python3 on this machine")
	}
	cmd := exec.Command(py, "-m", "unittest", "test_peers")
	cmd.Dir = "../peers"
	// No __pycache__ folders left in the source tree.
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -m unittest test_peers: %v\n%s", py, err, out)
	}
	if !strings.Contains(string(out), "OK") {
		t.Fatalf("unittest printed no OK:\n%s", out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
