package safetensors

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/dtype"
)

func sample() []Tensor {
	return []Tensor{
		{Name: "0.weight", DType: dtype.F32, Shape: []int{2, 3}, F32: []float32{1, -2, 3.5, float32(math.Inf(1)), 0, -0.25}},
		{Name: "0.bias", DType: dtype.F16, Shape: []int{2}, U16: []uint16{dtype.F32ToF16(0.5), dtype.F32ToF16(-1)}},
		{Name: "layers.3.bias", DType: dtype.BF16, Shape: []int{3}, U16: []uint16{dtype.F32ToBF16(1), dtype.F32ToBF16(2), dtype.F32ToBF16(3)}},
		{Name: "scalar", DType: dtype.F32, Shape: []int{}, F32: []float32{7}},
		{Name: "empty", DType: dtype.F32, Shape: []int{0, 4}, F32: []float32{}},
	}
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	meta := map[string]string{"format": "pt", "model": "mlp"}
	if err := Write(&buf, sample(), meta); err != nil {
		t.Fatal(err)
	}
	if hlen := binary.LittleEndian.Uint64(buf.Bytes()); (8+hlen)%8 != 0 {
		t.Errorf("payload starts at %d, want 8-byte alignment", 8+hlen)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, meta) {
		t.Errorf("metadata = %v, want %v", f.Metadata, meta)
	}
	want := sample()
	if len(f.Tensors) != len(want) {
		t.Fatalf("read %d tensors, want %d", len(f.Tensors), len(want))
	}
	for i, w := range want {
		got := f.Tensors[i]
		if got.Name != w.Name || got.DType != w.DType || !reflect.DeepEqual(nonNil(got.Shape), nonNil(w.Shape)) ||
			!reflect.DeepEqual(got.U16, w.U16) || len(got.F32) != len(w.F32) {
			t.Errorf("tensor %d = %+v, want %+v", i, got, w)
			continue
		}
		for j := range w.F32 {
			if math.Float32bits(got.F32[j]) != math.Float32bits(w.F32[j]) {
				t.Errorf("%s[%d] = %v, want %v", w.Name, j, got.F32[j], w.F32[j])
			}
		}
	}
	if f.Tensor("0.bias") == nil || f.Tensor("nope") != nil {
		t.Error("File.Tensor does not find tensors by name")
	}
	if got := f.Tensor("0.bias").Floats(); !reflect.DeepEqual(got, []float32{0.5, -1}) {
		t.Errorf("F16 Floats() = %v, want [0.5 -1]", got)
	}
}

// TestReferenceBytes pins the layout against a file written by hand from
// the format's definition (as the reference writer lays it out).
func TestReferenceBytes(t *testing.T) {
	hdr := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F64","shape":[1],"data_offsets":[8,16]}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	var file []byte
	file = binary.LittleEndian.AppendUint64(file, uint64(len(hdr)))
	file = append(file, hdr...)
	file = binary.LittleEndian.AppendUint32(file, math.Float32bits(1.5))
	file = binary.LittleEndian.AppendUint32(file, math.Float32bits(-2))
	file = binary.LittleEndian.AppendUint64(file, math.Float64bits(0.1))
	f, err := Read(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if a := f.Tensor("a"); a == nil || !reflect.DeepEqual(a.F32, []float32{1.5, -2}) {
		t.Errorf("a = %+v, want F32 [1.5 -2]", a)
	}
	if b := f.Tensor("b"); b == nil || b.DType != dtype.F32 || b.F32[0] != float32(0.1) {
		t.Errorf("b (F64 0.1) = %+v, want it rounded to F32 %v", b, float32(0.1))
	}
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "a", DType: dtype.F32, Shape: []int{2}, F32: []float32{1.5, -2}}}, nil); err != nil {
		t.Fatal(err)
	}
	hlen := binary.LittleEndian.Uint64(buf.Bytes())
	hdr2 := string(buf.Bytes()[8 : 8+hlen])
	sum := sha256.Sum256(buf.Bytes()[8+hlen:])
	for _, want := range []string{`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}`,
		`"__metadata__":{"` + SumKey + `":"` + hex.EncodeToString(sum[:]) + `"}`} {
		if !strings.Contains(hdr2, want) {
			t.Errorf("header %s does not hold %s", hdr2, want)
		}
	}
}

