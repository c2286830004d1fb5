// Package device defines the backend contract every mixprec backend implements
// (Device, Buffer and the primitive Kernels) and the memory accounting that
// reports live and peak bytes by category and dtype.
//
// A backend implements a few dozen primitive kernels and nothing else; every
// layer above composes them. Kernels take their destination first, work on
// F32, F16 and BF16 storage, and accumulate in float32 (or wider).
package device

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/mixprec/mixprec/dtype"
)

// Buffer is a block of device memory holding Len elements of one DType.
type Buffer interface {
	DType() dtype.DType
	Len() int
	Device() Device
	Category() Category
}

// CheckBits panics unless a CopyBitsFromHost of n patterns into a buffer
// of dtype dt and length have can be done: dt is 16-bit, n is have.
func CheckBits(backend string, dt dtype.DType, have, n int) {
	if dt != dtype.F16 && dt != dtype.BF16 {
		panic(fmt.Sprintf("%s: CopyBitsFromHost into a %v buffer; want F16 or BF16", backend, dt))
	}
	if n != have {
		panic(fmt.Sprintf("%s: CopyBitsFromHost of %d values into a buffer of %d", backend, n, have))
	}
}

// Device is a backend: its memory (buffers, host copies, accounting) and
// the primitive kernels, in the groups of Kernels.
type Device interface {
	// Name identifies the backend, e.g. "cpu" or "cuda:0".
	Name() string
	Memory
	Kernels
}

// Memory is the part of a backend every kernel group needs: it allocates
// and frees buffers, copies to and from the host, and accounts memory.
type Memory interface {
	// Alloc returns a buffer of n elements whose contents are undefined,
	// accounted under category c.
	Alloc(dt dtype.DType, n int, c Category) Buffer
	// Free releases b. Freeing a buffer twice, or using it after Free, panics.
	Free(b Buffer)
	// SetCategory moves b's bytes to category c in the accounting (an output
	// becomes an Activation once a backward pass decides to keep it).
	SetCategory(b Buffer, c Category)
	// CopyFromHost writes src into dst, rounding to dst's dtype.
	CopyFromHost(dst Buffer, src []float32)
	// CopyToHost reads src into dst, widening to float32.
	CopyToHost(dst []float32, src Buffer)
	// CopyBitsFromHost writes the 16-bit patterns src into dst, an F16 or
	// BF16 buffer whose dtype they are in, as they are: a batch converted
	// on the host (by a data loader's workers) arrives with no conversion.
	CopyBitsFromHost(dst Buffer, src []uint16)
	// MemStats reports live and peak bytes.
	MemStats() MemStats
	// ResetPeak sets every peak to the current live value.
	ResetPeak()
	// Sync waits for all queued work; backends that run synchronously return nil.
	Sync() error
}

// HostViewer is an optional interface of a backend whose buffers are
// ordinary host memory (the CPU's), found by type assertion: a buffer that
// reads a host array where it is, instead of a copy of it. A data loader's
// batch then goes into a training step without the step copying it first.
type HostViewer interface {
	// ViewHost returns a buffer of dtype dt over host memory: f32 when dt
	// is F32, bits (F16 or BF16 patterns) otherwise, the other nil. The
	// buffer reads and writes that memory while it lives; Free ends the
	// buffer and leaves the memory to its owner. It is accounted in
	// category c like any buffer.
	ViewHost(dt dtype.DType, f32 []float32, bits []uint16, c Category) Buffer
}

// NarrowGemmer is an optional interface of a backend, found by type
// assertion: a product whose 16-bit result is wanted in float32. Under
// autocast a parameter's gradient is the 16-bit product's result widened
// into the float32 gradient; a backend with NarrowGemmer writes that value
// in one pass, instead of a 16-bit array and a widening pass over it.
type NarrowGemmer interface {
	// GemmNarrow is Gemm into dst, an F32 buffer, with each result rounded
	// once to dtype via (F16 or BF16) and stored widened: the bits of a
	// Gemm into a via-typed copy of dst followed by a Copy back. Beta reads
	// dst's values as they are.
	GemmNarrow(dst, a, b Buffer, p GemmParams, via dtype.DType)
}

// UnscalingGemmer is an optional interface of a NarrowGemmer, found by
// type assertion: the weight gradient of a loss-scaled step, unscaled as it
// is stored. GemmNarrowUnscale is GemmNarrow followed by multiplying each
// result by inv, as the loss scaler's UnscaleCheck would (the same bits),
// and reports whether any unscaled result is Inf or NaN. The CPU does the
// multiply in its kernels' registers as they store the result, so the
// scaler needs no later pass over that gradient. It takes a single product
// (Batch 0 or 1) with Beta 0.
type UnscalingGemmer interface {
	GemmNarrowUnscale(dst, a, b Buffer, p GemmParams, via dtype.DType, inv float32) (nonFinite bool)
}

