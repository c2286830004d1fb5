package datasets

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"
)

// Text is a character-level corpus, as nanoGPT's shakespeare_char prepares
// one: the vocabulary is the sorted distinct characters of the whole text,
// and the ids split 90/10 into training and validation.
type Text struct {
	Name  string  // "austen", "opticks", or the file's path
	Vocab []rune  // the sorted distinct characters (by code point)
	Train []int32 // the first int(0.9·n) ids, n the number of characters
	Val   []int32 // the rest
}

// In makes LoadText read (and, with Download, fetch) the Austen corpus in
// dir instead of its default directory (DefaultDir("austen")).
func In(dir string) LoadOption { return func(c *loadConfig) { c.dir = dir } }

// LoadText loads a corpus: "austen" (Jane Austen's six novels, from
// Debian's archive: see FetchAusten; fetched when missing with Download),
// "opticks" (Newton's Opticks, in every Go toolchain's
// src/testdata), or the path of any UTF-8 text file. The Austen file's
// SHA-256 is checked on every load.
func LoadText(corpus string, opts ...LoadOption) (*Text, error) {
	var c loadConfig
	c.progress = os.Stderr
	for _, o := range opts {
		o(&c)
	}
	var b []byte
	var err error
	switch corpus {
	case "austen":
		b, err = loadAusten(c)
	case "opticks":
		b, err = loadOpticks()
	case "":
		return nil, errors.New("datasets: no corpus named: want austen, opticks or a file's path")
	default:
		if b, err = os.ReadFile(corpus); err != nil {
			return nil, fmt.Errorf("datasets: corpus %w", err)
		}
	}
	if err != nil {
		return nil, err
	}
	return NewText(corpus, b)
}

// NewText builds the corpus of text b: its vocabulary and its split. It
// refuses an empty text and one that is not UTF-8.
func NewText(name string, b []byte) (*Text, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("datasets: corpus %s is empty", name)
	}
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return nil, fmt.Errorf("datasets: corpus %s is not UTF-8 text (byte 0x%02x at offset %d, line %d, starts no character)",
			name, b[i], i, 1+bytes.Count(b[:i], []byte("\n")))
	}
	seen := map[rune]bool{}
	n := 0
	for _, r := range string(b) {
		seen[r] = true
		n++
	}
	t := &Text{Name: name}
	for r := range seen {
		t.Vocab = append(t.Vocab, r)
	}
	slices.Sort(t.Vocab)
	index := make(map[rune]int32, len(t.Vocab))
	for i, r := range t.Vocab {
		index[r] = int32(i)
	}
	ids := make([]int32, 0, n)
	for _, r := range string(b) {
		ids = append(ids, index[r])
	}
	split := int(0.9 * float64(n))
	t.Train, t.Val = ids[:split:split], ids[split:]
	return t, nil
}

// Encode returns the ids of s's characters; the error names the first one
// not in the vocabulary.
func (t *Text) Encode(s string) ([]int32, error) {
	out := make([]int32, 0, len(s))
	for i, r := range s {
		id, ok := slices.BinarySearch(t.Vocab, r)
		if !ok {
			return nil, fmt.Errorf("datasets: %q at byte %d is not in the vocabulary of %s", r, i, t.Name)
		}
		out = append(out, int32(id))
	}
	return out, nil
}

// Decode returns the text of ids, which must be in the vocabulary: an id
// outside it is a programmer error and panics.
func (t *Text) Decode(ids []int32) string {
	var b strings.Builder
	b.Grow(len(ids))
	for i, id := range ids {
		if id < 0 || int(id) >= len(t.Vocab) {
			panic(fmt.Sprintf("datasets.Decode: id %d (at %d of %d) is outside the vocabulary of %s (%d characters)", id, i, len(ids), t.Name, len(t.Vocab)))
		}
		b.WriteRune(t.Vocab[id])
	}
	return b.String()
}