func TestChecksum(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, sample(), nil); err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	for _, i := range []int{len(file) - 1, len(file) - 20} {
		bad := bytes.Clone(file)
		bad[i] ^= 0x10
		if _, err := Read(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("byte %d flipped: Read = %v, want a corrupt-file error", i, err)
		}
	}
	f, err := Read(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Metadata[SumKey]; ok {
		t.Error("the checksum is handed to the caller as metadata; it belongs to the format")
	}
}

// build assembles a file from a header text and a payload.
func build(hdr string, payload []byte) []byte {
	var file []byte
	file = binary.LittleEndian.AppendUint64(file, uint64(len(hdr)))
	file = append(file, hdr...)
	return append(file, payload...)
}

func TestReadRejects(t *testing.T) {
	p8 := make([]byte, 8)
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty", nil, "shorter than its 8-byte header length"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, MaxHeader+1), "over the"},
		{"cut header", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "longer than the 2 bytes after it"},
		{"not object", build(`[1,2]`, nil), "not a JSON object"},
		{"not utf8", build("{\"\xff\":1}", nil), "not UTF-8"},
		{"duplicate", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, p8), `names "a" twice`},
		{"overlap", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, p8), "overlap"},
		{"gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, p8), "gap"},
		{"trailing", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, p8), "trailing bytes"},
		{"truncated", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}`, p8), "truncated"},
		{"size", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, p8), "needs 12 bytes"},
		{"dtype", build(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, p8), `dtype "I64"`},
		{"negative dim", build(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}`, nil), "negative dimension"},
		{"no shape", build(`{"a":{"dtype":"F32","data_offsets":[0,0]}}`, nil), "no shape"},
		{"unknown field", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":1}}`, nil), "unknown field"},
		{"bad offsets", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}`, nil), "byte range"},
		{"metadata", build(`{"__metadata__":{"a":1}}`, nil), "__metadata__"},
		{"after object", build(`{} {}`, nil), "after the header"},
		{"empty name", build(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, p8[:4]), "empty name"},
		{"lone high surrogate", build(`{"a\ud800":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, p8[:4]), "half a surrogate pair"},
		{"lone low surrogate", build(`{"a\udc00b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, p8[:4]), "half a surrogate pair"},
		{"high then other escape", build(`{"\ud800\u0041":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, p8[:4]), "half a surrogate pair"},
		{"surrogate in metadata", build(`{"__metadata__":{"k":"\udfff"}}`, nil), "half a surrogate pair"},
		{"beyond the file", build(`{"a":{"dtype":"F32","shape":[1048576],"data_offsets":[0,4194304]}}`, p8), "lie beyond the 8 bytes"},
		{"huge shape", build(`{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, nil), "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestReadNames reads names the writer writes, escaped or not: a
// surrogate pair and an escaped backslash before a "u" are not halves of
// a pair.
func TestReadNames(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`"\ud83d\ude00"`, "\U0001F600"},
		{`"a\\ud800"`, `a\ud800`},
		{`"\u00e9t\u00e9"`, "été"},
		{`"€"`, "€"},
	} {
		file := build(`{`+tt.raw+`:{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4))
		f, err := Read(bytes.NewReader(file))
		if err != nil || f.Tensors[0].Name != tt.want {
			t.Errorf("name %s: Read = %v, %v; want the tensor %q", tt.raw, f, err, tt.want)
		}
	}
}

// TestReadAllocatesWhatIsThere reads files that claim a 64 MB header and
// hold 16 bytes: neither a file whose size the reader can learn nor a
// plain stream may make it allocate the claimed 64 MB.
func TestReadAllocatesWhatIsThere(t *testing.T) {
	file := append(binary.LittleEndian.AppendUint64(nil, 64<<20), "{}      "...)
	path := filepath.Join(t.TempDir(), "cut.safetensors")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		read func() error
		want string
	}{
		{"bytes", func() error { _, err := Read(bytes.NewReader(file)); return err }, "longer than the 8 bytes after it"},
		{"file", func() error { _, err := ReadFile(path); return err }, "longer than the 8 bytes after it"},
		{"stream", func() error { _, err := Read(struct{ io.Reader }{bytes.NewReader(file)}); return err }, "cut short at 8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := tt.read()
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Read = %v, want an error containing %q", err, tt.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("reading 16 bytes allocated %d bytes, want under 1 MiB", got)
			}
		})
	}
}

func TestWriteFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := WriteFile(path, sample(), nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("mode %v, want -rw------- (owner only)", fi.Mode())
	}
}

