package datasets

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// A reader of the parts of R's serialisation format (XDR, version 2 or 3)
// that an R package's lazy-load database of character data uses: named
// lists and pairlists, symbols and references to them, character, integer,
// logical and double vectors, and attributes. Anything else is an error
// naming the type, so a file it does not understand is refused, not
// misread.

// R's SEXP types this reader knows, and the two pseudo-types of the
// serialisation it takes: NILVALUE_SXP (NULL) and REFSXP.
const (
	rNil      = 0
	rSym      = 1
	rList     = 2 // pairlist
	rChar     = 9
	rLgl      = 10
	rInt      = 13
	rReal     = 14
	rStr      = 16
	rVec      = 19 // generic vector (list)
	rRef      = 255
	rNilValue = 254
)

// rTypeNames names every type code R's serialisation can carry
// (Rinternals.h, serialize.c), so that one this reader refuses is reported
// as R names it.
var rTypeNames = map[int]string{
	0: "NILSXP", 1: "SYMSXP", 2: "LISTSXP", 3: "CLOSXP", 4: "ENVSXP", 5: "PROMSXP",
	6: "LANGSXP", 7: "SPECIALSXP", 8: "BUILTINSXP", 9: "CHARSXP", 10: "LGLSXP",
	13: "INTSXP", 14: "REALSXP", 15: "CPLXSXP", 16: "STRSXP", 17: "DOTSXP", 18: "ANYSXP",
	19: "VECSXP", 20: "EXPRSXP", 21: "BCODESXP", 22: "EXTPTRSXP", 23: "WEAKREFSXP",
	24: "RAWSXP", 25: "OBJSXP",
	238: "ALTREP_SXP", 239: "ATTRLISTSXP", 240: "ATTRLANGSXP", 241: "BASEENV_SXP",
	242: "EMPTYENV_SXP", 243: "BCREPREF", 244: "BCREPDEF", 245: "GENERICREFSXP",
	246: "CLASSREFSXP", 247: "PERSISTSXP", 248: "PACKAGESXP", 249: "NAMESPACESXP",
	250: "BASENAMESPACE_SXP", 251: "MISSINGARG_SXP", 252: "UNBOUNDVALUE_SXP",
	253: "GLOBALENV_SXP", 254: "NILVALUE_SXP", 255: "REFSXP",
}

// rTypeName is a type code and R's name for it, e.g. "4 (ENVSXP)".
func rTypeName(t int) string {
	if n, ok := rTypeNames[t]; ok {
		return fmt.Sprintf("%d (%s)", t, n)
	}
	return fmt.Sprintf("%d (unknown)", t)
}

// rValue is a decoded R object.
type rValue struct {
	typ   int
	strs  []string // rStr
	valid []bool   // rStr: false for NA
	ints  []int32  // rInt, rLgl
	reals []float64
	elems []*rValue // rVec, and a pairlist's values
	tags  []string  // a pairlist's tags
	sym   string    // rSym
	attr  *rValue   // attributes (a pairlist), or nil
}

// names returns the object's names attribute, or nil.
func (v *rValue) names() []string {
	if v == nil || v.attr == nil {
		return nil
	}
	for i, t := range v.attr.tags {
		if t == "names" && v.attr.elems[i].typ == rStr {
			return v.attr.elems[i].strs
		}
	}
	return nil
}

// field returns the element of a named list called name, or nil.
func (v *rValue) field(name string) *rValue {
	for i, n := range v.names() {
		if n == name && i < len(v.elems) {
			return v.elems[i]
		}
	}
	return nil
}

// rReader decodes one serialised object.
type rReader struct {
	r    *bytes.Reader
	refs []*rValue
	// depth bounds nesting, so a corrupt file cannot exhaust the stack.
	depth int
}

var errRData = errors.New("not R serialisation data this reader understands")

