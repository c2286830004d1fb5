package profile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"testing"
	"time"
)

// tfEvent is what the test decodes of an Event.
type tfEvent struct {
	wall    float64
	step    int64
	version string
	values  map[string]float32
}

// readRecords reads a TFRecord stream as TensorBoard does, checking both
// checksums of every record.
func readRecords(t *testing.T, r io.Reader) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		var head [12]byte
		if _, err := io.ReadFull(r, head[:]); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("record %d: header: %v", len(out), err)
		}
		n := binary.LittleEndian.Uint64(head[:8])
		if got, want := binary.LittleEndian.Uint32(head[8:]), maskedCRC(head[:8]); got != want {
			t.Fatalf("record %d: length CRC %#x, want %#x", len(out), got, want)
		}
		data := make([]byte, n+4)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatalf("record %d: %v", len(out), err)
		}
		if got, want := binary.LittleEndian.Uint32(data[n:]), maskedCRC(data[:n]); got != want {
			t.Fatalf("record %d: data CRC %#x, want %#x", len(out), got, want)
		}
		out = append(out, data[:n])
	}
}

// fields decodes one protocol buffer message into its fields' raw values
// (varints and fixed values as numbers, length-delimited as bytes).
func fields(t *testing.T, b []byte) map[int][]any {
	t.Helper()
	out := map[int][]any{}
	for len(b) > 0 {
		key, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad key in %x", b)
		}
		b = b[n:]
		field, wire := int(key>>3), key&7
		switch wire {
		case 0:
			v, n := binary.Uvarint(b)
			b = b[n:]
			out[field] = append(out[field], v)
		case 1:
			out[field] = append(out[field], binary.LittleEndian.Uint64(b))
			b = b[8:]
		case 5:
			out[field] = append(out[field], binary.LittleEndian.Uint32(b))
			b = b[4:]
		case 2:
			l, n := binary.Uvarint(b)
			b = b[n:]
			out[field] = append(out[field], b[:l])
			b = b[l:]
		default:
			t.Fatalf("wire type %d", wire)
		}
	}
	return out
}

func decodeEvent(t *testing.T, b []byte) tfEvent {
	f := fields(t, b)
	var e tfEvent
	if v, ok := f[1]; ok {
		e.wall = math.Float64frombits(v[0].(uint64))
	}
	if v, ok := f[2]; ok {
		e.step = int64(v[0].(uint64))
	}
	if v, ok := f[3]; ok {
		e.version = string(v[0].([]byte))
	}
	if v, ok := f[5]; ok {
		e.values = map[string]float32{}
		for _, val := range fields(t, v[0].([]byte))[1] {
			vf := fields(t, val.([]byte))
			e.values[string(vf[1][0].([]byte))] = math.Float32frombits(vf[2][0].(uint32))
		}
	}
	return e
}

// TestTensorBoardReadBack writes an event file and reads it back as
// TensorBoard would: CRC-32C is the Castagnoli polynomial (its check
// value), every record's checksums hold, the first event gives the file's
// version, and each later one its step, wall time and the scalars by tag.
func TestTensorBoardReadBack(t *testing.T) {
	if got := crc32.Checksum([]byte("123456789"), castagnoli); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#x, want 0xe3069283", got)
	}
	var buf bytes.Buffer
	clock := time.Unix(1700000000, 250_000_000)
	tb := NewTensorBoard(&buf)
	tb.now = func() time.Time { return clock }
	norm := Float(2.5)
	tb.Step(StepRecord{Step: 1, Loss: 2.25, LR: 0.05, LossScale: 65536, SamplesPerSec: 1000, GradNorm: &norm,
		LiveBytes: map[string]int64{"total": 3 << 20, "param": 1 << 20, "temp": 0}, PeakBytes: map[string]int64{"total": 4 << 20}})
	tb.Step(StepRecord{Step: 2, Loss: Float(math.NaN()), Skipped: true, LossScale: 32768})
	tb.Eval(EvalRecord{Step: 2, TestAccuracy: 0.975})
	if err := tb.Err(); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, &buf)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	first := decodeEvent(t, recs[0])
	if first.version != "brain.Event:2" || first.wall <= 0 {
		t.Errorf("first event %+v, want file_version brain.Event:2 and a wall time", first)
	}
	want := []tfEvent{
		{1700000000.25, 1, "", map[string]float32{"train/loss": 2.25, "train/lr": 0.05, "train/loss_scale": 65536,
			"train/samples_per_sec": 1000, "train/skipped": 0, "train/grad_norm": 2.5,
			"memory/live_mib/total": 3, "memory/live_mib/param": 1, "memory/peak_mib/total": 4}},
		{1700000000.25, 2, "", map[string]float32{"train/lr": 0, "train/loss_scale": 32768, "train/samples_per_sec": 0, "train/skipped": 1}},
		{1700000000.25, 2, "", map[string]float32{"test/accuracy": 0.975}},
	}
	for i, w := range want {
		got := decodeEvent(t, recs[i+1])
		if got.wall != w.wall || got.step != w.step || fmt.Sprint(got.values) != fmt.Sprint(w.values) {
			t.Errorf("event %d:\n got %+v\nwant %+v", i+1, got, w)
		}
	}
}

// TestTensorBoardError checks that a write error is kept and ends writing.
func TestTensorBoardError(t *testing.T) {
	w := &countingFail{}
	tb := NewTensorBoard(w)
	tb.Scalars(1, map[string]float64{"a": 1})
	if tb.Err() == nil || w.n != 1 {
		t.Errorf("Err() = %v after %d writes; want the error after one", tb.Err(), w.n)
	}
}

type countingFail struct{ n int }

func (c *countingFail) Write([]byte) (int, error) { c.n++; return 0, io.ErrShortWrite }
