package datasets

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mixprec/mixprec/atomicfile"
	"github.com/ulikunitz/xz"
)

// Jane Austen's six novels come from Debian's archive, in the package
// r-cran-janeaustenr (an R package's lazy-load database), pinned by its
// SHA-256; the text is decoded here, with no R and no dpkg (docs/design.md §4).
const (
	// austenDebFile is the package's file name, under which it is kept
	// beside the corpus, and austenDeb its path under a mirror's root.
	austenDebFile = "r-cran-janeaustenr_1.0.0-1_all.deb"
	austenDeb     = "pool/main/r/r-cran-janeaustenr/" + austenDebFile
	// AustenFile is the decoded corpus's name in its data directory, which
	// other programs (the PyTorch peer) read too.
	AustenFile = "austen.txt"
)

// The pinned package and corpus, variables only so that tests can serve a
// small package of their own.
var (
	austenDebSize   = 1626392
	austenDebSHA256 = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
	// The corpus: every line of the books in austen_books() order, each
	// followed by "\n".
	austenSHA256 = "f2516f2139e3cecf49657122fed58ac46313f1fdff32a26fc66789293e92d573"
	austenBytes  = 4025029
)

// austenBooks are the R objects of the six novels, in austen_books() order.
var austenBooks = []string{"sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"}

// MirrorEnv names the environment variable that, when set, is the one
// Debian archive the Austen corpus is fetched from (an http, https or
// file URL of the archive's root, e.g. http://ftp.de.debian.org/debian).
const MirrorEnv = "MIXPREC_DEBIAN_MIRROR"

// DefaultDebianMirror is the archive tried after those the machine's apt
// sources name.
const DefaultDebianMirror = "http://deb.debian.org/debian"

// austenSuite is the Debian release whose archives carry the package.
const austenSuite = "bookworm"

// aptDir is where debianMirrors reads apt's sources; tests point it
// elsewhere.
var aptDir = "/etc/apt"

// debianMirrors lists the archives to fetch the package from, in the order
// they are tried: $MIXPREC_DEBIAN_MIRROR alone when it is set; else the
// http, https and file URIs of the apt sources whose suites include
// bookworm (in the order apt reads them: sources.list, then
// sources.list.d's *.list and *.sources files by name), then
// DefaultDebianMirror. A mirror that fails (a proxy apt reaches and this
// process does not, a missing file) passes the turn to the next.
func debianMirrors() []string {
	if m := strings.TrimSpace(os.Getenv(MirrorEnv)); m != "" {
		return []string{strings.TrimSuffix(m, "/")}
	}
	var ms []string
	for _, m := range append(aptMirrors(aptDir), DefaultDebianMirror) {
		if m = strings.TrimSuffix(m, "/"); !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	return ms
}

// aptMirrors returns the URIs of the deb sources for bookworm under dir (an
// /etc/apt). Unreadable files list nothing: apt's sources are a hint, and
// the default mirror remains.
func aptMirrors(dir string) []string {
	ms := classicSources(filepath.Join(dir, "sources.list"))
	parts, _ := filepath.Glob(filepath.Join(dir, "sources.list.d", "*")) // sorted; the pattern is valid
	for _, p := range parts {
		switch {
		case strings.HasSuffix(p, ".list"):
			ms = append(ms, classicSources(p)...)
		case strings.HasSuffix(p, ".sources"):
			ms = append(ms, deb822Sources(p)...)
		}
	}
	return ms
}

// fetchableURI reports whether fetchDeb can read from the mirror URI;
// apt's other methods (cdrom:, mirror+http:, tor+http:, ...) it cannot.
func fetchableURI(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https" || p.Scheme == "file")
}

// classicSources reads one-line apt sources, "deb [options] URI suite
// component...", and returns the URIs of the deb lines for austenSuite.
func classicSources(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var uris []string
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, which may hold spaces
			i := slices.IndexFunc(f, func(s string) bool { return strings.HasSuffix(s, "]") })
			if i < 0 {
				continue
			}
			f = f[i+1:]
		}
		if len(f) >= 2 && f[1] == austenSuite && fetchableURI(f[0]) {
			uris = append(uris, f[0])
		}
	}
	return uris
}

// deb822Sources reads deb822 apt sources (stanzas of "Field: value" lines,
// a value continued on lines that start with white space, stanzas
// separated by blank lines) and returns the URIs of the enabled stanzas
// whose Types include deb and whose Suites include austenSuite.
func deb822Sources(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var uris []string
	stanza, last := map[string]string{}, ""
	end := func() {
		if slices.Contains(strings.Fields(stanza["types"]), "deb") &&
			slices.Contains(strings.Fields(stanza["suites"]), austenSuite) &&
			!strings.EqualFold(strings.TrimSpace(stanza["enabled"]), "no") {
			for _, u := range strings.Fields(stanza["uris"]) {
				if fetchableURI(u) {
					uris = append(uris, u)
				}
			}
		}
		clear(stanza)
		last = ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
		case strings.TrimSpace(line) == "":
			end()
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				stanza[last] += " " + strings.TrimSpace(line)
			}
		default:
			if k, v, ok := strings.Cut(line, ":"); ok {
				last = strings.ToLower(strings.TrimSpace(k))
				stanza[last] = strings.TrimSpace(v)
			}
		}
	}
	end()
	return uris
}

