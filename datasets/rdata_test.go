package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
)

// rw writes R's XDR serialisation one word at a time, so that a test
// spells out the bytes R would write, including ones this reader refuses.
type rw struct{ bytes.Buffer }

// Flags words as R writes them: a CHARSXP with its encoding among the
// levels, and containers with the has-attributes and has-tag bits.
const (
	rwASCII   = 0x00040009
	rwUTF8    = 0x00008009
	rwNative  = 0x00000009
	rwLatin1  = 0x00004009
	rwStr     = 0x00000010
	rwStrAttr = 0x00000210
	rwInt     = 0x0000000d
	rwLgl     = 0x0000000a
	rwVec     = 0x00000013
	rwVecAttr = 0x00000213
	rwList    = 0x00000002
	rwListTag = 0x00000402
	rwSym     = 0x00000001
	rwNil     = 0x000000fe
	rwRef1    = 0x000001ff // REFSXP to the first entry of the reference table
)

func (w *rw) ints(v ...int32) *rw {
	for _, x := range v {
		binary.Write(&w.Buffer, binary.BigEndian, x)
	}
	return w
}

// header writes "X\n", format 3, R 4.2.1 as the writer and 3.5.0 as the
// oldest reader, and the native encoding.
func (w *rw) header(enc string) *rw {
	w.WriteString("X\n")
	w.ints(3, 0x00040201, 0x00030500, int32(len(enc)))
	w.WriteString(enc)
	return w
}

func (w *rw) chars(flags int32, s string) *rw {
	w.ints(flags, int32(len(s)))
	w.WriteString(s)
	return w
}

// strs writes a character vector of ASCII strings.
func (w *rw) strs(s ...string) *rw {
	w.ints(rwStr, int32(len(s)))
	for _, x := range s {
		w.chars(rwASCII, x)
	}
	return w
}

// namesAttr writes a pairlist of one attribute, names = s, the symbol
// written out on its first use and referenced after.
func (w *rw) namesAttr(first bool, s ...string) *rw {
	w.ints(rwListTag)
	if first {
		w.ints(rwSym).chars(rwASCII, "names")
	} else {
		w.ints(rwRef1)
	}
	return w.strs(s...).ints(rwNil)
}

// rIndex is a lazy-load index as makeLazyLoadDB writes it, gzipped: a
// named list of variables (name -> offset, length), references (empty)
// and compressed (written by the caller's compressed).
func rIndex(names []string, entries [][2]int32, compressed func(*rw)) []byte {
	w := new(rw).header("UTF-8")
	w.ints(rwVecAttr, 3)
	w.ints(rwVecAttr, int32(len(names)))
	for _, e := range entries {
		w.ints(rwInt, 2, e[0], e[1])
	}
	w.namesAttr(true, names...)
	w.ints(rwVecAttr, 0).namesAttr(false)
	compressed(w)
	w.namesAttr(false, "variables", "references", "compressed")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(w.Bytes())
	zw.Close()
	return gz.Bytes()
}

func TestDecodeRSerialized(t *testing.T) {
	hdr := func() *rw { return new(rw).header("UTF-8") }
	for _, c := range []struct {
		name  string
		in    []byte
		strs  []string
		valid []bool
	}{
		{"ASCII, empty, UTF-8 and native strings", hdr().ints(rwStr, 4).chars(rwASCII, "EMMA").chars(rwASCII, "").
			chars(rwUTF8, "£5").chars(rwNative, "café").Bytes(),
			[]string{"EMMA", "", "£5", "café"}, []bool{true, true, true, true}},
		{"NA", hdr().ints(rwStr, 2).ints(rwNative, -1).chars(rwASCII, "x").Bytes(),
			[]string{"", "x"}, []bool{false, true}},
		{"with a names attribute", hdr().ints(rwStrAttr, 1).chars(rwASCII, "v").namesAttr(true, "n").Bytes(),
			[]string{"v"}, []bool{true}},
		{"format version 2", append([]byte("X\n"), new(rw).ints(2, 0x00040201, 0x00020300, rwStr, 1).chars(rwASCII, "old").Bytes()...),
			[]string{"old"}, []bool{true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := decodeRSerialized(c.in)
			if err != nil {
				t.Fatalf("decodeRSerialized: %v", err)
			}
			if v.typ != rStr || !slices.Equal(v.strs, c.strs) || !slices.Equal(v.valid, c.valid) {
				t.Errorf("got type %d %q %v, want STRSXP %q %v", v.typ, v.strs, v.valid, c.strs, c.valid)
			}
		})
	}
}

