package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// StopSignals are the signals that stop a training run between steps:
// SIGINT (an interactive ^C), SIGTERM (a scheduler's or kill's request)
// and SIGHUP (the terminal went away).
var StopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// SignalStatus is the exit status of a run stopped by sig, as a shell
// reports a process that sig ended: 128 plus its number (130 for SIGINT,
// 143 for SIGTERM, 129 for SIGHUP).
func SignalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return ExitInterrupted
}

// Signals turns StopSignals into a request a training loop answers at its
// next step boundary, so that a run stops with its state saved rather than
// half-way through a step or a file.
//
// The first signal is recorded (Received); the loop notices it after the
// step in progress, saves and stops. A further signal before that ends
// the process at once, as with no handler: the way out of a step that does
// not end. From the moment a save starts (Hold) until the process ends,
// further signals are caught, and each is answered on standard error with
// what the program is waiting for, so that a second ^C can neither cut a
// checkpoint short nor go unheard.
type Signals struct {
	prog   string
	stderr io.Writer

	ch    chan os.Signal
	done  chan struct{}
	mu    sync.Mutex
	got   os.Signal     // the first, nil until then
	what  string        // what a Hold is waiting for; "" when none
	held  bool          // a save has started: catch every signal until Stop
	pause time.Duration // holdPauseEnv's, read once
}

// NotifySignals starts watching for StopSignals on behalf of program prog,
// which reports on stderr; Stop ends it.
func NotifySignals(prog string, stderr io.Writer) *Signals {
	s := &Signals{prog: prog, stderr: stderr, ch: make(chan os.Signal, 4), done: make(chan struct{})}
	s.pause, _ = time.ParseDuration(os.Getenv(holdPauseEnv))
	signal.Notify(s.ch, StopSignals...)
	go s.watch()
	return s
}

func (s *Signals) watch() {
	defer close(s.done)
	for sig := range s.ch {
		s.mu.Lock()
		switch {
		case s.got == nil:
			s.got = sig
			if !s.held {
				// A second signal before the step ends ends the process.
				signal.Reset(StopSignals...)
			}
		case s.what != "":
			fmt.Fprintf(s.stderr, "%s: %v again: waiting for %s to be written, then stopping (SIGKILL ends it at once, and loses that)\n", s.prog, sig, s.what)
		default:
			fmt.Fprintf(s.stderr, "%s: %v again: already stopping (SIGKILL ends it at once)\n", s.prog, sig)
		}
		s.mu.Unlock()
	}
}

// Received is the first signal, or nil while none has come.
func (s *Signals) Received() os.Signal {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// Hold catches every further signal while what (a checkpoint, say) is
// written, answering each on standard error; the returned function ends
// the wait. Once a signal has been received, signals stay caught after
// the wait too, until Stop: the program is stopping as fast as it can.
func (s *Signals) Hold(what string) (release func()) {
	if s == nil {
		return func() {}
	}
	s.mu.Lock()
	s.what = what
	if !s.held {
		s.held = true
		signal.Notify(s.ch, StopSignals...) // again, if the first signal reset them
	}
	s.mu.Unlock()
	return func() {
		time.Sleep(s.pause)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.what = ""
		if s.got == nil {
			s.held = false // a periodic save: nothing is stopping yet
		}
	}
}

// holdPauseEnv names a duration each Hold waits before it ends, for the
// tests that signal a program while it saves: without it a fast disk ends
// the save before a second signal arrives. Unset, as in every real run, it
// changes nothing.
const holdPauseEnv = "MIXPREC_TEST_HOLD_PAUSE"

// Stop stops watching and restores the signals' default actions.
func (s *Signals) Stop() {
	if s == nil {
		return
	}
	signal.Stop(s.ch)
	signal.Reset(StopSignals...)
	close(s.ch)
	<-s.done
}
