// Package safetensors reads and writes the safetensors format that PyTorch
// and Hugging Face use for weights: an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, and the
// tensors' bytes, little-endian and row-major.
//
// The reader is strict, because a weights file that half-loads is worse
// than one that fails, and it refuses whatever the writer refuses: the
// header length is bounded (by MaxHeader, and by the file's size where the
// reader can know it, before anything is allocated), every byte range must
// lie inside the payload, the ranges must tile the payload exactly (no gaps,
// no overlaps, no trailing bytes), names must be non-empty, unique and valid
// UTF-8 (a JSON escape of half a surrogate pair, which decoders silently
// turn into U+FFFD, is refused), and sizes must match shapes. F32, F16 and
// BF16 are read and written; F64 is read by rounding to F32, as loading
// float64 weights into a float32 model does.
//
// WriteFile creates files readable and writable by their owner only
// (0600), as every file a training run writes is.
//
// Write records the SHA-256 of the tensors' bytes in the metadata under
// [SumKey], and Read verifies it when a file has one, so that a flipped bit
// or a file cut short is an error rather than wrong weights. Files from
// other writers have no sum and are read without that check; readers that
// do not know the key (PyTorch's) ignore it.
package safetensors

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mixprec/mixprec/atomicfile"
	"github.com/mixprec/mixprec/dtype"
)

// SumKey is the metadata key that holds the hex SHA-256 of the payload.
const SumKey = "mixprec.payload_sha256"

// MaxHeader bounds the JSON header, as the reference implementation does
// (100 MB): a corrupt length must not make the reader allocate gigabytes.
const MaxHeader = 100 << 20

// Tensor is one named tensor. Exactly one of F32 and U16 holds its values:
// F32 for dtype.F32, U16 (the raw 16-bit patterns) for dtype.F16 and
// dtype.BF16.
type Tensor struct {
	Name  string
	DType dtype.DType
	Shape []int
	F32   []float32
	U16   []uint16
}

// Numel is the number of elements the shape holds.
func (t *Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Floats returns the values as float32, widening 16-bit storage.
func (t *Tensor) Floats() []float32 {
	if t.DType == dtype.F32 {
		return t.F32
	}
	out := make([]float32, len(t.U16))
	dtype.Decode(t.DType, out, t.U16)
	return out
}

// File is the content of a safetensors file: its tensors, in the order of
// their byte ranges, and the header's __metadata__ strings.
type File struct {
	Tensors  []Tensor
	Metadata map[string]string
}

// Tensor returns the tensor called name, or nil.
func (f *File) Tensor(name string) *Tensor {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i]
		}
	}
	return nil
}

var dtypeNames = map[dtype.DType]string{dtype.F32: "F32", dtype.F16: "F16", dtype.BF16: "BF16"}

type entry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// Write writes tensors and metadata to w in the safetensors format, the
// tensors' bytes in the order given. It fails on an empty or duplicate
// name, a name that is the reserved "__metadata__", a name or metadata
// text that is not valid UTF-8 (JSON would replace the bad bytes), an
// unsupported dtype, or values that do not match the shape.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header := map[string]any{}
	for i := range tensors {
		if err := tensors[i].check(); err != nil {
			return fmt.Errorf("safetensors: write: %w", err)
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors: write: metadata %q: %q is not valid UTF-8", k, v)
		}
	}
	sum := sha256.New()
	if err := writePayload(sum, tensors); err != nil {
		return err
	}
	meta := maps.Clone(metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[SumKey] = hex.EncodeToString(sum.Sum(nil))
	header["__metadata__"] = meta
	var off int64
	for i := range tensors {
		t := &tensors[i]
		if _, dup := header[t.Name]; dup {
			return fmt.Errorf("safetensors: write: two tensors named %q", t.Name)
		}
		size := int64(t.Numel()) * int64(t.DType.Size())
		header[t.Name] = entry{DType: dtypeNames[t.DType], Shape: nonNil(t.Shape), Offsets: [2]int64{off, off + size}}
		off += size
	}
	js, err := json.Marshal(header) // maps marshal with sorted keys: the same tensors give the same bytes
	if err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	// Pad the header with spaces so the payload starts 8-byte aligned, as
	// the reference writer does; readers may then map it in place.
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte(" "), pad)...)
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	return writePayload(w, tensors)
}

