package datasets

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mixprec/mixprec/atomicfile"
)

// smallAusten builds a package laid out as r-cran-janeaustenr, a few lines
// per book, and pins it and its text in place of the real ones until the
// test ends.
func smallAusten(t *testing.T, extra string) (deb []byte, text string) {
	t.Helper()
	books := map[string][]string{}
	var b strings.Builder
	for i, name := range austenBooks {
		lines := []string{strings.ToUpper(name), "", fmt.Sprintf("Chapter %d: £%d a year%s", i+1, 1000*(i+1), extra)}
		books[name] = lines
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	rdx, rdb := lazyLoadDB(t, books, austenBooks)
	deb = fakeDeb(t, map[string][]byte{"Rdata.rdx": rdx, "Rdata.rdb": rdb})
	text = b.String()
	size, sum, textSum, textBytes := austenDebSize, austenDebSHA256, austenSHA256, austenBytes
	austenDebSize, austenDebSHA256, austenSHA256, austenBytes = len(deb), sha256Hex(deb), sha256Hex([]byte(text)), len(text)
	t.Cleanup(func() { austenDebSize, austenDebSHA256, austenSHA256, austenBytes = size, sum, textSum, textBytes })
	return deb, text
}

// debServer is a Debian mirror at URL+"/debian" that serves body (or
// answers status) for the package's pool path, counting the requests.
type debServer struct {
	*httptest.Server
	hits   atomic.Int32
	body   atomic.Pointer[[]byte]
	status atomic.Int32
}

func newDebServer(t *testing.T, body []byte) *debServer {
	s := &debServer{}
	s.serve(body, http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.URL.Path != "/debian/"+austenDeb {
			http.NotFound(w, r)
			return
		}
		if st := int(s.status.Load()); st != http.StatusOK {
			w.WriteHeader(st)
			return
		}
		w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *debServer) serve(body []byte, status int) {
	s.body.Store(&body)
	s.status.Store(int32(status))
}

// partials lists the temporary files left in dir: a download's and a
// write's (atomicfile).
func partials(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var p []string
	for _, e := range ents {
		if _, temp := atomicfile.TempFor(e.Name()); temp || strings.Contains(e.Name(), ".partial") {
			p = append(p, e.Name())
		}
	}
	return p
}

func TestFetchAusten(t *testing.T) {
	deb, text := smallAusten(t, "")
	srv := newDebServer(t, deb)
	t.Setenv(MirrorEnv, srv.URL+"/debian/")
	t.Run("fetches, decodes, writes", func(t *testing.T) { fetchWrites(t, text) })
	badDownloads(t, srv, deb)
	t.Run("a file mirror", func(t *testing.T) { fileMirror(t, deb, text) })
	t.Run("the next mirror when one fails", func(t *testing.T) { nextMirror(t, srv) })
	t.Run("a package whose text is not the pinned one", func(t *testing.T) { otherText(t, srv, deb, text) })
}

// fetchWrites fetches the corpus from the mirror: it decodes to text,
// which is written, with progress and no temporary file left.
func fetchWrites(t *testing.T, text string) {
	dir := filepath.Join(t.TempDir(), "austen")
	var progress bytes.Buffer
	tx, err := LoadText("austen", In(dir), Download(), Progress(&progress))
	if err != nil {
		t.Fatalf("LoadText: %v", err)
	}
	if got := tx.Decode(slices.Concat(tx.Train, tx.Val)); got != text {
		t.Errorf("corpus %q, want %q", got, text)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, AustenFile)); string(b) != text {
		t.Errorf("%s holds %q, want %q", AustenFile, b, text)
	}
	for _, w := range []string{"fetching Jane Austen's novels", "100%"} {
		if !strings.Contains(progress.String(), w) {
			t.Errorf("progress lacks %q:\n%s", w, progress.String())
		}
	}
	if p := partials(dir); len(p) != 0 {
		t.Errorf("temporary files left: %v", p)
	}
}

// badDownloads serves a download that is corrupt, short, long or missing:
// each is refused with one error naming the problem and the mirror
// variable, and leaves nothing.
func badDownloads(t *testing.T, srv *debServer, deb []byte) {
	corrupt := slices.Clone(deb)
	corrupt[len(corrupt)/2] ^= 1
	for _, c := range []struct {
		name   string
		body   []byte
		status int
		want   string
	}{
		{"a corrupt download", corrupt, http.StatusOK, "SHA-256"},
		{"a short download", deb[:len(deb)-1], http.StatusOK, fmt.Sprintf("is %d bytes, want %d", len(deb)-1, len(deb))},
		{"a longer download", append(slices.Clone(deb), 0), http.StatusOK, fmt.Sprintf("is %d bytes, want %d", len(deb)+1, len(deb))},
		{"not on the mirror", deb, http.StatusNotFound, "404 Not Found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv.serve(c.body, c.status)
			defer srv.serve(deb, http.StatusOK)
			dir := filepath.Join(t.TempDir(), "austen")
			_, err := LoadText("austen", In(dir), Download(), Progress(nil))
			for _, w := range []string{c.want, "set " + MirrorEnv} {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want one containing %q", err, w)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("files left in %s: %v", dir, ents)
			}
		})
	}
}

