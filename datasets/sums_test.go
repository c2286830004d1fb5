package datasets_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mixprec/mixprec/datasets"
)

// pinnedFiles writes small MNIST files (gzipped) without a SHA256SUMS and
// installs their digests as the published ones, as a cache fetched by
// FetchMNIST holds them.
func pinnedFiles(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f := newMNISTFiles(8)
	f.gz = true
	writeMNIST(t, dir, f)
	os.Remove(filepath.Join(dir, datasets.SumsFile))
	sums := map[string]string{}
	for _, name := range gzNames {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		d := sha256.Sum256(b)
		sums[name] = hex.EncodeToString(d[:])
	}
	t.Cleanup(datasets.SetMNISTSums(sums))
	return dir
}

// relabel rewrites the gzipped label file at path with its first label
// changed: a valid file that is no longer the one published.
func relabel(t *testing.T, path string) {
	t.Helper()
	_, labels, err := datasets.ReadIDX(path)
	if err != nil {
		t.Fatal(err)
	}
	labels[0] = (labels[0] + 1) % 10
	writeFile(t, path, gzipped(t, idxBytes(0x801, []int{len(labels)}, labels)))
}

// TestLoadMNISTChecksSums alters files after they were fetched: each is
// refused with a SumError naming it and its digests, whether its
// expected digest is the published one or its directory's SHA256SUMS, and
// an uncompressed file beside its .gz is checked too.
func TestLoadMNISTChecksSums(t *testing.T) {
	t.Run("intact", func(t *testing.T) {
		if _, _, err := datasets.LoadMNIST(pinnedFiles(t)); err != nil {
			t.Fatal(err)
		}
	})
	for _, tt := range []struct {
		name   string
		damage func(t *testing.T, dir string) string // returns the file it damaged
		source string
	}{
		{"relabelled", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "train-labels-idx1-ubyte.gz")
			relabel(t, p)
			return p
		}, "the published MNIST file"},
		{"cut short", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "t10k-images-idx3-ubyte.gz")
			b, _ := os.ReadFile(p)
			writeFile(t, p, b[:len(b)-9])
			return p
		}, "the published MNIST file"},
		{"uncompressed beside", func(t *testing.T, dir string) string {
			// Not the published bytes, and preferred over the .gz.
			p := filepath.Join(dir, "train-labels-idx1-ubyte")
			writeFile(t, p, idxBytes(0x801, []int{8}, make([]byte, 8)))
			return p
		}, "the published MNIST file"},
		{"against SHA256SUMS", func(t *testing.T, dir string) string {
			writeSums(t, dir)
			p := filepath.Join(dir, "t10k-labels-idx1-ubyte.gz")
			relabel(t, p)
			return p
		}, datasets.SumsFile},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := pinnedFiles(t)
			p := tt.damage(t, dir)
			_, _, err := datasets.LoadMNIST(dir, datasets.FetchHint("run `make data`"))
			var bad *datasets.SumError
			if !errors.As(err, &bad) || bad.Path != p || !strings.Contains(err.Error(), tt.source) || !strings.HasSuffix(err.Error(), "delete it and run `make data`") {
				t.Errorf("LoadMNIST = %v; want a SumError for %s against %s, ending with the hint", err, p, tt.source)
			}
		})
	}
	t.Run("unlisted", func(t *testing.T) {
		dir := pinnedFiles(t)
		writeFile(t, filepath.Join(dir, datasets.SumsFile), []byte(strings.Repeat("ab", 32)+"  other-file\n"))
		_, _, err := datasets.LoadMNIST(dir)
		wantErr(t, err, "lists no SHA-256 for train-images-idx3-ubyte.gz")
	})
	t.Run("malformed", func(t *testing.T) {
		dir := pinnedFiles(t)
		writeFile(t, filepath.Join(dir, datasets.SumsFile), []byte("not a digest\n"))
		_, _, err := datasets.LoadMNIST(dir)
		wantErr(t, err, "SHA256SUMS line 1")
	})
	t.Run("hint", func(t *testing.T) {
		_, _, err := datasets.LoadMNIST(filepath.Join(t.TempDir(), "none"), datasets.FetchHint("run `make data`"))
		if err == nil || !strings.Contains(err.Error(), "does not exist; run `make data`") || strings.Contains(err.Error(), "Download") {
			t.Errorf("a missing directory: %v; want the hint instead of a Go function", err)
		}
	})
}

// TestLoadMNISTDownloadRefetches corrupts a file in a fetched cache:
// LoadMNIST with Download moves it aside and fetches it again.
func TestLoadMNISTDownloadRefetches(t *testing.T) {
	srv, hits := proxy(t, fakeModule(t, ""))
	isolate(t, srv.URL)
	dir := t.TempDir()
	if _, _, err := datasets.LoadMNIST(dir, datasets.Download(), datasets.Progress(nil)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "train-labels-idx1-ubyte.gz")
	good, _ := os.ReadFile(p)
	relabel(t, p)
	var progress bytes.Buffer
	if _, _, err := datasets.LoadMNIST(dir, datasets.Download(), datasets.Progress(&progress)); err != nil {
		t.Fatalf("LoadMNIST of a corrupt cache with Download: %v", err)
	}
	if now, _ := os.ReadFile(p); !bytes.Equal(now, good) || hits.Load() != 2 {
		t.Errorf("the file was not fetched again (%d downloads)", hits.Load())
	}
	if _, err := os.Stat(p + ".corrupt"); err != nil || !strings.Contains(progress.String(), "fetching it again") {
		t.Errorf("the corrupt file was not kept aside and reported: %v, %q", err, progress.String())
	}
}

// TestFetchMNISTRemovesStalePartials plants the temporaries of fetches
// killed long ago and of one still running: a later fetch removes the old
// ones only.
func TestFetchMNISTRemovesStalePartials(t *testing.T) {
	dir := pinnedFiles(t)
	old := []string{".mnist-123.zip.partial", ".train-images-idx3-ubyte.gz.456.partial", ".train-labels-idx1-ubyte.gz.321.tmp"}
	fresh := ".t10k-labels-idx1-ubyte.gz.789.partial"
	others := []string{".notes.partial", ".notes.txt.654.tmp"} // not MNIST's
	for _, n := range append(append(old, fresh), others...) {
		writeFile(t, filepath.Join(dir, n), []byte("half"))
	}
	hour := time.Now().Add(-time.Hour)
	for _, n := range append(old, others...) {
		os.Chtimes(filepath.Join(dir, n), hour, hour)
	}
	if err := datasets.FetchMNIST(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range old {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s is still there", n)
		}
	}
	for _, n := range append(others, fresh) {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}