// StepCaster is an optional fast path a backend may offer, found by type
// assertion: the optimiser steps of Kernels that also write the updated
// parameter, rounded to low's dtype (F16 or BF16), into low in the same
// pass over memory. Autocast keeps a low-precision copy of each weight
// (tensor.CachedCast); an optimiser that refreshes it this way makes the
// next step's cast free. low has p's length, and afterwards holds exactly
// what Copy(low, 0, p, 0, n) would.
type StepCaster interface {
	SGDCast(p, g, mom, low Buffer, h SGDParams)
	AdamCast(p, g, m, v, low Buffer, h AdamParams)
}

// Category says what a buffer is for, so memory reports can say where the
// bytes went.
type Category uint8

const (
	// Param is a model parameter (the FP32 master weights).
	Param Category = iota
	// Grad is a parameter's gradient.
	Grad
	// Optim is optimiser state (momentum, Adam moments).
	Optim
	// Activation is a forward result kept for the backward pass.
	Activation
	// Cast is a low-precision copy of a parameter that autocast made and keeps
	// for the rest of the graph (PyTorch's autocast weight cache).
	Cast
	// Recompute is what gradient checkpointing keeps for the backward pass
	// of a segment while it recomputes it: activations that exist again,
	// briefly, because they were not kept the first time.
	Recompute
	// Temp is anything else a step allocates: outputs not kept for backward,
	// intermediate gradients.
	Temp
	// Workspace is scratch memory a kernel needs (im2col columns, GEMM packing).
	Workspace

	// NumCategories is the number of categories.
	NumCategories = iota
)

var categoryNames = [NumCategories]string{"param", "grad", "optim", "activation", "cast", "recompute", "temp", "workspace"}

// String returns the lower-case name used in reports and JSON.
func (c Category) String() string {
	if int(c) < len(categoryNames) {
		return categoryNames[c]
	}
	return fmt.Sprintf("Category(%d)", uint8(c))
}

// Usage is a byte count split by category and by dtype.
type Usage struct {
	Total      int64
	ByCategory [NumCategories]int64
	ByDType    [3]int64 // indexed by dtype.DType
}

// Category returns the bytes in category c.
func (u Usage) Category(c Category) int64 { return u.ByCategory[c] }

// Max is the larger of u and o figure by figure: two high-water marks
// made one.
func (u Usage) Max(o Usage) Usage {
	u.Total = max(u.Total, o.Total)
	for i := range u.ByCategory {
		u.ByCategory[i] = max(u.ByCategory[i], o.ByCategory[i])
	}
	for i := range u.ByDType {
		u.ByDType[i] = max(u.ByDType[i], o.ByDType[i])
	}
	return u
}

// DType returns the bytes stored as dt.
func (u Usage) DType(dt dtype.DType) int64 { return u.ByDType[dt] }

// MemStats is a snapshot of a device's memory accounting.
//
// Peak.ByCategory[c] is the high-water mark of category c on its own, and
// Peak.Total the high-water mark of the sum, which is at most the sum of the
// per-category peaks.
type MemStats struct {
	Live Usage
	Peak Usage
	// AtPeak is what Peak.Total was made of: the live figures the first
	// time the total reached it. Its categories add up to Peak.Total, where
	// Peak's per-category high-water marks, reached at different times,
	// may not; it says which categories to shrink to lower the peak.
	AtPeak Usage
	Allocs int64 // Alloc calls since the device was made
	// Reserved is memory the backend holds, in use or cached for reuse; it is
	// at least Live.Total.
	Reserved int64
}

