package datasets

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

// Jane Austen's six novels come from Debian's archive, in the package
// r-cran-janeaustenr (an R package's lazy-load database), pinned by its
// SHA-256; the text is decoded here, with no R and no dpkg (DESIGN.md §4).
const (
	austenDeb       = "pool/main/r/r-cran-janeaustenr/r-cran-janeaustenr_1.0.0-1_all.deb"
	austenDebSize   = 1626392
	austenDebSHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
	// The corpus: every line of the books in austen_books() order, each
	// followed by "\n".
	austenSHA256 = "f2516f2139e3cecf49657122fed58ac46313f1fdff32a26fc66789293e92d573"
	austenBytes  = 4025029
	// AustenFile is the decoded corpus's name in its data directory, which
	// other programs (the PyTorch peer) read too.
	AustenFile = "austen.txt"
)

// austenBooks are the R objects of the six novels, in austen_books() order.
var austenBooks = []string{"sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"}

// MirrorEnv names the environment variable that overrides the Debian
// mirror the Austen corpus is fetched from.
const MirrorEnv = "MIXPREC_DEBIAN_MIRROR"

// debianMirror is the archive to fetch from: $MIXPREC_DEBIAN_MIRROR, else
// the first bookworm deb source in the machine's apt configuration, else
// deb.debian.org.
func debianMirror() string {
	if m := os.Getenv(MirrorEnv); m != "" {
		return strings.TrimSuffix(m, "/")
	}
	if m := aptMirror("/etc/apt"); m != "" {
		return m
	}
	return "http://deb.debian.org/debian"
}

// aptMirror returns the URI of the first "deb" source for bookworm's main
// component under dir (deb822 .sources files, then sources.list lines),
// or "" when there is none. Security archives are skipped: they hold no
// such package.
func aptMirror(dir string) string {
	var files []string
	if m, err := filepath.Glob(filepath.Join(dir, "sources.list.d", "*.sources")); err == nil {
		files = m
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, stanza := range strings.Split(string(b), "\n\n") {
			fields := map[string]string{}
			for _, line := range strings.Split(stanza, "\n") {
				if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
					fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
				}
			}
			if strings.Contains(" "+fields["types"]+" ", " deb ") && strings.Contains(" "+fields["suites"]+" ", " bookworm ") {
				for _, u := range strings.Fields(fields["uris"]) {
					if !strings.Contains(u, "security") {
						return strings.TrimSuffix(u, "/")
					}
				}
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "sources.list")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[0] == "deb" && !strings.HasPrefix(f[1], "[") && strings.HasPrefix(f[2], "bookworm") && !strings.Contains(f[1], "security") {
				return strings.TrimSuffix(f[1], "/")
			}
		}
	}
	return ""
}

// FetchAusten downloads r-cran-janeaustenr from the Debian mirror (see
// MirrorEnv), checks its SHA-256, decodes the six novels and writes the
// corpus to dir/austen.txt (through a temporary file, fsynced, renamed),
// reporting progress to progress when it is not nil.
func FetchAusten(dir string, progress io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("datasets: fetching the Austen corpus: %w", err)
	}
	url := debianMirror() + "/" + austenDeb
	if progress != nil {
		fmt.Fprintf(progress, "datasets: fetching Jane Austen's novels (%.1f MB) from %s\n", float64(austenDebSize)/1e6, redact(url))
	}
	resp, err := httpClient.Get(url)
	if err != nil {
		return fmt.Errorf("datasets: fetching the Austen corpus: %w (set %s to another Debian mirror)", err, MirrorEnv)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("datasets: fetching the Austen corpus: %s: %s (set %s to another Debian mirror)", redact(url), resp.Status, MirrorEnv)
	}
	var body io.Reader = io.LimitReader(resp.Body, austenDebSize+1)
	if progress != nil {
		body = &progressReader{r: body, size: austenDebSize, w: progress}
	}
	deb, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("datasets: fetching the Austen corpus: reading %s: %w", redact(url), err)
	}
	sum := sha256.Sum256(deb)
	if got := hex.EncodeToString(sum[:]); got != austenDebSHA256 {
		return fmt.Errorf("datasets: fetching the Austen corpus: %s has SHA-256 %s (%d bytes), want %s; it was not kept", redact(url), got, len(deb), austenDebSHA256)
	}
	text, err := AustenFromDeb(deb)
	if err != nil {
		return fmt.Errorf("datasets: fetching the Austen corpus: %w", err)
	}
	return writeChecked(filepath.Join(dir, AustenFile), text, austenSHA256)
}

