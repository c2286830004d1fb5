package clitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	c := Start(t, nil, args...)
	c.WaitCheckpoint(t, dir, step)
	c.Signal(sig)
	r := c.Wait(t)
	return r.Code, r.Stderr
}

// Child is the program's main running in a child process.
type Child struct {
	cmd         *exec.Cmd
	out, errout syncBuffer
	done        chan struct{}
	err         error
}

// syncBuffer is a bytes.Buffer that the child's output is copied into
// while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitStderr waits until the child's standard error holds s, and fails t
// if the child ends first or s does not come within 5 minutes.
func (c *Child) WaitStderr(t *testing.T, s string) {
	t.Helper()
	c.wait(t, s, c.errout.String)
}

// WaitStdout is WaitStderr for the child's standard output.
func (c *Child) WaitStdout(t *testing.T, s string) {
	t.Helper()
	c.wait(t, s, c.out.String)
}

func (c *Child) wait(t *testing.T, s string, read func() string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(read(), s) {
		select {
		case <-c.done:
			t.Fatalf("the program ended before it said %q:\n%s", s, c.errout.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the program did not say %q within 5 minutes:\n%s", s, c.errout.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// Start runs the program's main with args in a child process with env
// added to the environment; Wait ends it. The test kills it if it is
// still running when the test ends.
func Start(t *testing.T, env []string, args ...string) *Child {
	t.Helper()
	return start(t, command(t, env, args))
}

// StartMpirun runs the program's main with args on ranks processes under
// mpirun (as Mpirun does) and returns the job as a Child: mpirun is the
// process Signal signals, and its standard error holds every rank's.
func StartMpirun(t *testing.T, ranks int, args ...string) *Child {
	t.Helper()
	return start(t, mpirunCommand(t, alike(ranks, args)...))
}

// start starts cmd as a Child.
func start(t *testing.T, cmd *exec.Cmd) *Child {
	t.Helper()
	c := &Child{cmd: cmd, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.errout
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			c.cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// PID is the child's process id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// WaitCheckpoint waits until dir holds a run checkpoint of at least step,
// and fails t if the child ends first or none comes within 5 minutes.
func (c *Child) WaitCheckpoint(t *testing.T, dir string, step int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if latest, err := runstate.Latest(dir); err == nil {
			var n int
			fmt.Sscanf(filepath.Base(latest), "step-%d", &n)
			if n >= step {
				return
			}
		}
		select {
		case <-c.done:
			t.Fatalf("the program ended before a checkpoint of step %d:\n%s", step, c.errout.String())
		default:
		}
		if time.Now().After(deadline) {
			c.cmd.Process.Kill()
			<-c.done
			t.Fatalf("no checkpoint of step %d within 5 minutes:\n%s", step, c.errout.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Signal sends sig to the child.
func (c *Child) Signal(sig syscall.Signal) { c.cmd.Process.Signal(sig) }

// Wait waits for the child to end and returns what it left.
func (c *Child) Wait(t *testing.T) Result {
	t.Helper()
	<-c.done
	r := Result{Stdout: c.out.String(), Stderr: c.errout.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(c.err, &exit):
		r.Code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Code = 128 + int(ws.Signal()) // as a shell reports it
		}
	case c.err != nil:
		t.Fatalf("running %v: %v", c.cmd.Args, c.err)
	}
	return r
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