// TestDecodeRSerializedErrors: what the reader does not understand is an
// error that says what it met, R's type names included.
func TestDecodeRSerializedErrors(t *testing.T) {
	hdr := func() *rw { return new(rw).header("UTF-8") }
	deep := hdr()
	for range 1001 {
		deep.ints(rwVec, 1)
	}
	deep.ints(rwNil)
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "no XDR header"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0}, "no XDR header"},
		{"ASCII format", []byte("A\n3\n"), `the "A\n" format, want XDR`},
		{"native binary format", []byte("B\n"), `the "B\n" format`},
		{"version 4", append([]byte("X\n"), new(rw).ints(4, 0, 0).Bytes()...), "serialisation version 4"},
		{"native encoding latin1", new(rw).header("latin1").strs("x").Bytes(), `native encoding "latin1"`},
		{"an environment", hdr().ints(4, 0).Bytes(), "R object type 4 (ENVSXP) is not supported"},
		{"the global environment", hdr().ints(253).Bytes(), "R object type 253 (GLOBALENV_SXP) is not supported"},
		{"the empty environment", hdr().ints(242).Bytes(), "242 (EMPTYENV_SXP) is not supported"},
		{"a persistent reference", hdr().ints(247).strs("x").Bytes(), "247 (PERSISTSXP) is not supported"},
		{"the base namespace", hdr().ints(250).Bytes(), "250 (BASENAMESPACE_SXP) is not supported"},
		{"ALTREP", hdr().ints(238).Bytes(), "238 (ALTREP_SXP) is not supported"},
		{"unknown", hdr().ints(0x7f).Bytes(), "127 (unknown) is not supported"},
		{"an integer among strings", hdr().ints(rwStr, 1, rwInt, 0).Bytes(), "element 0 of a character vector is R type 13 (INTSXP)"},
		{"Latin-1", hdr().ints(rwStr, 1).chars(rwLatin1, "caf\xe9").Bytes(), "Latin-1"},
		{"marked ASCII, is not", hdr().ints(rwStr, 1).chars(rwASCII, "£").Bytes(), "marked ASCII holds byte 0xc2 at 0"},
		{"marked UTF-8, is not", hdr().ints(rwStr, 1).chars(rwUTF8, "a\xffb").Bytes(), "not UTF-8"},
		{"negative length", hdr().ints(rwInt, -7).Bytes(), "a length of -7"},
		{"length beyond the data", hdr().ints(rwInt, 1<<30, 1).Bytes(), "a length of 1073741824 with 4 bytes left"},
		{"long length beyond the data", hdr().ints(rwStr, -1, 1, 0).Bytes(), "a length of 4294967296"},
		{"string beyond the data", hdr().ints(rwStr, 1, rwASCII, 100).Bytes(), "a string of 100 bytes"},
		{"reference to nothing", hdr().ints(rwRef1).Bytes(), "reference 1 of 0"},
		{"attributes not a pairlist", hdr().ints(rwStrAttr, 0).strs("x").Bytes(), "attributes of R type 16 (STRSXP), want a pairlist"},
		{"a tag that is not a symbol", hdr().ints(rwListTag).strs("x").strs("y").ints(rwNil).Bytes(), "tag of R type 16 (STRSXP), want a symbol"},
		{"a dotted pair", hdr().ints(rwList).strs("x").strs("y").Bytes(), "a pairlist ends in R type 16 (STRSXP), want NULL"},
		{"bytes after the object", hdr().strs("x").ints(0).Bytes(), "4 bytes follow the object"},
		{"nested too deeply", deep.Bytes(), "nested too deeply"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := decodeRSerialized(c.in)
			if err == nil {
				t.Fatalf("decoded R type %d, want an error containing %q", v.typ, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestDecodeRSerializedTruncated cuts an uncompressed index at every byte:
// each prefix is an error, never a panic.
func TestDecodeRSerializedTruncated(t *testing.T) {
	w := new(rw).header("UTF-8").ints(rwVecAttr, 2)
	w.ints(rwStr, 2).chars(rwASCII, "a").chars(rwUTF8, "£")
	w.ints(rwInt, 2, 0, 10).namesAttr(true, "x", "y")
	full := w.Bytes()
	if _, err := decodeRSerialized(full); err != nil {
		t.Fatalf("the whole input: %v", err)
	}
	for n := range len(full) {
		if _, err := decodeRSerialized(full[:n]); err == nil {
			t.Errorf("the first %d of %d bytes decoded", n, len(full))
		}
	}
}

// TestLazyLoadCompressed: only zlib entries (compressed = TRUE or 1) are
// read; bzip2 (2) and xz (3) entries are refused by name, not misread.
func TestLazyLoadCompressed(t *testing.T) {
	_, entry := lazyLoadDB(t, map[string][]string{"a": {"x"}}, []string{"a"})
	idx := [][2]int32{{0, int32(len(entry))}}
	for _, c := range []struct {
		name       string
		compressed func(*rw)
		ok         bool
	}{
		{"TRUE", func(w *rw) { w.ints(rwLgl, 1, 1) }, true},
		{"1L", func(w *rw) { w.ints(rwInt, 1, 1) }, true},
		{"2L (bzip2)", func(w *rw) { w.ints(rwInt, 1, 2) }, false},
		{"3L (xz)", func(w *rw) { w.ints(rwInt, 1, 3) }, false},
		{"FALSE", func(w *rw) { w.ints(rwLgl, 1, 0) }, false},
		{"NULL", func(w *rw) { w.ints(rwNil) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, err := lazyLoadObjects(rIndex([]string{"a"}, idx, c.compressed), entry, []string{"a"})
			switch {
			case c.ok && (err != nil || !slices.Equal(objs["a"].strs, []string{"x"})):
				t.Errorf("got %v, %v; want the object", objs, err)
			case !c.ok && (err == nil || !strings.Contains(err.Error(), "compressed is not TRUE")):
				t.Errorf("error %v, want one saying compressed is not TRUE", err)
			}
		})
	}
}

// TestAustenDebTruncated cuts a small package built like r-cran-janeaustenr
// at every byte: each prefix is an error, never a panic.
func TestAustenDebTruncated(t *testing.T) {
	books := map[string][]string{}
	for _, b := range austenBooks {
		books[b] = []string{b, ""}
	}
	rdx, rdb := lazyLoadDB(t, books, austenBooks)
	deb := fakeDeb(t, map[string][]byte{"Rdata.rdx": rdx, "Rdata.rdb": rdb})
	if _, err := decodeAustenDeb(deb); err != nil {
		t.Fatalf("the whole package: %v", err)
	}
	for n := range len(deb) - 1 { // the last byte may be the pad after data.tar.xz, which a reader may do without
		if _, err := decodeAustenDeb(deb[:n]); err == nil {
			t.Errorf("the first %d of %d bytes decoded", n, len(deb))
		}
	}
}
