package datasets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeGoroots stands in for runtime.GOROOT and `go env GOROOT` until the
// test ends.
func fakeGoroots(t *testing.T, rt, env string, envErr error) {
	t.Helper()
	savedRT, savedEnv := runtimeGOROOT, goEnvGOROOT
	runtimeGOROOT = func() string { return rt }
	goEnvGOROOT = func() (string, error) { return env, envErr }
	t.Cleanup(func() { runtimeGOROOT, goEnvGOROOT = savedRT, savedEnv })
}

// goroot makes a directory laid out as a Go installation whose Opticks
// holds text.
func goroot(t *testing.T, text string) string {
	t.Helper()
	root := t.TempDir()
	p := filepath.Join(root, filepath.FromSlash(OpticksPath))
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestOpticksRoots: runtime.GOROOT first, `go env GOROOT` when that has no
// copy (a binary built elsewhere or with -trimpath), and an error that
// says where it looked.
func TestOpticksRoots(t *testing.T) {
	a, b := goroot(t, "from runtime.GOROOT"), goroot(t, "from go env")
	gone := filepath.Join(t.TempDir(), "go")
	for _, c := range []struct {
		name    string
		rt, env string
		envErr  error
		want    string // the text read, or part of the error
		wantErr bool
	}{
		{name: "runtime.GOROOT first", rt: a, env: b, want: "from runtime.GOROOT"},
		{name: "runtime.GOROOT empty", rt: "", env: b, want: "from go env"},
		{name: "built on another machine", rt: gone, env: b, want: "from go env"},
		{name: "no go command", rt: gone, envErr: errors.New(`exec: "go": executable file not found in $PATH`),
			want: filepath.Join(gone, OpticksPath) + " (runtime.GOROOT): no such file or directory; `go env GOROOT`: exec: \"go\"", wantErr: true},
		{name: "nowhere", rt: "", env: "", want: "runtime.GOROOT is empty; go env GOROOT is empty", wantErr: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fakeGoroots(t, c.rt, c.env, c.envErr)
			got, err := loadOpticks()
			if c.wantErr {
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "give the file's path") {
					t.Errorf("got %q, %v; want an error containing %q", got, err, c.want)
				}
				return
			}
			if err != nil || !bytes.Equal(got, []byte(c.want)) {
				t.Errorf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
