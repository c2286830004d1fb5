package devicetest

import (
	"strconv"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

// usageModel is the accounting the suite expects, as differences from the
// live bytes the device held when the test began.
type usageModel struct {
	live, peak, atPeak device.Usage
	allocs             int64
}

func (m *usageModel) add(dt dtype.DType, c device.Category, n int64) {
	m.live.Total += n
	m.live.ByCategory[c] += n
	m.live.ByDType[dt] += n
	m.bump()
}

func (m *usageModel) bump() {
	if m.live.Total > m.peak.Total {
		m.atPeak = m.live
	}
	m.peak.Total = max(m.peak.Total, m.live.Total)
	for i := range m.live.ByCategory {
		m.peak.ByCategory[i] = max(m.peak.ByCategory[i], m.live.ByCategory[i])
	}
	for i := range m.live.ByDType {
		m.peak.ByDType[i] = max(m.peak.ByDType[i], m.live.ByDType[i])
	}
}

// check compares the device's figures s with the model's on top of base,
// the figures when the test began.
func (m *usageModel) check(t *testing.T, step string, s, base device.MemStats) {
	t.Helper()
	checkUsage(t, step, "Live", s.Live, plus(base.Live, m.live))
	checkUsage(t, step, "Peak", s.Peak, plus(base.Live, m.peak))
	checkUsage(t, step, "AtPeak", s.AtPeak, plus(base.Live, m.atPeak))
	var sum int64
	for _, v := range s.AtPeak.ByCategory {
		sum += v
	}
	if sum != s.Peak.Total || s.AtPeak.Total != s.Peak.Total {
		t.Errorf("%s: after %s: AtPeak's categories add up to %d bytes and its Total is %d; want Peak.Total, %d", t.Name(), step, sum, s.AtPeak.Total, s.Peak.Total)
	}
	if got := s.Allocs - base.Allocs; got != m.allocs {
		t.Errorf("%s: after %s: Allocs grew by %d, want %d", t.Name(), step, got, m.allocs)
	}
	if s.Reserved < s.Live.Total {
		t.Errorf("%s: after %s: Reserved %d < Live.Total %d", t.Name(), step, s.Reserved, s.Live.Total)
	}
}

// plus returns base + d, field by field.
func plus(base, d device.Usage) device.Usage {
	base.Total += d.Total
	for i := range base.ByCategory {
		base.ByCategory[i] += d.ByCategory[i]
	}
	for i := range base.ByDType {
		base.ByDType[i] += d.ByDType[i]
	}
	return base
}

func checkUsage(t *testing.T, step, which string, got, want device.Usage) {
	t.Helper()
	if got.Total != want.Total {
		t.Errorf("%s: after %s: %s.Total = %d bytes, want %d", t.Name(), step, which, got.Total, want.Total)
	}
	for c := device.Category(0); c < device.NumCategories; c++ {
		if got.ByCategory[c] != want.ByCategory[c] {
			t.Errorf("%s: after %s: %s.ByCategory[%v] = %d bytes, want %d", t.Name(), step, which, c, got.ByCategory[c], want.ByCategory[c])
		}
	}
	for _, dt := range dtype.All {
		if got.ByDType[dt] != want.ByDType[dt] {
			t.Errorf("%s: after %s: %s.ByDType[%v] = %d bytes, want %d", t.Name(), step, which, dt, got.ByDType[dt], want.ByDType[dt])
		}
	}
}

func testMemory(t *testing.T, dev device.Device) {
	if dev.Name() == "" {
		t.Errorf("%s: Name() is empty", t.Name())
	}
	if err := dev.Sync(); err != nil {
		t.Errorf("%s: Sync() = %v on a healthy device", t.Name(), err)
	}
	t.Run("Accounting", func(t *testing.T) { testAccounting(t, dev) })
	t.Run("Panics", func(t *testing.T) { testMemoryPanics(t, dev) })
}

func testAccounting(t *testing.T, dev device.Device) {
	dev.ResetPeak()
	base := dev.MemStats()
	checkUsage(t, "ResetPeak", "Peak", base.Peak, base.Live)
	checkUsage(t, "ResetPeak", "AtPeak", base.AtPeak, base.Live)
	var m usageModel
	check := func(step string) {
		t.Helper()
		m.check(t, step, dev.MemStats(), base)
	}
	type held struct {
		b  device.Buffer
		dt dtype.DType
		n  int
		c  device.Category
	}
	var bufs []*held
	alloc := func(dt dtype.DType, n int, c device.Category) *held {
		t.Helper()
		b := dev.Alloc(dt, n, c)
		h := &held{b, dt, n, c}
		bufs = append(bufs, h)
		m.allocs++
		m.add(dt, c, int64(n)*int64(dt.Size()))
		if b.DType() != dt || b.Len() != n || b.Category() != c {
			t.Errorf("%s: Alloc(%v, %d, %v) returned a buffer of DType %v, Len %d, Category %v", t.Name(), dt, n, c, b.DType(), b.Len(), b.Category())
		}
		if owner := backendOf(dev); any(b.Device()) != owner {
			t.Errorf("%s: Alloc(%v, %d, %v): the buffer's Device() is a %T, not the device that allocated it (a %T)", t.Name(), dt, n, c, b.Device(), owner)
		}
		check("Alloc(" + dt.String() + ", " + strconv.Itoa(n) + ", " + c.String() + ")")
		return h
	}
	free := func(h *held) {
		t.Helper()
		dev.Free(h.b)
		m.add(h.dt, h.c, -int64(h.n)*int64(h.dt.Size()))
		for i, x := range bufs {
			if x == h {
				bufs = append(bufs[:i], bufs[i+1:]...)
				break
			}
		}
		check("Free(" + h.dt.String() + ", " + strconv.Itoa(h.n) + ", " + h.c.String() + ")")
	}
	move := func(h *held, c device.Category) {
		t.Helper()
		dev.SetCategory(h.b, c)
		nb := int64(h.n) * int64(h.dt.Size())
		m.live.ByCategory[h.c] -= nb
		m.live.ByCategory[c] += nb
		m.bump()
		h.c = c
		if h.b.Category() != c {
			t.Errorf("%s: after SetCategory(%v): Category() = %v", t.Name(), c, h.b.Category())
		}
		check("SetCategory(" + c.String() + ")")
	}

	a := alloc(dtype.F32, 1000, device.Param)
	b := alloc(dtype.F16, 999, device.Activation)
	alloc(dtype.BF16, 77, device.Temp)
	alloc(dtype.F32, 5, device.Grad)
	move(b, device.Temp)
	move(b, device.Temp) // a move to the same category changes nothing
	free(a)
	// A second large buffer in another category after the first is gone:
	// each category reaches its peak at a different time, so Peak.Total is
	// less than the sum of the per-category peaks.
	g := alloc(dtype.F32, 1000, device.Grad)
	alloc(dtype.F16, 10, device.Workspace)
	alloc(dtype.BF16, 3, device.Optim)
	alloc(dtype.F32, 2, device.Cast)
	move(g, device.Activation)
	s := dev.MemStats()
	var sumPeaks int64
	for c := device.Category(0); c < device.NumCategories; c++ {
		sumPeaks += s.Peak.ByCategory[c] - base.Live.ByCategory[c]
	}
	if s.Peak.Total-base.Live.Total >= sumPeaks {
		t.Errorf("%s: Peak.Total grew by %d bytes, want less than the sum of the category peaks' growth %d (it is the peak of the sum)", t.Name(), s.Peak.Total-base.Live.Total, sumPeaks)
	}

	dev.ResetPeak()
	m.peak, m.atPeak = m.live, m.live
	check("ResetPeak")
	free(g)
	alloc(dtype.F16, 4, device.Param)
	for len(bufs) > 0 {
		free(bufs[len(bufs)-1])
	}
	checkUsage(t, "freeing everything", "Live", dev.MemStats().Live, base.Live)
}

func testMemoryPanics(t *testing.T, dev device.Device) {
	before := dev.MemStats().Live
	live := dev.Alloc(dtype.F32, 8, device.Temp)
	for _, dt := range dtype.All {
		x := dev.Alloc(dt, 16, device.Grad)
		dev.Free(x)
		afterFree := dev.MemStats().Live
		h := make([]float32, 16)
		mustPanic(t, "a second Free of a "+dt.String()+" buffer", func() { dev.Free(x) })
		mustPanic(t, "CopyToHost from a freed "+dt.String()+" buffer", func() { dev.CopyToHost(h, x) })
		mustPanic(t, "CopyFromHost into a freed "+dt.String()+" buffer", func() { dev.CopyFromHost(x, h) })
		mustPanic(t, "SetCategory of a freed "+dt.String()+" buffer", func() { dev.SetCategory(x, device.Param) })
		mustPanic(t, "Fill of a freed "+dt.String()+" buffer", func() { dev.Fill(x, 1) })
		mustPanic(t, "Copy from a freed "+dt.String()+" buffer", func() { dev.Copy(live, 0, x, 0, 8) })
		mustPanic(t, "Copy into a freed "+dt.String()+" buffer", func() { dev.Copy(x, 0, live, 0, 8) })
		mustPanic(t, "Unary reading a freed "+dt.String()+" buffer", func() { dev.Unary(device.Neg, live, x, 0) })
		checkUsage(t, "using a freed "+dt.String()+" buffer", "Live", dev.MemStats().Live, afterFree)
	}
	dev.Free(live)
	checkUsage(t, "freeing everything", "Live", dev.MemStats().Live, before)
}
