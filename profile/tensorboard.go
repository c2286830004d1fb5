package profile

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"sort"
	"time"
)

// TensorBoard writes scalars as a TensorBoard event file: TFRecord
// records (a length, its masked CRC-32C, the bytes, their masked CRC-32C)
// each holding an Event protocol buffer. Only the few fields scalars need
// are written (wall_time, step, file_version, and a Summary of tag and
// simple_value pairs), encoded here rather than through a protobuf
// library. TensorBoard reads a directory of such files named
// events.out.tfevents.*, as it does PyTorch's SummaryWriter's.
type TensorBoard struct {
	w   io.Writer
	now func() time.Time
	err error
	buf []byte
}

// NewTensorBoard starts an event file on w with its version record.
func NewTensorBoard(w io.Writer) *TensorBoard {
	tb := &TensorBoard{w: w, now: time.Now}
	var ev []byte
	ev = protoDouble(ev, 1, wallTime(tb.now()))
	ev = protoBytes(ev, 3, []byte("brain.Event:2"))
	tb.record(ev)
	return tb
}

// Scalars writes one event at step holding each named value, in the
// order of their names.
func (tb *TensorBoard) Scalars(step int, values map[string]float64) {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	var summary []byte
	for _, k := range names {
		var v []byte
		v = protoBytes(v, 1, []byte(k))
		v = protoFloat(v, 2, float32(values[k]))
		summary = protoBytes(summary, 1, v)
	}
	var ev []byte
	ev = protoDouble(ev, 1, wallTime(tb.now()))
	ev = protoVarint(ev, 2, uint64(int64(step)))
	ev = protoBytes(ev, 5, summary)
	tb.record(ev)
}

// Step writes a step's metrics under train/ (loss, lr, loss_scale,
// skipped, samples_per_sec) and memory/ (live and peak MiB by category).
// A loss that is not finite is left out, as TensorBoard draws nothing
// sensible for it.
func (tb *TensorBoard) Step(r StepRecord) {
	v := map[string]float64{
		"train/lr":              r.LR,
		"train/loss_scale":      float64(r.LossScale),
		"train/samples_per_sec": float64(r.SamplesPerSec),
		"train/skipped":         0,
	}
	if l := float64(r.Loss); !math.IsNaN(l) && !math.IsInf(l, 0) {
		v["train/loss"] = l
	}
	if r.Skipped {
		v["train/skipped"] = 1
	}
	if r.GradNorm != nil {
		v["train/grad_norm"] = float64(*r.GradNorm)
	}
	for _, m := range []struct {
		kind  string
		bytes map[string]int64
	}{{"live", r.LiveBytes}, {"peak", r.PeakBytes}} {
		for k, n := range m.bytes {
			if n != 0 || k == "total" {
				v["memory/"+m.kind+"_mib/"+k] = float64(n) / (1 << 20)
			}
		}
	}
	tb.Scalars(r.Step, v)
}

// Eval writes an evaluation's test accuracy as test/accuracy.
func (tb *TensorBoard) Eval(r EvalRecord) {
	tb.Scalars(r.Step, map[string]float64{"test/accuracy": float64(r.TestAccuracy)})
}

// Err is the first error writing met; nothing is written after it.
func (tb *TensorBoard) Err() error { return tb.err }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: CRC-32C, rotated and offset so that a
// CRC of data holding CRCs does not come out trivial.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

func (tb *TensorBoard) record(data []byte) {
	if tb.err != nil {
		return
	}
	b := tb.buf[:0]
	b = binary.LittleEndian.AppendUint64(b, uint64(len(data)))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(b[:8]))
	b = append(b, data...)
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(data))
	tb.buf = b
	if _, err := tb.w.Write(b); err != nil {
		tb.err = fmt.Errorf("writing TensorBoard events: %w", err)
	}
}

func wallTime(t time.Time) float64 { return float64(t.Unix()) + float64(t.Nanosecond())/1e9 }

// The protocol buffer wire format, for the fields written here.
func protoKey(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

func protoVarint(b []byte, field int, v uint64) []byte {
	return binary.AppendUvarint(protoKey(b, field, 0), v)
}

func protoDouble(b []byte, field int, v float64) []byte {
	return binary.LittleEndian.AppendUint64(protoKey(b, field, 1), math.Float64bits(v))
}

func protoFloat(b []byte, field int, v float32) []byte {
	return binary.LittleEndian.AppendUint32(protoKey(b, field, 5), math.Float32bits(v))
}

func protoBytes(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(protoKey(b, field, 2), uint64(len(v)))
	return append(b, v...)
}
