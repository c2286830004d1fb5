package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// leftovers lists what is in dir besides the names in keep.
func leftovers(t *testing.T, dir string, keep ...string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, e := range entries {
		if !strings.Contains(" "+strings.Join(keep, " ")+" ", " "+e.Name()+" ") {
			extra = append(extra, e.Name())
		}
	}
	return extra
}

// TestWrite: a write makes the file whole with the mode asked for; a
// write that fails part-way, or whose commit fails, leaves the old file
// as it was and no temporary file.
func TestWrite(t *testing.T) {
	errDisk := errors.New("no space left on device")
	for _, c := range []struct {
		name    string
		perm    fs.FileMode
		write   func(w io.Writer) error
		want    string // the file's content after
		wantErr error
	}{
		{"whole", 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "new content\n"); return err }, "new content\n", nil},
		{"mode 0644", 0o644, func(w io.Writer) error { _, err := io.WriteString(w, "shared\n"); return err }, "shared\n", nil},
		{"empty", 0o600, func(w io.Writer) error { return nil }, "", nil},
		{"fails part-way", 0o600, func(w io.Writer) error {
			io.WriteString(w, strings.Repeat("half-written ", 1<<14)) // past bufio's buffer: on disk already
			return errDisk
		}, "old content\n", errDisk},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f.json")
			if err := os.WriteFile(path, []byte("old content\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := Write(path, c.perm, c.write)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Write: error %v, want %v", err, c.wantErr)
			}
			b, rerr := os.ReadFile(path)
			if rerr != nil || string(b) != c.want {
				t.Errorf("the file holds %.40q (%v), want %q", b, rerr, c.want)
			}
			if fi, err := os.Stat(path); err == nil && c.wantErr == nil && fi.Mode().Perm() != c.perm {
				t.Errorf("mode %v, want %v", fi.Mode().Perm(), c.perm)
			}
			if extra := leftovers(t, dir, "f.json"); len(extra) != 0 {
				t.Errorf("left in the directory: %v", extra)
			}
		})
	}
}

// TestCommitFails: a commit that cannot rename (the path is a non-empty
// directory) removes its temporary file and leaves the path as it was.
func TestCommitFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := os.MkdirAll(filepath.Join(path, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFile over a non-empty directory: no error")
	}
	if fi, err := os.Stat(filepath.Join(path, "inside")); err != nil || !fi.IsDir() {
		t.Errorf("the directory was changed: %v", err)
	}
	if extra := leftovers(t, dir, "out"); len(extra) != 0 {
		t.Errorf("left in the directory: %v", extra)
	}
	if _, err := Create(filepath.Join(dir, "no", "such", "dir", "f"), 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Create in a missing directory: %v, want fs.ErrNotExist", err)
	}
}

// TestCommitNew: CommitNew makes a file that is not there, and refuses
// one that is, leaving it as it was and nothing temporary.
func TestCommitNew(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".lock")
	for i, want := range []string{"first\n", "first\n"} {
		f, err := Create(path, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(f, []string{"first\n", "second\n"}[i])
		err = f.CommitNew()
		if i == 1 && !errors.Is(err, fs.ErrExist) {
			t.Errorf("second CommitNew: %v, want fs.ErrExist", err)
		} else if i == 0 && err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Errorf("after commit %d the file holds %q, want %q", i+1, b, want)
		}
		if extra := leftovers(t, dir, ".lock"); len(extra) != 0 {
			t.Errorf("after commit %d, left in the directory: %v", i+1, extra)
		}
	}
}

// TestAbort: Abort removes the temporary file; after a commit it does
// nothing, and a second commit is an error.
func TestAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	f, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "never seen")
	f.Abort()
	if extra := leftovers(t, dir); len(extra) != 0 {
		t.Errorf("after Abort: %v", extra)
	}
	f, err = Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Abort after Commit removed the file: %v", err)
	}
	if err := f.Commit(); err == nil {
		t.Error("a second Commit: no error")
	}
}

// TestTempFor: the temporary files Create makes are told apart, with the
// file each is for, from files that only look like them.
func TestTempFor(t *testing.T) {
	dir := t.TempDir()
	for _, target := range []string{"model.safetensors", ".lock", "m.jsonl"} {
		f, err := Create(filepath.Join(dir, target), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := TempFor(filepath.Base(f.Name()))
		f.Abort()
		if !ok || got != target {
			t.Errorf("TempFor(%s) = %q, %v; want %q", filepath.Base(f.Name()), got, ok, target)
		}
	}
	for _, name := range []string{"model.safetensors", ".model.safetensors", ".model.safetensors.tmp", ".model.safetensors.12x.tmp",
		".model.safetensors.123.partial", "model.safetensors.123.tmp", "..tmp", ".123.tmp"} {
		if got, ok := TempFor(name); ok {
			t.Errorf("TempFor(%s) = %q, true; want false", name, got)
		}
	}
}

// TestSHA256: the digest sha256sum prints, for an empty file and one of
// FIPS 180-2's examples, and an error naming a file that is not there.
func TestSHA256(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content, want string
	}{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		path := filepath.Join(dir, "f"+c.content)
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := SHA256(path); err != nil || got != c.want {
			t.Errorf("SHA256 of %q = %s, %v; want %s, nil", c.content, got, err, c.want)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := SHA256(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("SHA256 of a missing file: %v, want an error naming it that is fs.ErrNotExist", err)
	}
}