func (d *rReader) int() (int32, error) {
	var b [4]byte
	if _, err := io.ReadFull(d.r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: truncated", errRData)
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// length reads a vector length, long or not, and checks that at least
// length*unit bytes remain, so a corrupt length cannot make it allocate.
func (d *rReader) length(unit int) (int, error) {
	n, err := d.int()
	if err != nil {
		return 0, err
	}
	l := int64(n)
	if n == -1 {
		hi, err := d.int()
		if err != nil {
			return 0, err
		}
		lo, err := d.int()
		if err != nil {
			return 0, err
		}
		l = int64(uint32(hi))<<32 | int64(uint32(lo))
	}
	// l > left/unit rather than l*unit > left: a long length's l*unit
	// overflows.
	if l < 0 || l > int64(d.r.Len())/int64(max(unit, 1)) {
		return 0, fmt.Errorf("%w: a length of %d with %d bytes left", errRData, l, d.r.Len())
	}
	return int(l), nil
}

// decodeRSerialized decodes R's XDR serialisation: "X\n", the format
// version, the writing and the minimal R versions, for version 3 the
// native encoding, then the object.
func decodeRSerialized(b []byte) (*rValue, error) {
	if len(b) < 2 || b[0] != 'X' || b[1] != '\n' {
		if len(b) >= 2 && (b[0] == 'A' || b[0] == 'B') && b[1] == '\n' {
			return nil, fmt.Errorf("%w: the %q format, want XDR (\"X\\n\")", errRData, b[:2])
		}
		return nil, fmt.Errorf("%w: no XDR header", errRData)
	}
	d := &rReader{r: bytes.NewReader(b[2:])}
	ver, err := d.int()
	if err != nil {
		return nil, err
	}
	if ver != 2 && ver != 3 {
		return nil, fmt.Errorf("%w: serialisation version %d", errRData, ver)
	}
	for range 2 { // the writer's R version and the oldest that reads it
		if _, err := d.int(); err != nil {
			return nil, err
		}
	}
	if ver == 3 {
		n, err := d.length(1)
		if err != nil {
			return nil, err
		}
		enc := make([]byte, n)
		io.ReadFull(d.r, enc)
		if s := string(enc); s != "UTF-8" && s != "ASCII" {
			return nil, fmt.Errorf("%w: native encoding %q, want UTF-8", errRData, s)
		}
	}
	v, err := d.item()
	if err != nil {
		return nil, err
	}
	if d.r.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes follow the object", errRData, d.r.Len())
	}
	return v, nil
}

// item reads one object.
func (d *rReader) item() (*rValue, error) {
	d.depth++
	defer func() { d.depth-- }()
	if d.depth > 1000 {
		return nil, fmt.Errorf("%w: nested too deeply", errRData)
	}
	flags, err := d.int()
	if err != nil {
		return nil, err
	}
	// The flags' low byte is the type; above it, whether attributes and a
	// tag follow, and from bit 12 the "levels" (a string's encoding).
	typ := int(flags & 0xff)
	hasAttr, hasTag := flags&(1<<9) != 0, flags&(1<<10) != 0
	switch typ {
	case rNilValue:
		return &rValue{typ: rNil}, nil
	case rRef:
		return d.ref(int(flags) >> 8)
	case rSym:
		return d.symbol()
	case rList:
		return d.pairlist(hasAttr, hasTag)
	case rChar:
		return d.charsxp(int(flags) >> 12)
	case rStr:
		return d.character(hasAttr)
	case rInt, rLgl:
		return d.ints(typ, hasAttr)
	case rReal:
		return d.reals(hasAttr)
	case rVec:
		return d.vector(hasAttr)
	}
	return nil, fmt.Errorf("%w: R object type %s is not supported", errRData, rTypeName(typ))
}

// ref resolves a reference to an object read before (a symbol): the index
// i, 1-based, is in the flags, or in the next int when they hold 0.
func (d *rReader) ref(i int) (*rValue, error) {
	if i == 0 {
		i32, err := d.int()
		if err != nil {
			return nil, err
		}
		i = int(i32)
	}
	if i < 1 || i > len(d.refs) {
		return nil, fmt.Errorf("%w: reference %d of %d", errRData, i, len(d.refs))
	}
	return d.refs[i-1], nil
}

// symbol reads a symbol's name and remembers the symbol for references.
func (d *rReader) symbol() (*rValue, error) {
	c, err := d.item()
	if err != nil {
		return nil, err
	}
	if c.typ != rChar {
		return nil, fmt.Errorf("%w: a symbol's name is R type %s", errRData, rTypeName(c.typ))
	}
	v := &rValue{typ: rSym, sym: c.sym}
	d.refs = append(d.refs, v)
	return v, nil
}

// pairlist reads a pairlist's cells, each with its attributes and tag
// when its flags say so, into one value.
func (d *rReader) pairlist(hasAttr, hasTag bool) (*rValue, error) {
	v := &rValue{typ: rList}
	for {
		if hasAttr {
			a, err := d.item() // a pairlist cell's own attributes, kept for the first
			if err != nil {
				return nil, err
			}
			v.attr = a
		}
		tag := ""
		if hasTag {
			t, err := d.item()
			if err != nil {
				return nil, err
			}
			if t.typ != rSym {
				return nil, fmt.Errorf("%w: a pairlist tag of R type %s, want a symbol", errRData, rTypeName(t.typ))
			}
			tag = t.sym
		}
		car, err := d.item()
		if err != nil {
			return nil, err
		}
		v.tags, v.elems = append(v.tags, tag), append(v.elems, car)
		// The CDR: another cell (read in this loop, not recursively) or
		// the end.
		f, err := d.int()
		if err != nil {
			return nil, err
		}
		switch f & 0xff {
		case rNilValue:
			return v, nil
		case rList:
			hasAttr, hasTag = f&(1<<9) != 0, f&(1<<10) != 0
		default:
			return nil, fmt.Errorf("%w: a pairlist ends in R type %s, want NULL", errRData, rTypeName(int(f&0xff)))
		}
	}
}

// charsxp reads one string (NA for a length of -1), which must be UTF-8:
// levels marks its encoding.
func (d *rReader) charsxp(levels int) (*rValue, error) {
	n, err := d.int()
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return &rValue{typ: rChar, sym: "", valid: []bool{false}}, nil
	}
	if n < 0 || int(n) > d.r.Len() {
		return nil, fmt.Errorf("%w: a string of %d bytes with %d left", errRData, n, d.r.Len())
	}
	b := make([]byte, n)
	io.ReadFull(d.r, b)
	const latin1, bytesEnc, ascii = 1 << 2, 1 << 1, 1 << 6
	if levels&(latin1|bytesEnc) != 0 {
		return nil, fmt.Errorf("%w: a string in Latin-1 or bytes, want UTF-8 or ASCII", errRData)
	}
	if levels&ascii != 0 {
		for i, c := range b {
			if c >= utf8.RuneSelf {
				return nil, fmt.Errorf("%w: a string marked ASCII holds byte 0x%02x at %d", errRData, c, i)
			}
		}
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: a string that is not UTF-8", errRData)
	}
	return &rValue{typ: rChar, sym: string(b), valid: []bool{true}}, nil
}