func TestWriteRejects(t *testing.T) {
	for _, tt := range []struct {
		t    Tensor
		want string
	}{
		{Tensor{Name: "", DType: dtype.F32, Shape: []int{1}, F32: []float32{1}}, "not allowed"},
		{Tensor{Name: "__metadata__", DType: dtype.F32, Shape: []int{1}, F32: []float32{1}}, "not allowed"},
		{Tensor{Name: "a", DType: dtype.F32, Shape: []int{2}, F32: []float32{1}}, "needs 2 F32 values, have 1"},
		{Tensor{Name: "a", DType: dtype.F16, Shape: []int{1}, F32: []float32{1}}, "needs 1 f16 values"},
		{Tensor{Name: "a\xff", DType: dtype.F32, Shape: []int{1}, F32: []float32{1}}, "not valid UTF-8"},
	} {
		if err := Write(&bytes.Buffer{}, []Tensor{tt.t}, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Write(%+v) = %v, want an error containing %q", tt.t, err, tt.want)
		}
	}
	if err := Write(&bytes.Buffer{}, sample(), map[string]string{"k": "\xfe"}); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("Write of metadata that is not UTF-8 = %v, want an error", err)
	}
	two := []Tensor{{Name: "a", DType: dtype.F32, Shape: []int{}, F32: []float32{1}}, {Name: "a", DType: dtype.F32, Shape: []int{}, F32: []float32{1}}}
	if err := Write(&bytes.Buffer{}, two, nil); err == nil || !strings.Contains(err.Error(), "two tensors named") {
		t.Errorf("Write of two tensors named a = %v, want an error", err)
	}
}

func TestWriteFileKeepsOldOnError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	if err := WriteFile(path, sample(), nil); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	bad := append(sample(), Tensor{Name: "bad", DType: dtype.F32, Shape: []int{3}, F32: []float32{1}})
	if err := WriteFile(path, bad, nil); err == nil {
		t.Fatal("WriteFile with a bad tensor succeeded")
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Error("a failed WriteFile changed the existing file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after a failed save, want 1 (no temporary left)", len(entries))
	}
	if _, err := ReadFile(path); err != nil {
		t.Errorf("the old file no longer reads: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.safetensors")); err == nil {
		t.Error("ReadFile of a missing file succeeded")
	}
}

func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, sample(), map[string]string{"k": "v"})
	f.Add(buf.Bytes())
	f.Add(build(`{"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Whatever reads must write and read back to the same tensors.
		var out bytes.Buffer
		if err := Write(&out, file.Tensors, file.Metadata); err != nil {
			t.Fatalf("re-writing a file that read cleanly: %v", err)
		}
		again, err := Read(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatalf("re-reading: %v", err)
		}
		if len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("%d tensors after a round trip, want %d", len(again.Tensors), len(file.Tensors))
		}
		for i := range file.Tensors {
			a, b := &file.Tensors[i], &again.Tensors[i]
			if a.Name != b.Name || a.DType != b.DType || a.Numel() != b.Numel() || !reflect.DeepEqual(a.U16, b.U16) {
				t.Fatalf("tensor %d changed in a round trip: %+v, then %+v", i, a, b)
			}
			for j := range a.F32 {
				if math.Float32bits(a.F32[j]) != math.Float32bits(b.F32[j]) {
					t.Fatalf("%s[%d] changed in a round trip", a.Name, j)
				}
			}
		}
	})
}

// TestWriteFileFullDisk saves into a 64 KiB tmpfs: the save fails with the
// file system's error, the previous file stays whole and no temporary is
// left. It needs root to mount the file system, and skips without.
func TestWriteFileFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).Run(); err != nil {
		t.Skipf("cannot mount a small tmpfs (needs root): %v", err)
	}
	defer exec.Command("umount", dir).Run()
	path := filepath.Join(dir, "model.safetensors")
	small := []Tensor{{Name: "w", DType: dtype.F32, Shape: []int{1000}, F32: make([]float32, 1000)}}
	if err := WriteFile(path, small, nil); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	big := []Tensor{{Name: "w", DType: dtype.F32, Shape: []int{100000}, F32: make([]float32, 100000)}}
	err := WriteFile(path, big, nil)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("saving 400 KB into 64 KiB: %v, want the file system's error", err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Error("the failed save changed the previous file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d entries after a failed save, want 1 (no temporary left)", len(entries))
	}
}
