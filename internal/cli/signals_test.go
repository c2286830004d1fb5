package cli

import (
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuilder is a strings.Builder the watcher writes while the test
// reads it.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10 seconds", what)
		}
	}
}

// TestSignalsHold sends this process a signal during a save (the first:
// recorded), then two more: each is answered with what the save is, and
// none ends the process; after the save, signals stay caught until Stop.
func TestSignalsHold(t *testing.T) {
	var out lockedBuilder
	s := NotifySignals("prog", &out)
	defer s.Stop()
	if s.Received() != nil {
		t.Fatal("a signal before any was sent")
	}
	release := s.Hold("the checkpoint of step 3")
	self, _ := os.FindProcess(os.Getpid())
	self.Signal(syscall.SIGHUP)
	waitFor(t, "first signal", func() bool { return s.Received() != nil })
	if got := s.Received(); got != syscall.SIGHUP {
		t.Errorf("Received() = %v, want hangup", got)
	}
	self.Signal(syscall.SIGTERM)
	waitFor(t, "answer", func() bool { return strings.Contains(out.String(), "waiting for the checkpoint of step 3") })
	release()
	self.Signal(syscall.SIGINT)
	waitFor(t, "answer after the save", func() bool { return strings.Contains(out.String(), "already stopping") })
	if got := s.Received(); got != syscall.SIGHUP {
		t.Errorf("Received() = %v after more signals, want the first, hangup", got)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("%d lines for two further signals:\n%s", n, out.String())
	}
}

func TestSignalStatus(t *testing.T) {
	for _, tt := range []struct {
		sig  os.Signal
		want int
	}{{os.Interrupt, 130}, {syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}} {
		var b strings.Builder
		if got := Exit(&b, "prog", &Interrupted{Signal: tt.sig, Step: 4}); got != tt.want {
			t.Errorf("Exit of an Interrupted by %v = %d, want %d", tt.sig, got, tt.want)
		}
		if !strings.HasPrefix(b.String(), "prog: ") || strings.Count(b.String(), "\n") != 1 {
			t.Errorf("Exit wrote %q; want one line", b.String())
		}
	}
}
