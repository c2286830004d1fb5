package scripttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// aptGetThroughWrapper runs tools/apt-get.sh with args, and env added to
// its environment, over a fake apt-get that fails with failMsg for its
// first failures calls, then succeeds. It returns the arguments of each
// call the fake got, and the wrapper's output and error. It skips unless
// it runs as root (as CI does): the wrapper uses sudo otherwise.
func aptGetThroughWrapper(t *testing.T, failMsg string, failures int, env []string, args ...string) (calls []string, out string, err error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("tools/apt-get.sh uses sudo when not root; this test runs as root (as CI does)")
	}
	bin := t.TempDir()
	log, count := filepath.Join(bin, "calls"), filepath.Join(bin, "count")
	script := `#!/bin/sh
echo "$*" >>` + log + `
n=$(cat ` + count + ` 2>/dev/null || echo 0)
n=$((n + 1))
echo $n >` + count + `
if [ $n -le ` + strconv.Itoa(failures) + ` ]; then
	echo "` + failMsg + `" >&2
	exit 100
fi
echo "fake apt-get: ok" >&2
`
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{"../apt-get.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MIXPREC_APT_PAUSE=0")
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	got, _ := os.ReadFile(log)
	if s := strings.TrimSpace(string(got)); s != "" {
		calls = strings.Split(s, "\n")
	}
	return calls, string(b), err
}

func TestAptGetWaitsForLock(t *testing.T) {
	calls, out, err := aptGetThroughWrapper(t, "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)", 3,
		nil, "install", "-y", "some-package")
	if err != nil {
		t.Fatalf("apt-get.sh failed while the lock was released after 3 tries: %v\n%s", err, out)
	}
	if len(calls) != 4 {
		t.Fatalf("apt-get called %d times, want 4 (3 locked, 1 clean):\n%s", len(calls), strings.Join(calls, "\n"))
	}
	for _, l := range calls {
		if !strings.Contains(l, "DPkg::Lock::Timeout=") || !strings.HasSuffix(l, "install -y some-package") {
			t.Errorf("apt-get call %q: want the lock timeout option and the arguments passed through", l)
		}
	}
	if !strings.Contains(out, "waiting") {
		t.Errorf("output does not say it is waiting for the lock:\n%s", out)
	}
}

func TestAptGetOtherFailuresReturnAtOnce(t *testing.T) {
	calls, out, err := aptGetThroughWrapper(t, "E: Unable to locate package some-package", 5, nil, "install", "-y", "some-package")
	if err == nil {
		t.Fatalf("apt-get.sh succeeded although apt-get failed:\n%s", out)
	}
	if len(calls) != 1 {
		t.Errorf("apt-get called %d times for a failure that is not a lock, want 1", len(calls))
	}
	if !strings.Contains(out, "Unable to locate package") {
		t.Errorf("apt-get's error is not passed on:\n%s", out)
	}
}

func TestAptGetGivesUpAfterWait(t *testing.T) {
	_, out, err := aptGetThroughWrapper(t, "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)", 9,
		[]string{"MIXPREC_APT_WAIT=0"}, "update")
	if err == nil {
		t.Fatalf("apt-get.sh succeeded although the lock never came free:\n%s", out)
	}
	if !strings.Contains(out, "giving up") {
		t.Errorf("no line saying it gave up:\n%s", out)
	}
}

func TestInstallToolkitUsesWrapper(t *testing.T) {
	// DRY_RUN prints the commands; with nvcc hidden (PATH holds only the
	// tools the script needs) and an empty apt directory, both apt-get steps
	// must go through the lock-waiting wrapper.
	apt, bin := t.TempDir(), t.TempDir()
	for _, tool := range []string{"sh", "grep", "cat", "id", "mkdir", "dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "sh"), "../cuda/install-toolkit.sh")
	cmd.Env = append(os.Environ(), "DRY_RUN=1", "APT_DIR="+apt, "PATH="+bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install-toolkit.sh DRY_RUN: %v\n%s", err, out)
	}
	for _, want := range []string{"apt-get.sh update", "apt-get.sh install -y nvidia-cuda-toolkit"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("install-toolkit.sh does not run %q:\n%s", want, out)
		}
	}
}