// writePayload writes the tensors' bytes, little-endian, in order.
func writePayload(w io.Writer, tensors []Tensor) error {
	buf := make([]byte, 0, 1<<16)
	for i := range tensors {
		t := &tensors[i]
		if t.DType == dtype.F32 {
			for _, v := range t.F32 {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				if len(buf) == cap(buf) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
		} else {
			for _, v := range t.U16 {
				buf = binary.LittleEndian.AppendUint16(buf, v)
				if len(buf) == cap(buf) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
		}
	}
	_, err := w.Write(buf)
	return err
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func (t *Tensor) check() error {
	if t.Name == "" || t.Name == "__metadata__" {
		return fmt.Errorf("tensor name %q is not allowed", t.Name)
	}
	if !utf8.ValidString(t.Name) {
		return fmt.Errorf("tensor name %q is not valid UTF-8", t.Name)
	}
	if _, ok := dtypeNames[t.DType]; !ok {
		return fmt.Errorf("tensor %q: dtype %v is not F32, F16 or BF16", t.Name, t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("tensor %q: negative dimension in shape %v", t.Name, t.Shape)
		}
	}
	n := t.Numel()
	switch {
	case t.DType == dtype.F32 && (len(t.F32) != n || t.U16 != nil):
		return fmt.Errorf("tensor %q: shape %v needs %d F32 values, have %d (and %d 16-bit ones)", t.Name, t.Shape, n, len(t.F32), len(t.U16))
	case t.DType != dtype.F32 && (len(t.U16) != n || t.F32 != nil):
		return fmt.Errorf("tensor %q: shape %v needs %d %v values, have %d (and %d F32 ones)", t.Name, t.Shape, n, t.DType, len(t.U16), len(t.F32))
	}
	return nil
}

// Read reads a whole safetensors file from r. See the package comment for
// what it checks; every error names the problem and, where there is one,
// the tensor. When r can tell how many bytes it holds (an *os.File, a
// *bytes.Reader, a *bytes.Buffer or a *strings.Reader), a header length or
// a byte range beyond them is refused before anything is allocated;
// otherwise the header is read in growing pieces, so that a corrupt length
// costs no more memory than the bytes that are really there.
func Read(r io.Reader) (*File, error) {
	size, sized := remaining(r)
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, fmt.Errorf("safetensors: file shorter than its 8-byte header length: %w", err)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if hlen > MaxHeader {
		return nil, fmt.Errorf("safetensors: header length %d is over the %d-byte limit; the file is corrupt or not safetensors", hlen, MaxHeader)
	}
	if sized && hlen > uint64(size-8) {
		return nil, fmt.Errorf("safetensors: header length %d is longer than the %d bytes after it: the file is corrupt or cut short", hlen, size-8)
	}
	hdr, err := io.ReadAll(io.LimitReader(r, int64(hlen)))
	if err != nil {
		return nil, fmt.Errorf("safetensors: reading the header: %w", err)
	}
	if uint64(len(hdr)) < hlen {
		return nil, fmt.Errorf("safetensors: header of %d bytes is cut short at %d", hlen, len(hdr))
	}
	names, entries, meta, err := parseHeader(hdr)
	if err != nil {
		return nil, err
	}
	// Check the byte ranges before reading the payload, so that a corrupt
	// range cannot make the reader allocate without bound.
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return entries[order[a]].Offsets[0] < entries[order[b]].Offsets[0] })
	var end int64
	for _, i := range order {
		e := entries[i]
		if e.Offsets[0] != end {
			if e.Offsets[0] < end {
				return nil, fmt.Errorf("safetensors: tensor %q: bytes [%d, %d) overlap the previous tensor's, which end at %d", names[i], e.Offsets[0], e.Offsets[1], end)
			}
			return nil, fmt.Errorf("safetensors: tensor %q: bytes start at %d, leaving a gap after %d", names[i], e.Offsets[0], end)
		}
		end = e.Offsets[1]
		if avail := size - 8 - int64(hlen); sized && end > avail {
			return nil, fmt.Errorf("safetensors: tensor %q: bytes [%d, %d) lie beyond the %d bytes of tensors the file holds: it is truncated or corrupt", names[i], e.Offsets[0], e.Offsets[1], avail)
		}
	}
	payload, err := io.ReadAll(io.LimitReader(r, end+1))
	if err != nil {
		return nil, fmt.Errorf("safetensors: reading the tensors: %w", err)
	}
	switch {
	case int64(len(payload)) < end:
		return nil, fmt.Errorf("safetensors: the header describes %d bytes of tensors but the file holds %d: it is truncated", end, len(payload))
	case int64(len(payload)) > end:
		return nil, fmt.Errorf("safetensors: trailing bytes after the %d bytes of tensors the header describes", end)
	}
	if want, ok := meta[SumKey]; ok {
		got := sha256.Sum256(payload)
		if hex.EncodeToString(got[:]) != want {
			return nil, fmt.Errorf("safetensors: the tensors' SHA-256 is %x, the file says %s: the file is corrupt", got, want)
		}
		delete(meta, SumKey)
	}
	f := &File{Metadata: meta}
	for _, i := range order {
		e := entries[i]
		t, err := decode(names[i], e, payload[e.Offsets[0]:e.Offsets[1]])
		if err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	return f, nil
}

// remaining is how many bytes r holds from where it stands, when r can
// say: a file (its size less its offset), or an in-memory reader.
func remaining(r io.Reader) (int64, bool) {
	switch r := r.(type) {
	case interface{ Len() int }: // *bytes.Reader, *bytes.Buffer, *strings.Reader: the unread bytes
		return int64(r.Len()), true
	case *os.File:
		fi, err := r.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0, false
		}
		off, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, false
		}
		return fi.Size() - off, true
	}
	return 0, false
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// elemSize is the byte size of each dtype the reader accepts.
var elemSize = map[string]int64{"F32": 4, "F16": 2, "BF16": 2, "F64": 8}

// parseHeader decodes the JSON header token by token, since encoding/json
// would silently keep the last of two entries with the same name.
func parseHeader(hdr []byte) (names []string, entries []entry, meta map[string]string, err error) {
	if !utf8.Valid(hdr) {
		return nil, nil, nil, errors.New("safetensors: the header is not UTF-8")
	}
	if err := checkEscapes(hdr); err != nil {
		return nil, nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, nil, errors.New("safetensors: the header is not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("safetensors: header: %w", err)
		}
		name := tok.(string) // object keys are always strings
		if name == "" {
			return nil, nil, nil, errors.New("safetensors: the header names a tensor with an empty name")
		}
		if seen[name] {
			return nil, nil, nil, fmt.Errorf("safetensors: header names %q twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&meta); err != nil {
				return nil, nil, nil, fmt.Errorf("safetensors: __metadata__ is not an object of strings: %w", err)
			}
			continue
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, nil, fmt.Errorf("safetensors: header entry %q: %w", name, err)
		}
		var e entry
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		if err := strict.Decode(&e); err != nil {
			return nil, nil, nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		if err := e.check(name); err != nil {
			return nil, nil, nil, err
		}
		names, entries = append(names, name), append(entries, e)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, nil, fmt.Errorf("safetensors: header: %w", err)
	}
	// Only the padding may follow the object.
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimRight(rest, " ")) > 0 {
		return nil, nil, nil, errors.New("safetensors: text after the header's JSON object")
	}
	if dec.More() {
		return nil, nil, nil, errors.New("safetensors: text after the header's JSON object")
	}
	return names, entries, meta, nil
}

// checkEscapes refuses a \u escape of half a UTF-16 surrogate pair in the
// header's strings: encoding/json decodes it as U+FFFD without a word, so
// a name holding one would load under another name than the file's.
func checkEscapes(hdr []byte) error {
	inString := false
	for i := 0; i < len(hdr); i++ {
		c := hdr[i]
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(hdr):
			if hdr[i+1] != 'u' {
				i++ // \" and \\ among them
				continue
			}
			r, ok := hex4(hdr, i+2)
			if !ok {
				continue // the JSON decoder reports a malformed escape
			}
			switch {
			case utf16.IsSurrogate(r) && r < 0xdc00: // high half: a low half must follow
				if lo, ok := hex4(hdr, i+8); ok && i+7 < len(hdr) && hdr[i+6] == '\\' && hdr[i+7] == 'u' && lo >= 0xdc00 && lo <= 0xdfff {
					i += 11
					continue
				}
				return fmt.Errorf("safetensors: the header holds \\u%04x, half a surrogate pair, which is not valid UTF-8", r)
			case utf16.IsSurrogate(r):
				return fmt.Errorf("safetensors: the header holds \\u%04x, half a surrogate pair, which is not valid UTF-8", r)
			}
			i += 5
		}
	}
	return nil
}