// fileMirror fetches from a file:// mirror.
func fileMirror(t *testing.T, deb []byte, text string) {
	root := t.TempDir()
	p := filepath.Join(root, filepath.FromSlash(austenDeb))
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, deb, 0o644)
	t.Setenv(MirrorEnv, "file://"+filepath.ToSlash(root))
	dir := t.TempDir()
	if err := FetchAusten(dir, nil); err != nil {
		t.Fatalf("FetchAusten: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, AustenFile)); string(b) != text {
		t.Errorf("got %q, want %q", b, text)
	}
}

// nextMirror tries apt's mirrors in turn when one fails.
func nextMirror(t *testing.T, srv *debServer) {
	apt := t.TempDir()
	saved := aptDir
	aptDir = apt
	defer func() { aptDir = saved }()
	t.Setenv(MirrorEnv, "")
	os.WriteFile(filepath.Join(apt, "sources.list"), []byte(
		"deb "+srv.URL+"/nothing-here bookworm main\ndeb "+srv.URL+"/debian bookworm main\n"), 0o644)
	before := srv.hits.Load()
	dir := t.TempDir()
	if err := FetchAusten(dir, nil); err != nil {
		t.Fatalf("FetchAusten: %v", err)
	}
	if n := srv.hits.Load() - before; n != 2 {
		t.Errorf("%d requests, want 2 (the first mirror, then the second)", n)
	}
}

// otherText refuses a package that decodes to other text than the pinned
// corpus, and writes nothing.
func otherText(t *testing.T, srv *debServer, deb []byte, text string) {
	other, _ := smallAusten(t, " (another edition)")
	austenSHA256 = sha256Hex([]byte(text)) // the pinned text stays the first package's
	srv.serve(other, http.StatusOK)
	defer srv.serve(deb, http.StatusOK)
	dir := t.TempDir()
	err := FetchAusten(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "the decoded corpus has SHA-256") {
		t.Errorf("error %v, want the decoded text refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, AustenFile)); err == nil {
		t.Errorf("%s was written", AustenFile)
	}
}

// TestAustenKeptPackage follows one data directory through the life of
// the package kept beside the corpus.
func TestAustenKeptPackage(t *testing.T) {
	deb, text := smallAusten(t, "")
	srv := newDebServer(t, deb)
	t.Setenv(MirrorEnv, srv.URL+"/debian")
	dir := filepath.Join(t.TempDir(), "austen")
	textPath, debPath := filepath.Join(dir, AustenFile), filepath.Join(dir, austenDebFile)
	requests := func(t *testing.T, f func(), want int32) {
		t.Helper()
		before := srv.hits.Load()
		f()
		if n := srv.hits.Load() - before; n != want {
			t.Errorf("%d requests to the mirror, want %d", n, want)
		}
	}
	load := func(t *testing.T) {
		t.Helper()
		tx, err := LoadText("austen", In(dir), Download(), Progress(nil))
		if err != nil {
			t.Fatalf("LoadText: %v", err)
		}
		if got := tx.Decode(slices.Concat(tx.Train, tx.Val)); got != text {
			t.Errorf("corpus %q, want %q", got, text)
		}
	}
	fetch := func(t *testing.T) {
		t.Helper()
		if err := FetchAusten(dir, nil); err != nil {
			t.Fatalf("FetchAusten: %v", err)
		}
	}
	same := func(t *testing.T, p string, want []byte) {
		t.Helper()
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: %d bytes, %v; want the %d bytes fetched", p, len(b), err, len(want))
		}
	}

	t.Run("the first load fetches and keeps the package", func(t *testing.T) {
		requests(t, func() { load(t) }, 1)
		same(t, debPath, deb)
		same(t, textPath, []byte(text))
	})
	t.Run("right files are read as they are", func(t *testing.T) {
		requests(t, func() { load(t); fetch(t) }, 0)
	})
	t.Run("a damaged corpus is rebuilt from the package", func(t *testing.T) {
		os.WriteFile(textPath, []byte(text[:10]), 0o644)
		if _, err := LoadText("austen", In(dir)); err == nil || !strings.Contains(err.Error(), "is not the Austen corpus") {
			t.Errorf("without Download: %v, want the damaged file refused", err)
		}
		requests(t, func() { load(t) }, 0)
		same(t, textPath, []byte(text))
	})
	t.Run("a damaged package is fetched again", func(t *testing.T) {
		os.WriteFile(debPath, deb[:100], 0o644)
		requests(t, func() { fetch(t) }, 1)
		same(t, debPath, deb)
	})
	t.Run("a missing package is restored by FetchAusten, not by loading", func(t *testing.T) {
		os.Remove(debPath)
		requests(t, func() { load(t) }, 0)
		requests(t, func() { fetch(t) }, 1)
		same(t, debPath, deb)
	})
	if p := partials(dir); len(p) != 0 {
		t.Errorf("temporary files left: %v", p)
	}
}

