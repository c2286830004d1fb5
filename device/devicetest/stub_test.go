package devicetest_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/device/devicetest"
	"github.com/mixprec/mixprec/dtype"
)

// stub is a backend on its first day: memory from device.Pool, the
// allocator and accounting every backend shares, and one group of kernels,
// device.LinAlgKernels, as a plain loop. The other groups are nil
// interfaces until they are written (calling one panics); the backend is a
// device.Device already, which its buffers must name, and it passes the
// suite of what it has (TestStub).
type stub struct {
	pool device.Pool[[]byte]
	device.ElementwiseKernels
	device.LossKernels
	device.ConvPoolKernels
	device.NormKernels
	device.OptimKernels
	device.TransformerKernels
}

func newStub() *stub {
	s := &stub{}
	s.pool.NewBlock = func(size int64) ([]byte, error) { return make([]byte, size), nil }
	return s
}

// stubBuffer is host memory: each element in its dtype's little-endian
// bytes.
type stubBuffer struct {
	device.BufferHeader
	dev *stub
	b   []byte
}

func (b *stubBuffer) Device() device.Device { return b.dev }

// at reads element i as float32.
func (b *stubBuffer) at(i int) float32 {
	switch b.DType() {
	case dtype.F16:
		return dtype.F16ToF32(binary.LittleEndian.Uint16(b.b[2*i:]))
	case dtype.BF16:
		return dtype.BF16ToF32(binary.LittleEndian.Uint16(b.b[2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b.b[4*i:]))
}

// set rounds v to the buffer's dtype into element i.
func (b *stubBuffer) set(i int, v float32) {
	switch b.DType() {
	case dtype.F16:
		binary.LittleEndian.PutUint16(b.b[2*i:], dtype.F32ToF16(v))
	case dtype.BF16:
		binary.LittleEndian.PutUint16(b.b[2*i:], dtype.F32ToBF16(v))
	default:
		binary.LittleEndian.PutUint32(b.b[4*i:], math.Float32bits(v))
	}
}

func (s *stub) Name() string { return "stub" }

func (s *stub) own(b device.Buffer, op string) *stubBuffer {
	return device.Own[stubBuffer](s, b, "stub", op)
}

func (s *stub) Alloc(dt dtype.DType, n int, c device.Category) device.Buffer {
	if n < 0 {
		panic(fmt.Sprintf("stub: Alloc of %d elements", n))
	}
	b := &stubBuffer{BufferHeader: device.NewBufferHeader(dt, n, c), dev: s}
	mem, err := s.pool.Alloc(&b.BufferHeader)
	if err != nil {
		panic("stub: " + err.Error())
	}
	b.b = mem[:b.Bytes()]
	return b
}

func (s *stub) Free(b device.Buffer) {
	sb := s.own(b, "Free")
	s.pool.Free(&sb.BufferHeader, sb.b[:cap(sb.b)])
}

func (s *stub) SetCategory(b device.Buffer, c device.Category) {
	s.pool.Recategorize(&s.own(b, "SetCategory").BufferHeader, c)
}

func (s *stub) CopyFromHost(dst device.Buffer, src []float32) {
	b := s.own(dst, "CopyFromHost")
	if len(src) != b.Len() {
		panic(fmt.Sprintf("stub: CopyFromHost of %d values into %d", len(src), b.Len()))
	}
	for i, v := range src {
		b.set(i, v)
	}
}

func (s *stub) CopyToHost(dst []float32, src device.Buffer) {
	b := s.own(src, "CopyToHost")
	if len(dst) != b.Len() {
		panic(fmt.Sprintf("stub: CopyToHost of %d values into %d", b.Len(), len(dst)))
	}
	for i := range dst {
		dst[i] = b.at(i)
	}
}

func (s *stub) CopyBitsFromHost(dst device.Buffer, src []uint16) {
	b := s.own(dst, "CopyBitsFromHost")
	device.CheckBits("stub", b.DType(), b.Len(), len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint16(b.b[2*i:], v)
	}
}

func (s *stub) MemStats() device.MemStats { return s.pool.MemStats() }
func (s *stub) ResetPeak()                { s.pool.ResetPeak() }
func (s *stub) Sync() error               { return nil }

// Gemm is the definition, a float64 sum per element rounded once.
func (s *stub) Gemm(dst, a, b device.Buffer, p device.GemmParams) {
	cb, ab, bb := s.own(dst, "Gemm"), s.own(a, "Gemm"), s.own(b, "Gemm")
	for q := range p.Batches() {
		oa, ob, oc := p.OffA+q*p.StrideA, p.OffB+q*p.StrideB, p.OffC+q*p.StrideC
		for i := range p.M {
			for j := range p.N {
				var sum float64
				for l := range p.K {
					ia, ib := i*p.K+l, l*p.N+j
					if p.TransA {
						ia = l*p.M + i
					}
					if p.TransB {
						ib = j*p.K + l
					}
					sum += float64(ab.at(oa+ia)) * float64(bb.at(ob+ib))
				}
				v := float64(p.Alpha) * sum
				if p.Beta != 0 { // Beta 0 does not read C, which may hold NaN
					v += float64(p.Beta) * float64(cb.at(oc+i*p.N+j))
				}
				cb.set(oc+i*p.N+j, float32(v))
			}
		}
	}
}

// TestStub brings the stub backend up as a new backend's author would:
// its memory, and the one group of kernels it has.
func TestStub(t *testing.T) {
	s := newStub()
	t.Run("Memory", func(t *testing.T) { devicetest.RunMemory(t, s) })
	t.Run("LinAlg", func(t *testing.T) { devicetest.RunLinAlg(t, s) })
}