// character reads a character vector: a length, then each element a string
// or NA.
func (d *rReader) character(hasAttr bool) (*rValue, error) {
	n, err := d.length(4)
	if err != nil {
		return nil, err
	}
	v := &rValue{typ: rStr, strs: make([]string, n), valid: make([]bool, n)}
	for i := range n {
		c, err := d.item()
		if err != nil {
			return nil, err
		}
		if c.typ != rChar {
			return nil, fmt.Errorf("%w: element %d of a character vector is R type %s", errRData, i, rTypeName(c.typ))
		}
		v.strs[i], v.valid[i] = c.sym, c.valid[0]
	}
	return d.attributes(v, hasAttr)
}

// ints reads an integer or a logical vector (typ).
func (d *rReader) ints(typ int, hasAttr bool) (*rValue, error) {
	n, err := d.length(4)
	if err != nil {
		return nil, err
	}
	v := &rValue{typ: typ, ints: make([]int32, n)}
	for i := range v.ints {
		v.ints[i], _ = d.int() // length checked that they are there
	}
	return d.attributes(v, hasAttr)
}

// reals reads a double vector.
func (d *rReader) reals(hasAttr bool) (*rValue, error) {
	n, err := d.length(8)
	if err != nil {
		return nil, err
	}
	v := &rValue{typ: rReal, reals: make([]float64, n)}
	var b [8]byte
	for i := range v.reals {
		io.ReadFull(d.r, b[:])
		v.reals[i] = math.Float64frombits(binary.BigEndian.Uint64(b[:]))
	}
	return d.attributes(v, hasAttr)
}