// FetchAusten makes sure dir holds the Austen corpus as austen.txt and,
// beside it, the package it is decoded from (its .deb, 1.6 MB), both
// checked against their pinned SHA-256. It returns at once when both are
// right. A wrong or missing package is downloaded from the first Debian
// mirror that serves it with its pinned size and SHA-256
// ($MIXPREC_DEBIAN_MIRROR, else the machine's apt sources, else
// deb.debian.org: see MirrorEnv); a wrong or missing corpus is decoded from
// the package. Files are written through a temporary file, fsynced and
// renamed. Progress goes to progress when it is not nil.
//
// The package is kept so that a damaged corpus is rebuilt without the
// network, and so that the decoder's tests run on the real package
// wherever make data has run.
func FetchAusten(dir string, progress io.Writer) error {
	textPath, debPath := filepath.Join(dir, AustenFile), filepath.Join(dir, austenDebFile)
	text, err := os.ReadFile(textPath)
	textOK := err == nil && sha256Hex(text) == austenSHA256
	deb, err := os.ReadFile(debPath)
	debOK := err == nil && sha256Hex(deb) == austenDebSHA256
	if textOK && debOK {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("datasets: fetching the Austen corpus: %w", err)
	}
	if !debOK {
		if deb, err = downloadDeb(progress); err != nil {
			return err
		}
		if err := writeChecked(debPath, deb, austenDebSHA256); err != nil {
			return err
		}
	}
	if textOK {
		return nil
	}
	if progress != nil {
		fmt.Fprintf(progress, "datasets: decoding Jane Austen's novels from %s\n", debPath)
	}
	if text, err = AustenFromDeb(deb); err != nil {
		return fmt.Errorf("datasets: decoding the Austen corpus from %s: %w", debPath, err)
	}
	return writeChecked(textPath, text, austenSHA256)
}

// downloadDeb returns the package from the first of debianMirrors that
// serves it right.
func downloadDeb(progress io.Writer) ([]byte, error) {
	var tried []string
	for _, m := range debianMirrors() {
		deb, err := fetchDeb(m, progress)
		if err == nil {
			return deb, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", redact(m), err))
	}
	return nil, fmt.Errorf("datasets: fetching the Austen corpus: %s (set %s to a Debian mirror that has %s)",
		strings.Join(tried, "; "), MirrorEnv, austenDeb)
}

// fetchDeb reads the package from one mirror (http, https or file URL)
// and returns it when it has the pinned size and SHA-256. It never reads
// more than one byte past the pinned size, so a wrong answer cannot fill
// memory.
func fetchDeb(mirror string, progress io.Writer) ([]byte, error) {
	var body io.Reader
	size := int64(-1)
	if p, ok := strings.CutPrefix(mirror, "file://"); ok {
		f, err := os.Open(filepath.FromSlash(p + "/" + austenDeb))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			size = fi.Size()
		}
		body = f
	} else {
		resp, err := httpClient.Get(mirror + "/" + austenDeb)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, errors.New(resp.Status)
		}
		size, body = resp.ContentLength, resp.Body
	}
	if size >= 0 && size != int64(austenDebSize) {
		return nil, fmt.Errorf("the package is %d bytes, want %d", size, austenDebSize)
	}
	if progress != nil {
		fmt.Fprintf(progress, "datasets: fetching Jane Austen's novels (%.1f MB) from %s\n", float64(austenDebSize)/1e6, redact(mirror))
		body = &progressReader{r: body, size: int64(austenDebSize), w: progress}
	}
	deb, err := io.ReadAll(io.LimitReader(body, int64(austenDebSize)+1))
	if err != nil {
		return nil, err
	}
	if got := sha256Hex(deb); len(deb) != austenDebSize || got != austenDebSHA256 {
		return nil, fmt.Errorf("the package has %d bytes and SHA-256 %s, want %d and %s; it was not kept", len(deb), got, austenDebSize, austenDebSHA256)
	}
	return deb, nil
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
// synced and renamed into place (atomicfile), after checking its SHA-256.
func writeChecked(path string, b []byte, want string) error {
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("datasets: %s would have SHA-256 %s, want %s; not written", filepath.Base(path), got, want)
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("datasets: writing %s: %w", path, err)
	}
	return nil
}
