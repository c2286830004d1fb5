// Package atomicfile writes a file so that a crash, a full disk or a
// process killed at any instant leaves the file either as it was or whole
// and new, never a part of either: the content goes to a temporary file in
// the same directory, which is synced, renamed over the file's name, and
// the directory synced, so the rename itself survives a crash. Every file
// mixprec writes for a user goes through it: weights (safetensors), run
// checkpoints and their lock (runstate), metrics and traces (the
// programs), fetched data (datasets) and plots (mixprec plot). SHA256 is
// the digest of a file such a writer records and a reader checks.
//
// It lives at the bottom of the layers (docs/design.md §2: layer 0, beside
// dtype, importing only the standard library) because its lowest user,
// safetensors, is on layer 1 and may import nothing above dtype's layer;
// an internal/ package would sit on layer 6, above every library that
// writes files.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// File is a file being written under a temporary name beside the one it
// is for. Commit or CommitNew puts it in place; Abort, or a failed commit,
// removes it.
type File struct {
	f    *os.File
	path string
	done bool
}

// Create starts the file that Commit puts at path, with mode perm (as
// given: the umask does not narrow it, so 0o600 is the owner's alone
// whatever the process's umask). The temporary file is hidden and named
// after path (TempFor tells its name from another's), so that a cleaner can
// find what a killed writer left.
func Create(path string, perm fs.FileMode) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*"+tempSuffix)
	if err != nil {
		return nil, err
	}
	if perm != 0o600 { // CreateTemp's own
		if err := f.Chmod(perm); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
	}
	return &File{f: f, path: path}, nil
}

// tempSuffix ends every temporary file's name.
const tempSuffix = ".tmp"

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Name is the temporary file's path.
func (f *File) Name() string { return f.f.Name() }

// Commit syncs the file, closes it, renames it to its path (replacing the
// file there) and syncs the directory. When it fails before the rename,
// the temporary file is removed and the path holds what it held; a failure
// to sync the directory after the rename leaves the new file in place,
// and is returned since a crash could still undo the rename.
func (f *File) Commit() error {
	return f.commit(os.Rename)
}

// CommitNew is Commit for a file whose creation claims something, a lock:
// it never replaces a file. When one is at the path, it fails with an
// error matching fs.ErrExist and leaves that file as it is. The temporary
// file is hard-linked to the path, which makes the path whole or fails,
// then removed.
func (f *File) CommitNew() error {
	err := f.commit(func(tmp, path string) error {
		if err := os.Link(tmp, path); err != nil {
			var le *os.LinkError
			if errors.As(err, &le) && errors.Is(le.Err, fs.ErrExist) {
				return fs.ErrExist
			}
			return err
		}
		os.Remove(tmp)
		return nil
	})
	return err
}

// commit syncs and closes the temporary file, moves it into place with
// place, and syncs the directory.
func (f *File) commit(place func(tmp, path string) error) error {
	if f.done {
		return fmt.Errorf("atomicfile: %s: committed or aborted already", f.path)
	}
	f.done = true
	err := f.f.Sync()
	if e := f.f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = place(f.f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.f.Name())
		return err
	}
	return SyncDir(filepath.Dir(f.path))
}

// Abort closes and removes the temporary file, leaving the path as it
// was. After a commit it does nothing, so it may be deferred.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.f.Close()
	os.Remove(f.f.Name())
}

// Write writes path with write, which gets a buffered writer: through
// Create and Commit, so that on any error, write's own included, path holds
// what it held and no temporary file is left.
func Write(path string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	w := bufio.NewWriter(f)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Commit()
}

// WriteFile writes data to path as Write does.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// SyncDir syncs the directory dir, so that the names created, renamed or
// removed in it survive a crash. A file system that cannot sync a
// directory (os.ErrInvalid) is taken as one that needs no sync.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// TempFor reports whether name, a file's base name, is a temporary file
// of Create's, and for which file: what a writer killed before its commit
// left (".model.safetensors.12345.tmp" is model.safetensors's).
func TempFor(name string) (target string, ok bool) {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return "", false
	}
	if rest, ok = strings.CutSuffix(rest, tempSuffix); !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 || strings.Trim(rest[i+1:], "0123456789") != "" || i == len(rest)-1 {
		return "", false
	}
	return rest[:i], true
}