// AustenFromDeb decodes the Austen corpus from the bytes of
// r-cran-janeaustenr's .deb: ar archive, data.tar.xz, the package's
// Rdata.rdb and Rdata.rdx, the six character vectors. It checks the
// result's SHA-256.
func AustenFromDeb(deb []byte) ([]byte, error) {
	text, err := decodeAustenDeb(deb)
	if err != nil {
		return nil, err
	}
	if got := sha256Hex(text); got != austenSHA256 {
		return nil, fmt.Errorf("the decoded corpus has SHA-256 %s (%d bytes), want %s (%d bytes)", got, len(text), austenSHA256, austenBytes)
	}
	return text, nil
}

// decodeAustenDeb is AustenFromDeb without the final check.
func decodeAustenDeb(deb []byte) ([]byte, error) {
	data, err := arMember(deb, "data.tar.xz")
	if err != nil {
		return nil, err
	}
	xr, err := xz.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("data.tar.xz: %w", err)
	}
	files := map[string][]byte{"Rdata.rdb": nil, "Rdata.rdx": nil}
	tr := tar.NewReader(xr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("data.tar.xz: %w", err)
		}
		base := filepath.Base(h.Name)
		if _, ok := files[base]; ok && strings.HasSuffix(filepath.ToSlash(filepath.Dir(h.Name)), "janeaustenr/data") {
			if h.Size > maxRObject {
				return nil, fmt.Errorf("data.tar.xz: %s claims %d bytes", h.Name, h.Size)
			}
			if files[base], err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("data.tar.xz: %s: %w", h.Name, err)
			}
		}
	}
	for name, b := range files {
		if b == nil {
			return nil, fmt.Errorf("data.tar.xz holds no janeaustenr/data/%s", name)
		}
	}
	objs, err := lazyLoadObjects(files["Rdata.rdx"], files["Rdata.rdb"], austenBooks)
	if err != nil {
		return nil, err
	}
	var text bytes.Buffer
	for _, book := range austenBooks {
		v := objs[book]
		if v.typ != rStr {
			return nil, fmt.Errorf("Rdata.rdb: %s is R type %d, not a character vector", book, v.typ)
		}
		for i, line := range v.strs {
			if !v.valid[i] {
				return nil, fmt.Errorf("Rdata.rdb: %s has NA at line %d", book, i+1)
			}
			text.WriteString(line)
			text.WriteByte('\n')
		}
	}
	return text.Bytes(), nil
}

// arMember returns the member called name of a Unix ar archive (a .deb).
func arMember(b []byte, name string) ([]byte, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(b, []byte(magic)) {
		return nil, errors.New("not an ar archive (.deb)")
	}
	for off := len(magic); off+60 <= len(b); {
		h := b[off : off+60]
		if string(h[58:60]) != "`\n" {
			return nil, fmt.Errorf("ar archive: bad header at %d", off)
		}
		var size int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(h[48:58])), "%d", &size); err != nil || size < 0 || off+60+size > len(b) {
			return nil, fmt.Errorf("ar archive: member at %d has a bad size %q", off, strings.TrimSpace(string(h[48:58])))
		}
		n := strings.TrimSuffix(strings.TrimSpace(string(h[0:16])), "/")
		if n == name {
			return b[off+60 : off+60+size], nil
		}
		off += 60 + size + size%2
	}
	return nil, fmt.Errorf("ar archive has no %s", name)
}

// writeChecked writes b to path through a temporary file in its directory,
// fsynced and renamed into place, after checking its SHA-256.
func writeChecked(path string, b []byte, want string) error {
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("datasets: %s would have SHA-256 %s, want %s; not written", filepath.Base(path), got, want)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return fmt.Errorf("datasets: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing to remove
	w := bufio.NewWriter(tmp)
	if _, err := w.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("datasets: writing %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("datasets: writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("datasets: writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("datasets: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("datasets: writing %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