// String formats the live and peak figures on one line each.
func (s MemStats) String() string {
	var b strings.Builder
	for _, row := range []struct {
		name string
		u    Usage
	}{{"live", s.Live}, {"peak", s.Peak}, {"at peak", s.AtPeak}} {
		fmt.Fprintf(&b, "%s %s", row.name, FormatBytes(row.u.Total))
		for c := Category(0); c < NumCategories; c++ {
			if row.u.ByCategory[c] != 0 {
				fmt.Fprintf(&b, " %s=%s", c, FormatBytes(row.u.ByCategory[c]))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// FormatBytes renders n with a binary unit: "512 B", "1.5 MiB".
func FormatBytes(n int64) string { return formatBytes(n, math.Round) }

// FormatBytesUp renders n as FormatBytes does but rounded up, never below
// n: a figure a user may read back as a limit n fits within.
func FormatBytesUp(n int64) string { return formatBytes(n, math.Ceil) }

func formatBytes(n int64, round func(float64) float64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit || f <= -unit {
		f /= unit
		u++
	}
	f = round(f*10) / 10
	if f >= unit && u < 6 { // 1023.96 KiB rounds to 1024.0: say 1.0 MiB
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[u-1])
}

// OutOfMemoryError is what a backend's Alloc panics with when the device
// has no memory left for a request, its cache released (the contract has
// no error for Alloc). The programs turn it into one line that says what
// to try (cli.Catch).
type OutOfMemoryError struct {
	Device  string // the device's name
	Request int64  // the bytes asked for
	Live    int64  // the bytes allocated then, by the accounting
	Err     error  // the backend's own error
}

func (e *OutOfMemoryError) Error() string {
	return fmt.Sprintf("%s is out of memory: %s more with %s allocated (%v)", e.Device, FormatBytes(e.Request), FormatBytes(e.Live), e.Err)
}

func (e *OutOfMemoryError) Unwrap() error { return e.Err }

// Accountant keeps the byte counts behind MemStats. Backends embed one and
// call Add and Sub as they allocate and free; it is safe for concurrent use.
type Accountant struct {
	mu     sync.Mutex
	live   Usage
	peak   Usage
	atPeak Usage // live when peak.Total was last raised
	allocs int64
}

// Add records n bytes of dtype dt entering category c.
func (a *Accountant) Add(dt dtype.DType, c Category, n int64) {
	a.mu.Lock()
	a.allocs++
	a.move(dt, c, n)
	a.mu.Unlock()
}

// Sub records n bytes of dtype dt leaving category c.
func (a *Accountant) Sub(dt dtype.DType, c Category, n int64) {
	a.mu.Lock()
	a.move(dt, c, -n)
	a.mu.Unlock()
}

// Move records n bytes of dtype dt moving from category from to category to.
func (a *Accountant) Move(dt dtype.DType, from, to Category, n int64) {
	if from == to {
		return
	}
	a.mu.Lock()
	a.live.ByCategory[from] -= n
	a.live.ByCategory[to] += n
	a.bump()
	a.mu.Unlock()
}

func (a *Accountant) move(dt dtype.DType, c Category, n int64) {
	a.live.Total += n
	a.live.ByCategory[c] += n
	a.live.ByDType[dt] += n
	a.bump()
}

func (a *Accountant) bump() {
	if a.live.Total > a.peak.Total {
		a.atPeak = a.live
	}
	a.peak = a.peak.Max(a.live)
}

// Stats returns the current figures; the caller fills Reserved.
func (a *Accountant) Stats() MemStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return MemStats{Live: a.live, Peak: a.peak, AtPeak: a.atPeak, Allocs: a.allocs, Reserved: a.live.Total}
}

// ResetPeak sets every peak to its live value.
func (a *Accountant) ResetPeak() {
	a.mu.Lock()
	a.peak, a.atPeak = a.live, a.live
	a.mu.Unlock()
}

// Bytes is the size in bytes of n elements of dt.
func Bytes(dt dtype.DType, n int) int64 { return int64(n) * int64(dt.Size()) }

type backend struct {
	open func() (Device, error)
	once sync.Once
	dev  Device
	err  error
}

var (
	regMu    sync.Mutex
	registry = map[string]*backend{}
)

// Register makes a backend constructor available under name. Backends call it
// from init, so that this package can find them without importing them;
// programs link a backend in with a blank import of its package. open runs at
// most once; its result is shared by every Open.
func Register(name string, open func() (Device, error)) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("device: Register called twice for " + name)
	}
	registry[name] = &backend{open: open}
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	regMu.Lock()
	defer regMu.Unlock()
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open returns the backend registered under name ("cpu", "cuda"), or an error
// saying why it is unavailable.
func Open(name string) (Device, error) {
	regMu.Lock()
	b, ok := registry[name]
	regMu.Unlock()
	if !ok {
		return nil, notLinked(name)
	}
	b.once.Do(func() { b.dev, b.err = b.open() })
	if b.err != nil {
		return nil, fmt.Errorf("device %s: %w", name, b.err)
	}
	return b.dev, nil
}

// Select opens a backend by the name a user gives on a command line: "cpu",
// "cuda", or "auto" (or ""), which is CUDA when it opens and the CPU
// otherwise.
func Select(name string) (Device, error) {
	if name == "" || name == "auto" {
		if d, err := Open("cuda"); err == nil {
			return d, nil
		}
		return Open("cpu")
	}
	return Open(name)
}

// Default is Select("auto"): CUDA when a driver and GPU are present, else the
// CPU. It fails when no backend is linked into the program; the error names
// the blank import that links one in.
func Default() (Device, error) { return Select("auto") }

// importPaths are the packages that register the backends this module
// ships, for the error that says which import a program lacks.
var importPaths = map[string]string{
	"cpu":  "github.com/mixprec/mixprec/device/cpu",
	"cuda": "github.com/mixprec/mixprec/cudaops",
}

// notLinked explains a missing backend in terms of the line to add, since
// the cause is always a program without the backend's blank import.
func notLinked(name string) error {
	have := "none"
	if b := Backends(); len(b) > 0 {
		have = strings.Join(b, ", ")
	}
	if path, ok := importPaths[name]; ok {
		return fmt.Errorf("device: backend %q is not linked into this program (linked: %s); add the import _ %q", name, have, path)
	}
	return fmt.Errorf("device: no backend %q (linked: %s); this module has cpu and cuda", name, have)
}

// MemInfo is an optional interface of a backend, found by type assertion:
// how much memory the system could still give it. A memory budget given as
// a fraction of free memory is turned into bytes with it.
type MemInfo interface {
	// FreeMemory returns the bytes the system could still give the
	// backend (beyond what it holds: MemStats' Reserved) and the total
	// it has.
	FreeMemory() (free, total int64, err error)
}
