package datasets

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mixprec/mixprec/atomicfile"
)

// SumsFile is the name of the file in a data directory that lists the
// SHA-256 of its files, as sha256sum writes it ("<hex digest>  <name>"
// per line). Where it is present, the loaders check each file they read
// against it instead of against the published files' digests: it is how a
// directory of one's own files in MNIST's format (a test's, another data
// set's) says what they should hold.
const SumsFile = "SHA256SUMS"

// mnistRawSums are the SHA-256 digests of the four MNIST files
// decompressed, for a user who unpacked the download (gunzip keeps the
// bytes, so the digest is fixed).
var mnistRawSums = map[string]string{
	"train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
	"train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
	"t10k-images-idx3-ubyte":  "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
	"t10k-labels-idx1-ubyte":  "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

// SumError reports a data file whose SHA-256 is not the one it should
// have: a corrupt, cut short or altered copy.
type SumError struct {
	Path      string
	Got, Want string
	Source    string // where Want comes from: "the published MNIST file" or the SHA256SUMS file
	hint      string // how to fetch the data again
}

func (e *SumError) Error() string {
	return fmt.Sprintf("datasets: %s has SHA-256 %s, not %s's %s: the file is corrupt, cut short or altered; delete it and %s",
		e.Path, e.Got, e.Source, e.Want, e.hint)
}

// sums is what a data directory's files should hold: from its SHA256SUMS
// when it has one, else the published digests (nil for data sets whose
// files are not pinned, which are then read unchecked).
type sums struct {
	want   map[string]string
	source string
}

// dirSums reads dir's SHA256SUMS, or falls back to pinned.
func dirSums(dir string, pinned map[string]string, pinnedSource string) (sums, error) {
	p := filepath.Join(dir, SumsFile)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return sums{pinned, pinnedSource}, nil
	}
	if err != nil {
		return sums{}, fmt.Errorf("datasets: %w", err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, name, ok := strings.Cut(line, " ")
		name = strings.TrimPrefix(strings.TrimLeft(name, " "), "*") // "*name" is sha256sum's binary mode
		if _, err := hex.DecodeString(sum); !ok || err != nil || len(sum) != 2*sha256.Size || name == "" {
			return sums{}, fmt.Errorf("datasets: %s line %d is not \"<SHA-256 in hex>  <file name>\": %q", p, n, line)
		}
		want[name] = strings.ToLower(sum)
	}
	if err := sc.Err(); err != nil {
		return sums{}, fmt.Errorf("datasets: %s: %w", p, err)
	}
	return sums{want, p}, nil
}

// check verifies the file at path against what s says it should hold.
func (s sums) check(path, hint string) error {
	if s.want == nil {
		return nil
	}
	name := filepath.Base(path)
	want, ok := s.want[name]
	if !ok {
		return fmt.Errorf("datasets: %s lists no SHA-256 for %s, so it cannot be checked; add its line (sha256sum %s >> %s)",
			s.source, name, name, s.source)
	}
	got, err := atomicfile.SHA256(path)
	if err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	if got != want {
		return &SumError{Path: path, Got: got, Want: want, Source: s.source, hint: hint}
	}
	return nil
}

// stalePartial is how old a download's temporary file must be before a
// later fetch removes it: a fetch that is still running (another rank's,
// into the same directory) writes to its file far more often than that.
const stalePartial = 10 * time.Minute

// removeStalePartials removes the temporary files of MNIST downloads into
// dir that were killed before they finished.
func removeStalePartials(dir string, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		target, temp := atomicfile.TempFor(name)
		partial := strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".partial") // a download's, or an older fetch's file's
		if !(temp || partial) || !e.Type().IsRegular() {
			continue
		}
		ours := partial && strings.HasPrefix(name, ".mnist-")
		for _, n := range mnistNames {
			ours = ours || (partial && strings.HasPrefix(name, "."+n+".")) || target == n
		}
		if fi, err := e.Info(); err == nil && ours && now.Sub(fi.ModTime()) > stalePartial {
			os.Remove(filepath.Join(dir, name))
		}
	}
}
