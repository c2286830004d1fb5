package runstate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mixprec/mixprec/atomicfile"
)

// LockFile is the name of the lock a run holds on its directory.
const LockFile = ".lock"

// DirLock is a run's hold on its directory: while one process holds it,
// another Lock of the same directory fails, naming the holder.
type DirLock struct {
	path    string
	content []byte
}

// LockedError is Lock's refusal: the directory is held by a process that
// is, as far as this one can tell, alive.
type LockedError struct {
	Dir   string
	PID   int
	Host  string
	Since string
	start string // the process's start, as processStart says
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s is in use by process %d on %s (running since %s); if no run is using it, remove %s",
		e.Dir, e.PID, e.Host, e.Since, filepath.Join(e.Dir, LockFile))
}

// Lock makes root (and its parents) if missing and takes it for this
// process: it writes root/.lock, naming the process, its host and its
// start, and fails with a *LockedError while another process that is
// alive holds it. A lock left by a process that has died (killed, or its
// machine restarted) is taken over. The lock file appears whole or not at
// all (written under another name, then linked into place), so a reader
// never finds it half-written. Two runs started in the same instant after
// a crash could both take over the dead one's lock; short of that, one
// directory has one run at a time.
func Lock(root string) (*DirLock, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("runstate: %w", err)
	}
	host, _ := os.Hostname()
	content := fmt.Appendf(nil, "pid %d\nhost %s\nstart %s\nsince %s\n", os.Getpid(), host, processStart(os.Getpid()),
		time.Now().Format(time.RFC3339))
	l := &DirLock{path: filepath.Join(root, LockFile), content: content}
	for attempt := 0; ; attempt++ {
		err := linkNew(l.path, content)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("runstate: locking %s: %w", root, err)
		}
		held, rerr := os.ReadFile(l.path)
		if errors.Is(rerr, fs.ErrNotExist) && attempt < 3 {
			continue // released meanwhile
		}
		if rerr != nil {
			return nil, fmt.Errorf("runstate: locking %s: %w", root, rerr)
		}
		holder := parseLock(held)
		holder.Dir = root
		if holder.alive(host) || attempt >= 3 {
			return nil, &holder
		}
		// Its process is gone: the lock is stale.
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("runstate: removing the stale lock %s: %w", l.path, err)
		}
	}
}

// Unlock releases the lock, if it is still this process's.
func (l *DirLock) Unlock() error {
	if l == nil {
		return nil
	}
	if held, err := os.ReadFile(l.path); err != nil || !bytes.Equal(held, l.content) {
		return nil
	}
	if err := os.Remove(l.path); err != nil {
		return fmt.Errorf("runstate: %w", err)
	}
	return nil
}

// linkNew creates path holding content, failing with fs.ErrExist when
// path exists: atomicfile's CommitNew links the written and synced file
// into place, which either makes path whole or fails.
func linkNew(path string, content []byte) error {
	f, err := atomicfile.Create(path, 0o600)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(content); err != nil {
		return err
	}
	return f.CommitNew()
}

// parseLock reads a lock file's fields; what it cannot read stays zero.
func parseLock(b []byte) LockedError {
	var e LockedError
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			e.PID, _ = strconv.Atoi(v)
		case "host":
			e.Host = v
		case "since":
			e.Since = v
		case "start":
			e.start = v
		}
	}
	return e
}

// alive reports whether the lock's process may still be running: on
// another host it cannot be known, so it is taken to be; on this one, the
// process must exist and, where the system says when processes started
// (Linux's /proc), have started when the lock's did, so that a process id
// reused since is not mistaken for the holder.
func (e *LockedError) alive(host string) bool {
	if e.PID <= 0 {
		return false // no process named: written by nothing that runs
	}
	if e.Host != host {
		return true
	}
	if e.start != "" && e.start != "-" {
		if now := processStart(e.PID); now != "-" {
			return now == e.start
		}
	}
	p, err := os.FindProcess(e.PID)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// processStart is when process pid started, in clock ticks since boot as
// /proc/PID/stat's 22nd field gives it, or "-" where that is unknown (no
// /proc, or no such process).
func processStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "-"
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "-"
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "-"
	}
	return f[19] // field 22: fields 3... start at f[0]
}

// NewID returns a new run's identity: 16 random hex digits that every
// checkpoint of the run records, so that pruning deletes no other run's.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
