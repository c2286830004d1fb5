package clitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mixprec/mixprec/internal/cli"
	"github.com/mixprec/mixprec/runstate"
	"github.com/mixprec/mixprec/safetensors"
)

// Summary parses a program's last line of standard output, its JSON
// summary.
func Summary(t *testing.T, stdout string) cli.Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var s cli.Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %q: %v", lines[len(lines)-1], err)
	}
	return s
}

// SignalAt runs the program's main with args in a child process, sends it
// sig once dir holds a run checkpoint of at least step, and returns its
// exit status and standard error once it has ended.
func SignalAt(t *testing.T, dir string, step int, sig syscall.Signal, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envVar+"=1")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if latest, err := runstate.Latest(dir); err == nil {
			var n int
			fmt.Sscanf(filepath.Base(latest), "step-%d", &n)
			if n >= step {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no checkpoint of step %d within 5 minutes:\n%s", step, errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(sig)
	err := cmd.Wait()
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	}
	return code, errb.String()
}

// SameWeights fails t unless the safetensors files a and b hold the same
// tensors bit for bit.
func SameWeights(t *testing.T, a, b string) {
	t.Helper()
	fa, err := safetensors.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := safetensors.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(fa.Tensors) != len(fb.Tensors) {
		t.Fatalf("%s holds %d tensors, %s %d", a, len(fa.Tensors), b, len(fb.Tensors))
	}
	for _, ta := range fa.Tensors {
		tb := fb.Tensor(ta.Name)
		if tb == nil {
			t.Fatalf("%s missing from %s", ta.Name, b)
		}
		for i := range ta.F32 {
			if math.Float32bits(ta.F32[i]) != math.Float32bits(tb.F32[i]) {
				t.Fatalf("%s[%d]: %v in %s, %v in %s", ta.Name, i, ta.F32[i], a, tb.F32[i], b)
			}
		}
	}
}

// EditState rewrites the state.json of the checkpoint in dir with edit
// applied to its text, and then makes its checksum line right again when
// it has one: what a hand edit, or a writer's bug, would leave. It returns
// the checkpoint's directory.
func EditState(t *testing.T, dir string, edit func(string) string) string {
	t.Helper()
	p := filepath.Join(dir, "state.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	body, sealed := string(b), false
	if i := strings.LastIndex(body, ",\n\t\"state_sha256\""); i >= 0 {
		body, sealed = body[:i], true
	}
	edited := edit(body)
	if edited == body {
		t.Fatalf("the edit changed nothing in %s", p)
	}
	if sealed {
		sum := sha256.Sum256([]byte(edited))
		edited += ",\n\t\"state_sha256\": \"" + hex.EncodeToString(sum[:]) + "\"\n}\n"
	}
	if err := os.WriteFile(p, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