// TestAustenPackage decodes the real package, which make data keeps in the
// data directory, and checks every figure issue 39 gives for the corpus;
// then it serves the package from a local mirror to an empty directory, as
// a first run fetches it.
func TestAustenPackage(t *testing.T) {
	var deb []byte
	var tried []string
	for _, dir := range []string{Dir("austen"), filepath.Join("..", "data", "austen")} {
		p := filepath.Join(dir, austenDebFile)
		b, err := os.ReadFile(p)
		if err == nil {
			deb = b
			break
		}
		tried = append(tried, p)
	}
	if deb == nil {
		t.Skipf("no %s (run make data): looked for %s", austenDebFile, strings.Join(tried, " and "))
	}
	const (
		debSum    = "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95"
		textBytes = 4025029
		textSum   = "f2516f2139e3cecf49657122fed58ac46313f1fdff32a26fc66789293e92d573"
		chars     = 4025028 // one character, '£', takes two bytes
		vocab     = 81
		train     = 3622525
		val       = 402503
	)
	if len(deb) != 1626392 || sha256Hex(deb) != debSum {
		t.Fatalf("the package: %d bytes, SHA-256 %s; want 1626392, %s", len(deb), sha256Hex(deb), debSum)
	}
	text, err := decodeAustenDeb(deb)
	if err != nil {
		t.Fatalf("decodeAustenDeb: %v", err)
	}
	if len(text) != textBytes || sha256Hex(text) != textSum {
		t.Errorf("the corpus: %d bytes, SHA-256 %s; want %d, %s", len(text), sha256Hex(text), textBytes, textSum)
	}
	// The books in austen_books() order, each line followed by "\n".
	var at []int
	for _, s := range []string{"SENSE AND SENSIBILITY\n", "PRIDE AND PREJUDICE\n", "MANSFIELD PARK\n", "EMMA\n", "NORTHANGER ABBEY\n", "\nPersuasion\n"} {
		at = append(at, bytes.Index(text, []byte(s)))
	}
	if !slices.IsSorted(at) || at[0] != 0 || slices.Contains(at, -1) {
		t.Errorf("the titles are at %v, want the books in austen_books() order from 0", at)
	}
	check := func(t *testing.T, tx *Text) {
		t.Helper()
		if len(tx.Train)+len(tx.Val) != chars || len(tx.Vocab) != vocab || len(tx.Train) != train || len(tx.Val) != val {
			t.Errorf("%d characters, %d distinct, split %d + %d; want %d, %d, %d + %d",
				len(tx.Train)+len(tx.Val), len(tx.Vocab), len(tx.Train), len(tx.Val), chars, vocab, train, val)
		}
		if tx.Vocab[0] != '\n' || tx.Vocab[len(tx.Vocab)-1] != '£' {
			t.Errorf("vocabulary %q, want it from \\n to £", string(tx.Vocab))
		}
	}
	tx, err := NewText("austen", text)
	if err != nil {
		t.Fatal(err)
	}
	check(t, tx)
	t.Run("fetched through a mirror", func(t *testing.T) {
		t.Setenv(MirrorEnv, newDebServer(t, deb).URL+"/debian")
		dir := t.TempDir()
		tx, err := LoadText("austen", In(dir), Download(), Progress(nil))
		if err != nil {
			t.Fatalf("LoadText: %v", err)
		}
		check(t, tx)
		if b, err := os.ReadFile(filepath.Join(dir, AustenFile)); err != nil || !bytes.Equal(b, text) {
			t.Errorf("%s: %d bytes, %v; want the corpus", AustenFile, len(b), err)
		}
	})
}
