package datasets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"
)

// rWriter writes R's XDR serialisation of the objects the lazy-load
// reader takes, to build test databases.
type rWriter struct{ bytes.Buffer }

func (w *rWriter) int(v int32) { binary.Write(&w.Buffer, binary.BigEndian, v) }

func (w *rWriter) header() {
	w.WriteString("X\n")
	w.int(3)
	w.int(0x40201)
	w.int(0x30500)
	w.int(5)
	w.WriteString("UTF-8")
}

func (w *rWriter) char(s string) {
	w.int(rChar | 1<<15) // UTF-8 mask among the levels
	w.int(int32(len(s)))
	w.WriteString(s)
}

func (w *rWriter) strs(v []string, names []string) {
	w.int(rStr | attrFlag(names))
	w.int(int32(len(v)))
	for _, s := range v {
		w.char(s)
	}
	w.names(names)
}

func (w *rWriter) ints(v []int32) {
	w.int(rInt)
	w.int(int32(len(v)))
	for _, x := range v {
		w.int(x)
	}
}

func attrFlag(names []string) int32 {
	if names != nil {
		return 1 << 9
	}
	return 0
}

// names writes a names attribute pairlist (when names is not nil), its
// symbol the first time and a reference after.
func (w *rWriter) names(names []string) {
	if names == nil {
		return
	}
	w.int(rList | 1<<10)
	w.int(rSym)
	w.char("names")
	w.strs(names, nil)
	w.int(rNilValue)
}

// list writes a named generic vector whose elements elem writes.
func (w *rWriter) list(names []string, elem func(i int)) {
	w.int(rVec | attrFlag(names))
	w.int(int32(len(names)))
	for i := range names {
		elem(i)
	}
	w.names(names)
}

// lazyLoadDB builds an Rdata.rdx and Rdata.rdb holding the given
// character vectors.
func lazyLoadDB(t *testing.T, objs map[string][]string, order []string) (rdx, rdb []byte) {
	t.Helper()
	var db bytes.Buffer
	offs := map[string][2]int32{}
	for _, name := range order {
		var w rWriter
		w.header()
		w.strs(objs[name], nil)
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(w.Bytes())
		zw.Close()
		off := db.Len()
		binary.Write(&db, binary.BigEndian, uint32(w.Len()))
		db.Write(z.Bytes())
		offs[name] = [2]int32{int32(off), int32(db.Len() - off)}
	}
	var w rWriter
	w.header()
	w.list([]string{"variables", "references", "compressed"}, func(i int) {
		switch i {
		case 0:
			w.list(order, func(j int) { o := offs[order[j]]; w.ints(o[:]) })
		case 1:
			w.list(nil, func(int) {})
		case 2:
			w.int(rLgl)
			w.int(1)
			w.int(1)
		}
	})
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(w.Bytes())
	zw.Close()
	return gz.Bytes(), db.Bytes()
}

// fakeDeb builds a .deb-like ar archive whose data.tar.xz holds the given
// files under usr/lib/R/site-library/janeaustenr/data/.
func fakeDeb(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range files {
			if !yield(k) {
				return
			}
		}
	}) {
		tw.WriteHeader(&tar.Header{Name: "./usr/lib/R/site-library/janeaustenr/data/" + name, Mode: 0o644, Size: int64(len(files[name]))})
		tw.Write(files[name])
	}
	tw.Close()
	var xb bytes.Buffer
	xw, err := xz.NewWriter(&xb)
	if err != nil {
		t.Fatal(err)
	}
	xw.Write(tb.Bytes())
	xw.Close()
	var deb bytes.Buffer
	deb.WriteString("!<arch>\n")
	member := func(name string, b []byte) {
		fmt.Fprintf(&deb, "%-16s%-12s%-6s%-6s%-8s%-10d`\n", name+"/", "0", "0", "0", "100644", len(b))
		deb.Write(b)
		if len(b)%2 == 1 {
			deb.WriteByte('\n')
		}
	}
	member("debian-binary", []byte("2.0\n"))
	member("control.tar.xz", []byte("x"))
	member("data.tar.xz", xb.Bytes())
	return deb.Bytes()
}

// TestAustenDecoding runs the .deb decoder on a package built here with the
// six books' objects, and checks that every truncation or corruption of its
// parts is an error, never a panic.
func TestAustenDecoding(t *testing.T) {
	books := map[string][]string{}
	var want strings.Builder
	for i, b := range austenBooks {
		lines := []string{strings.ToUpper(b), "", fmt.Sprintf("Chapter %d — café", i), ""}
		books[b] = lines
		for _, l := range lines {
			want.WriteString(l + "\n")
		}
	}
	rdx, rdb := lazyLoadDB(t, books, austenBooks)
	deb := fakeDeb(t, map[string][]byte{"Rdata.rdx": rdx, "Rdata.rdb": rdb})
	got, err := decodeAustenDeb(deb)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Errorf("decoded %q, want %q", got, want.String())
	}
	if _, err := AustenFromDeb(deb); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("a corpus other than Austen's: err = %v, want a SHA-256 mismatch", err)
	}
	for _, n := range []int{0, 7, 8, 60, len(deb) / 2, len(deb) - 1} {
		if _, err := decodeAustenDeb(deb[:n]); err == nil {
			t.Errorf("a .deb cut to %d bytes decoded", n)
		}
	}
	// Corrupt databases: every truncation of the index and of each object.
	for n := range len(rdx) {
		if _, err := lazyLoadObjects(rdx[:n], rdb, austenBooks); err == nil {
			t.Fatalf("an index cut to %d bytes decoded", n)
		}
	}
	for n := 0; n < len(rdb); n += 7 {
		lazyLoadObjects(rdx, rdb[:n], austenBooks) // must not panic
	}
	missing := fakeDeb(t, map[string][]byte{"Rdata.rdx": rdx})
	if _, err := decodeAustenDeb(missing); err == nil || !strings.Contains(err.Error(), "Rdata.rdb") {
		t.Errorf("a package without Rdata.rdb: err = %v", err)
	}
}