// vector reads a generic vector (an R list) of objects.
func (d *rReader) vector(hasAttr bool) (*rValue, error) {
	n, err := d.length(4)
	if err != nil {
		return nil, err
	}
	v := &rValue{typ: rVec, elems: make([]*rValue, n)}
	for i := range v.elems {
		if v.elems[i], err = d.item(); err != nil {
			return nil, err
		}
	}
	return d.attributes(v, hasAttr)
}

// attributes reads a vector's attributes (a pairlist) when it has some.
func (d *rReader) attributes(v *rValue, has bool) (*rValue, error) {
	if !has {
		return v, nil
	}
	a, err := d.item()
	if err != nil {
		return nil, err
	}
	if a.typ != rList && a.typ != rNil {
		return nil, fmt.Errorf("%w: attributes of R type %s, want a pairlist", errRData, rTypeName(a.typ))
	}
	v.attr = a
	return v, nil
}

// maxRObject bounds an uncompressed object of a lazy-load database (the
// largest of the Austen novels is under 1 MB).
const maxRObject = 256 << 20

// lazyLoadObjects decodes an R package's lazy-load database: rdx, the
// gzip-compressed serialised index whose "variables" element maps each
// object's name to its (offset, length) in rdb, where each entry is a
// 4-byte big-endian uncompressed size and a zlib stream of the serialised
// object. It returns the objects named in want, by name.
func lazyLoadObjects(rdx, rdb []byte, want []string) (map[string]*rValue, error) {
	zr, err := gzip.NewReader(bytes.NewReader(rdx))
	if err != nil {
		return nil, fmt.Errorf("Rdata.rdx: %w", err)
	}
	idx, err := io.ReadAll(io.LimitReader(zr, maxRObject))
	if err != nil {
		return nil, fmt.Errorf("Rdata.rdx: %w", err)
	}
	index, err := decodeRSerialized(idx)
	if err != nil {
		return nil, fmt.Errorf("Rdata.rdx: %w", err)
	}
	vars := index.field("variables")
	if vars == nil || vars.typ != rVec {
		return nil, fmt.Errorf("Rdata.rdx: %w: no variables list", errRData)
	}
	// The entries are zlib streams only when compressed is TRUE (or 1);
	// 2 and 3 mean bzip2 and xz, with another entry layout.
	if c := index.field("compressed"); c == nil || (c.typ != rLgl && c.typ != rInt) || len(c.ints) != 1 || c.ints[0] != 1 {
		return nil, fmt.Errorf("Rdata.rdx: %w: compressed is not TRUE (zlib), the one compression this reader takes", errRData)
	}
	out := map[string]*rValue{}
	for _, name := range want {
		e := vars.field(name)
		if e == nil || e.typ != rInt || len(e.ints) != 2 {
			return nil, fmt.Errorf("Rdata.rdx: no object %q", name)
		}
		off, n := int64(e.ints[0]), int64(e.ints[1])
		if off < 0 || n < 4 || off+n > int64(len(rdb)) {
			return nil, fmt.Errorf("Rdata.rdb: object %q at %d+%d is outside the file's %d bytes", name, off, n, len(rdb))
		}
		entry := rdb[off : off+n]
		size := int64(binary.BigEndian.Uint32(entry))
		if size > maxRObject {
			return nil, fmt.Errorf("Rdata.rdb: object %q claims %d bytes", name, size)
		}
		zr, err := zlib.NewReader(bytes.NewReader(entry[4:]))
		if err != nil {
			return nil, fmt.Errorf("Rdata.rdb: object %q: %w", name, err)
		}
		b, err := io.ReadAll(io.LimitReader(zr, size+1))
		if err != nil {
			return nil, fmt.Errorf("Rdata.rdb: object %q: %w", name, err)
		}
		if int64(len(b)) != size {
			return nil, fmt.Errorf("Rdata.rdb: object %q is %d bytes, its header says %d", name, len(b), size)
		}
		v, err := decodeRSerialized(b)
		if err != nil {
			return nil, fmt.Errorf("Rdata.rdb: object %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}
