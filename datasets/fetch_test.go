package datasets_test

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mixprec/mixprec/atomicfile"
	"github.com/mixprec/mixprec/datasets"
)

var gzNames = []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
	"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}

// fakeModule writes small gzipped MNIST files, installs their digests as the
// expected ones, and returns the module zip holding them (with tamper
// applied to the named file's bytes when it is set).
func fakeModule(t *testing.T, tamper string) []byte {
	t.Helper()
	src := t.TempDir()
	f := newMNISTFiles(12)
	f.gz = true
	writeMNIST(t, src, f)
	sums := map[string]string{}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range append([]string{"README.md"}, gzNames...) {
		data := []byte("not data")
		if name != "README.md" {
			var err error
			if data, err = os.ReadFile(filepath.Join(src, name)); err != nil {
				t.Fatal(err)
			}
			d := sha256.Sum256(data)
			sums[name] = hex.EncodeToString(d[:])
			if name == tamper {
				data = bytes.Clone(data)
				data[len(data)/2] ^= 1
			}
			name = "data/" + name
		}
		w, err := zw.Create(strings.TrimSuffix(datasets.MNISTZipPrefix, "data/") + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(datasets.SetMNISTSums(sums))
	return buf.Bytes()
}

// proxy serves zip at the module's proxy path and counts requests; every
// other path is a 404, as a proxy without the module answers.
func proxy(t *testing.T, zipBytes []byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if zipBytes == nil || r.URL.Path != "/"+datasets.MNISTZipPath() {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(len(zipBytes)))
		w.Write(zipBytes)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// isolate points the module cache at an empty directory, so that only the
// proxies of the test are used.
func isolate(t *testing.T, goproxy string) {
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOPROXY", goproxy)
}

func TestLoadMNISTDownload(t *testing.T) {
	srv, hits := proxy(t, fakeModule(t, ""))
	empty, _ := proxy(t, nil)
	isolate(t, empty.URL+","+srv.URL) // the first proxy lacks the module: a comma moves on
	dir := filepath.Join(t.TempDir(), "new", "mnist")
	var progress bytes.Buffer
	train, test, err := datasets.LoadMNIST(dir, datasets.Download(), datasets.Progress(&progress))
	if err != nil {
		t.Fatalf("LoadMNIST with Download: %v", err)
	}
	if train.Len() != 12 || test.Len() != 6 {
		t.Errorf("loaded %d training and %d test samples, want 12 and 6", train.Len(), test.Len())
	}
	for _, want := range []string{"fetching MNIST", srv.URL, "100%", "MNIST is in " + dir} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress does not show %q:\n%s", want, progress.String())
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want exactly the four files (no temporaries left)", dir, names)
	}
	// A second load finds the files and does not download again.
	if _, _, err := datasets.LoadMNIST(dir, datasets.Download(), datasets.Progress(nil)); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 1 {
		t.Errorf("the proxy served the zip %d times, want 1", hits.Load())
	}
}

func TestLoadMNISTDefaultDir(t *testing.T) {
	srv, _ := proxy(t, fakeModule(t, ""))
	isolate(t, srv.URL)
	root := t.TempDir()
	t.Setenv("MIXPREC_DATA", root)
	if _, _, err := datasets.LoadMNIST("", datasets.Download(), datasets.Progress(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "mnist", gzNames[0])); err != nil {
		t.Errorf("LoadMNIST(\"\") did not fetch into $MIXPREC_DATA/mnist: %v", err)
	}
	t.Setenv("MIXPREC_DATA", "")
	t.Setenv("XDG_CACHE_HOME", filepath.Join(root, "cache"))
	dir, err := datasets.DefaultDir("mnist")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "cache", "mixprec", "mnist"); dir != want {
		t.Errorf("DefaultDir(mnist) without $MIXPREC_DATA = %s, want %s", dir, want)
	}
}

func TestFetchMNISTCorrupt(t *testing.T) {
	srv, _ := proxy(t, fakeModule(t, "train-labels-idx1-ubyte.gz"))
	isolate(t, srv.URL)
	dir := t.TempDir()
	err := datasets.FetchMNIST(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "train-labels-idx1-ubyte.gz has SHA-256") {
		t.Fatalf("FetchMNIST of a corrupt file: err = %v, want one naming the file and its SHA-256", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "train-labels-idx1-ubyte.gz")); err == nil {
		t.Error("the corrupt file was kept under its final name")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, temp := atomicfile.TempFor(e.Name()); temp || strings.Contains(e.Name(), "partial") {
			t.Errorf("temporary %s left behind", e.Name())
		}
	}
}

func TestFetchMNISTKeepsUserFiles(t *testing.T) {
	srv, _ := proxy(t, fakeModule(t, ""))
	isolate(t, srv.URL)
	dir := t.TempDir()
	mine := []byte("the user's own file")
	// An uncompressed file counts as present; the user's .gz is never replaced.
	for _, name := range []string{"train-images-idx3-ubyte", "t10k-labels-idx1-ubyte.gz"} {
		if err := os.WriteFile(filepath.Join(dir, name), mine, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := datasets.FetchMNIST(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"train-images-idx3-ubyte", "t10k-labels-idx1-ubyte.gz"} {
		if got, _ := os.ReadFile(filepath.Join(dir, name)); !bytes.Equal(got, mine) {
			t.Errorf("%s was replaced", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "train-images-idx3-ubyte.gz")); err == nil {
		t.Error("fetched train-images-idx3-ubyte.gz although its uncompressed twin was there")
	}
	for _, name := range []string{"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("missing %s was not fetched: %v", name, err)
		}
	}
}

func TestFetchMNISTProxyList(t *testing.T) {
	zipBytes := fakeModule(t, "")
	good, _ := proxy(t, zipBytes)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer broken.Close()
	fileProxy := t.TempDir()
	p := filepath.Join(fileProxy, filepath.FromSlash(datasets.MNISTZipPath()))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, zipBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		goproxy string
		ok      bool
		want    string // in the error
	}{
		{broken.URL + "|" + good.URL, true, ""},                  // a pipe moves on after any failure
		{broken.URL + "," + good.URL, false, "500"},              // a comma only after a 404
		{"off", false, "GOPROXY=off"},                            //
		{"direct", false, "direct (not supported"},               //
		{"file://" + filepath.ToSlash(fileProxy), true, ""},      // the go command's file:// proxies
		{"https://user:secret@127.0.0.1:1", false, "user:xxxxx"}, // passwords stay out of messages
	}
	for _, tt := range tests {
		t.Run(tt.goproxy, func(t *testing.T) {
			isolate(t, tt.goproxy)
			err := datasets.FetchMNIST(t.TempDir(), nil)
			switch {
			case tt.ok && err != nil:
				t.Errorf("GOPROXY=%s: %v", tt.goproxy, err)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("GOPROXY=%s: err = %v, want one containing %q", tt.goproxy, err, tt.want)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Errorf("error shows the proxy's password: %v", err)
			}
		})
	}
}

func TestFetchMNISTFromModuleCache(t *testing.T) {
	zipBytes := fakeModule(t, "")
	cache := t.TempDir()
	p := filepath.Join(cache, "cache", "download", filepath.FromSlash(datasets.MNISTZipPath()))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, zipBytes, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMODCACHE", cache)
	t.Setenv("GOPROXY", "off") // the cache needs no network
	if err := datasets.FetchMNIST(t.TempDir(), nil); err != nil {
		t.Fatalf("FetchMNIST from the module cache: %v", err)
	}
}