// FuzzRSerialized feeds the XDR reader arbitrary bytes after a valid
// header: it must return an object or an error, never panic or hang.
func FuzzRSerialized(f *testing.F) {
	var w rWriter
	w.header()
	w.list([]string{"a", "b"}, func(i int) { w.strs([]string{"x", "yz"}, nil) })
	f.Add(w.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeRSerialized(b)
	})
}

func TestNewText(t *testing.T) {
	text := "abcaé\nb" + strings.Repeat("c", 13)
	tx, err := NewText("t", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if want := []rune{'\n', 'a', 'b', 'c', 'é'}; !slices.Equal(tx.Vocab, want) {
		t.Errorf("vocabulary %q, want %q", tx.Vocab, want)
	}
	n := len([]rune(text)) // 20 characters, 21 bytes
	if len(tx.Train) != 18 || len(tx.Train)+len(tx.Val) != n {
		t.Errorf("split %d + %d, want 18 + 2", len(tx.Train), len(tx.Val))
	}
	if got := tx.Decode(append(slices.Clone(tx.Train), tx.Val...)); got != text {
		t.Errorf("Decode(ids) = %q, want %q", got, text)
	}
	if ids, err := tx.Encode("é\nab"); err != nil || !slices.Equal(ids, []int32{4, 0, 1, 2}) {
		t.Errorf("Encode = %v, %v", ids, err)
	}
	if _, err := tx.Encode("abz"); err == nil || !strings.Contains(err.Error(), "'z'") {
		t.Errorf("Encode of an unknown character: %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("ok\xffno")} {
		if _, err := NewText("bad", bad); err == nil {
			t.Errorf("NewText(%q) succeeded", bad)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "c.txt")
	os.WriteFile(path, []byte(text), 0o644)
	if tp, err := LoadText(path); err != nil || tp.Name != path || !slices.Equal(tp.Train, tx.Train) {
		t.Errorf("LoadText(%s) = %v, %v", path, tp, err)
	}
	if _, err := LoadText(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := LoadText("austen", In(dir)); err == nil || !strings.Contains(err.Error(), "make data") {
		t.Errorf("no Austen corpus without Download: %v", err)
	}
	os.WriteFile(filepath.Join(dir, AustenFile), []byte("not Austen"), 0o644)
	if _, err := LoadText("austen", In(dir)); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("a tampered Austen file: %v", err)
	}
}

func TestWindows(t *testing.T) {
	ids := make([]int32, 10)
	for i := range ids {
		ids[i] = int32(i)
	}
	x, y := make([]int32, 3*4), make([]int32, 3*4)
	rng := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		SampleWindows(ids, 4, rng, x, y)
		for w := range 3 {
			o := x[w*4]
			if o < 0 || o > 5 { // offsets in [0, 10-4)
				t.Fatalf("window at %d", o)
			}
			for j := range 4 {
				if x[w*4+j] != o+int32(j) || y[w*4+j] != o+int32(j)+1 {
					t.Fatalf("window %v -> %v", x[w*4:w*4+4], y[w*4:w*4+4])
				}
			}
		}
	}
	if n := EvalWindows(ids, 4, 100); n != 2 {
		t.Errorf("EvalWindows(10 ids, 4) = %d, want 2", n)
	}
	if n := EvalWindows(ids, 3, 2); n != 2 {
		t.Errorf("EvalWindows capped at 2 = %d", n)
	}
	if n := EvalWindows(ids, 20, 5); n != 0 {
		t.Errorf("EvalWindows with a block longer than the data = %d", n)
	}
	wx, wy := make([]int32, 3), make([]int32, 3)
	EvalWindow(ids, 3, 2, wx, wy) // the last window that fits: ids 6..9
	if !slices.Equal(wx, []int32{6, 7, 8}) || !slices.Equal(wy, []int32{7, 8, 9}) {
		t.Errorf("EvalWindow 2 = %v, %v", wx, wy)
	}
}

// TestCorpora checks the two named corpora against their published
// figures: Opticks from the Go toolchain, Austen from the data directory
// (make data fetches it).
func TestCorpora(t *testing.T) {
	b, err := loadOpticks()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 567198 || sha256Hex(b) != "d4a9ac22462b35e7821a4f2706c211093da678620a8f9997989ee7cf8d507bbd" {
		t.Errorf("Opticks: %d bytes, SHA-256 %s", len(b), sha256Hex(b))
	}
	o, err := LoadText("opticks")
	if err != nil || len(o.Vocab) != 91 {
		t.Errorf("Opticks: %v distinct characters, %v", len(o.Vocab), err)
	}
	if testing.Short() {
		t.Skip("the Austen corpus's figures are checked without -short")
	}
	var a *Text
	for _, dir := range []string{Dir("austen"), filepath.Join("..", "data", "austen")} {
		if a, err = LoadText("austen", In(dir)); err == nil {
			break
		}
	}
	if a == nil {
		t.Skipf("no Austen corpus in $MIXPREC_DATA/austen or ../data/austen (run make data): %v", err)
	}
	if len(a.Vocab) != 81 || len(a.Train) != 3622525 || len(a.Val) != 402503 {
		t.Errorf("Austen: %d distinct characters, %d training and %d validation ids; want 81, 3622525 and 402503", len(a.Vocab), len(a.Train), len(a.Val))
	}
}