// SampleWindows fills x and y (of equal length, a multiple of block) with
// len(x)/block windows of ids at offsets o drawn in turn uniformly from
// [0, len(ids)-block) (nanoGPT's torch.randint(len(data) - block_size)):
// x = ids[o:o+block], y = ids[o+1:o+block+1].
func SampleWindows(ids []int32, block int, rng *rand.Rand, x, y []int32) {
	if block <= 0 || len(x) != len(y) || len(x)%block != 0 || len(ids) < block+1 {
		panic(fmt.Sprintf("datasets.SampleWindows: %d ids, block %d, x and y of %d and %d", len(ids), block, len(x), len(y)))
	}
	for w := 0; w < len(x); w += block {
		o := rng.IntN(len(ids) - block)
		copy(x[w:w+block], ids[o:o+block])
		copy(y[w:w+block], ids[o+1:o+block+1])
	}
}

// EvalWindows is how many non-overlapping windows of block ids, each with
// its next id as the last target, fit in ids, capped at max:
// min(max, (len(ids)-1)/block).
func EvalWindows(ids []int32, block, max int) int {
	if block <= 0 || max < 0 {
		panic(fmt.Sprintf("datasets.EvalWindows: block %d, max %d", block, max))
	}
	return min(max, (len(ids)-1)/block)
}

// EvalWindow fills x and y (block ids each) with window i:
// x = ids[i·block:(i+1)·block], y the same shifted by one. The window must
// fit, i < EvalWindows(ids, block, ...).
func EvalWindow(ids []int32, block, i int, x, y []int32) {
	if block <= 0 || len(x) < block || len(y) < block || i < 0 || i >= (len(ids)-1)/block {
		panic(fmt.Sprintf("datasets.EvalWindow: window %d of block %d in %d ids (%d windows fit), x and y of %d and %d",
			i, block, len(ids), max(0, (len(ids)-1)/max(block, 1)), len(x), len(y)))
	}
	copy(x[:block], ids[i*block:(i+1)*block])
	copy(y[:block], ids[i*block+1:(i+1)*block+1])
}

// loadAusten reads the Austen corpus from c's directory, fetching it when
// it is missing (or does not match its SHA-256) and c allows.
func loadAusten(c loadConfig) ([]byte, error) {
	dir := c.dir
	if dir == "" {
		d, err := DefaultDir("austen")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	path := filepath.Join(dir, AustenFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil && sha256Hex(b) == austenSHA256:
		return b, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("datasets: the Austen corpus: %w", err)
	case !c.download && err != nil:
		return nil, fmt.Errorf("datasets: no Austen corpus in %s: run make data, or let the program fetch it (datasets.Download)", dir)
	case !c.download:
		return nil, fmt.Errorf("datasets: %s is not the Austen corpus (SHA-256 %s, %d bytes; want %s, %d bytes): delete it and run make data", path, sha256Hex(b), len(b), austenSHA256, austenBytes)
	}
	if err == nil && c.progress != nil {
		fmt.Fprintf(c.progress, "datasets: %s does not match its SHA-256: replacing it\n", path)
	}
	if err := FetchAusten(dir, c.progress); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// OpticksPath is where Newton's Opticks is in a Go toolchain.
const OpticksPath = "src/testdata/Isaac.Newton-Opticks.txt"

// runtimeGOROOT and goEnvGOROOT are where loadOpticks looks, variables so
// that tests can stand in for them.
var (
	runtimeGOROOT = runtime.GOROOT
	goEnvGOROOT   = func() (string, error) {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		return strings.TrimSpace(string(out)), err
	}
)

// loadOpticks reads Opticks from the Go toolchain's tree: under
// runtime.GOROOT() first (free, and $GOROOT when that is set, else the
// toolchain the program was built with), then, when that has no copy (a
// binary built elsewhere, or with -trimpath, whose GOROOT is ""), under the
// root `go env GOROOT` names (the go command on PATH).
func loadOpticks() ([]byte, error) {
	var tried []string
	read := func(root, how string) []byte {
		if root == "" {
			tried = append(tried, how+" is empty")
			return nil
		}
		p := filepath.Join(root, OpticksPath)
		b, err := os.ReadFile(p)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%s): %v", p, how, errors.Unwrap(err)))
		}
		return b
	}
	if b := read(runtimeGOROOT(), "runtime.GOROOT"); b != nil {
		return b, nil
	}
	root, err := goEnvGOROOT()
	if err != nil {
		tried = append(tried, fmt.Sprintf("`go env GOROOT`: %v", err))
	} else if b := read(root, "go env GOROOT"); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("datasets: no Opticks in a Go toolchain (%s); install Go, or give the file's path", strings.Join(tried, "; "))
}