// hex4 reads the four hex digits at b[i:], as a \u escape holds them.
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func (e entry) check(name string) error {
	size, ok := elemSize[e.DType]
	if !ok {
		return fmt.Errorf("safetensors: tensor %q has dtype %q; this reader takes F32, F16, BF16 and F64", name, e.DType)
	}
	if e.Shape == nil {
		return fmt.Errorf("safetensors: tensor %q has no shape", name)
	}
	n := int64(1)
	for _, d := range e.Shape {
		if d < 0 {
			return fmt.Errorf("safetensors: tensor %q has a negative dimension in shape %v", name, e.Shape)
		}
		if d > 0 && n > math.MaxInt64/size/int64(d) {
			return fmt.Errorf("safetensors: tensor %q: shape %v is too large", name, e.Shape)
		}
		n *= int64(d)
	}
	lo, hi := e.Offsets[0], e.Offsets[1]
	if lo < 0 || hi < lo {
		return fmt.Errorf("safetensors: tensor %q has byte range [%d, %d)", name, lo, hi)
	}
	if hi-lo != n*size {
		return fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, its range [%d, %d) holds %d", name, e.Shape, e.DType, n*size, lo, hi, hi-lo)
	}
	return nil
}

func decode(name string, e entry, b []byte) (Tensor, error) {
	t := Tensor{Name: name, Shape: slices.Clone(e.Shape)}
	switch e.DType {
	case "F32":
		t.DType, t.F32 = dtype.F32, make([]float32, len(b)/4)
		for i := range t.F32 {
			t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case "F64":
		t.DType, t.F32 = dtype.F32, make([]float32, len(b)/8)
		for i := range t.F32 {
			t.F32[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
		}
	case "F16", "BF16":
		t.DType = dtype.F16
		if e.DType == "BF16" {
			t.DType = dtype.BF16
		}
		t.U16 = make([]uint16, len(b)/2)
		for i := range t.U16 {
			t.U16[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
	default:
		return Tensor{}, fmt.Errorf("safetensors: tensor %q: dtype %q", name, e.DType)
	}
	return t, nil
}

// ReadFile reads the safetensors file at path.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	f, err := Read(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// WriteFile writes tensors and metadata to path so that a crash at any
// moment leaves either the old file or the complete new one
// (atomicfile.Write: a temporary file in the same directory, synced,
// renamed over path, the directory synced). On any error path is
// untouched and nothing temporary is left. The file is its owner's alone
// (0600).
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	return atomicfile.Write(path, 0o600, func(w io.Writer) error {
		if err := Write(w, tensors, metadata); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	})
}
