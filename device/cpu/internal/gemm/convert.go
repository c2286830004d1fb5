package gemm

import (
	"math"
	"unsafe"
)

// The scalar conversions are this package's own rather than the dtype
// package's: the GEMM must not change behaviour when dtype does, and widening
// is exact, so there is only one right answer to agree on.

// f16ToF32 widens an IEEE 754 binary16 value exactly. NaNs keep their payload
// and come out quiet, as VCVTPH2PS makes them (IEEE 754 §6.2: a conversion
// quiets a signalling NaN), so the scalar and F16C paths agree bit for bit.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		// Zero or subnormal: mant·2⁻²⁴. Both factors are exact in float32
		// and the product is a normal float32, so no rounding happens.
		f := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case 0x1f:
		if mant == 0 {
			return math.Float32frombits(sign | 0x7f800000)
		}
		return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
	default:
		// Rebias the exponent from 15 to 127.
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// bf16ToF32 widens a bfloat16 value, which is the top half of a float32.
func bf16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// The generic 2-D helpers below are the reference for, and the fallback of,
// the assembly ones in kernel_amd64.s. Strides are in elements.

// copy2DGo copies a rows x cols block from src (stride lds) to dst (stride ldd).
func copy2DGo(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	for r := 0; r < rows; r++ {
		copy(dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols])
	}
}

// cvt2DGo widens a rows x cols block of binary16, or bfloat16 when bf16.
func cvt2DGo(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool) {
	for r := 0; r < rows; r++ {
		d := dst[r*ldd : r*ldd+cols]
		s := src[r*lds : r*lds+cols]
		if bf16 {
			for i, h := range s {
				d[i] = bf16ToF32(h)
			}
			continue
		}
		for i, h := range s {
			d[i] = f16ToF32(h)
		}
	}
}

// transposeGo writes dst[q*ldd+p] = src[p*lds+q] for p < rows, q < cols.
func transposeGo(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	for p := 0; p < rows; p++ {
		s := src[p*lds : p*lds+cols]
		for q, v := range s {
			dst[q*ldd+p] = v
		}
	}
}

// transpose16Go is transposeGo widening binary16, or bfloat16 when bf16.
func transpose16Go(dst []float32, ldd int, src []uint16, lds int, rows, cols int, bf16 bool) {
	if bf16 {
		transposeBF16Go(dst, ldd, src, lds, rows, cols)
		return
	}
	transposeF16Go(dst, ldd, src, lds, rows, cols)
}

func transposeF16Go(dst []float32, ldd int, src []uint16, lds int, rows, cols int) {
	for p := 0; p < rows; p++ {
		s := src[p*lds : p*lds+cols]
		for q, h := range s {
			dst[q*ldd+p] = f16ToF32(h)
		}
	}
}

func transposeBF16Go(dst []float32, ldd int, src []uint16, lds int, rows, cols int) {
	for p := 0; p < rows; p++ {
		s := src[p*lds : p*lds+cols]
		for q, h := range s {
			dst[q*ldd+p] = bf16ToF32(h)
		}
	}
}

// words views a packing buffer's float32 slots as the 32-bit words the dot
// kernels read: bfloat16 pairs are bit patterns, not float32 values, and are
// written as integers so that no float32 conversion can touch them.
func words(f []float32) []uint32 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&f[0])), len(f))
}

// halves views a packing buffer's float32 slots as pairs of 16-bit halves,
// low half first: an AMX A panel's rows, copied from bfloat16 storage.
func halves(f []float32) []uint16 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&f[0])), 2*len(f))
}

// zipGo interleaves two k rows of bfloat16 into pairs; see impl.zip.
func zipGo(dst []float32, ldd int, src []uint16, lds int, pairs, cols int) {
	d := words(dst)
	for q := 0; q < pairs; q++ {
		lo := src[2*q*lds : 2*q*lds+cols]
		hi := src[(2*q+1)*lds : (2*q+1)*lds+cols]
		row := d[q*ldd : q*ldd+cols]
		for p := range row {
			row[p] = uint32(lo[p]) | uint32(hi[p])<<16
		}
	}
}

// trPairsGo transposes 32-bit bfloat16 pairs; see impl.trPairs.
func trPairsGo(dst []float32, ldd int, src []uint16, lds int, rows, pairs int) {
	d := words(dst)
	for p := 0; p < rows; p++ {
		s := src[p*lds : p*lds+2*pairs]
		for q := 0; q < pairs; q++ {
			d[q*ldd+p] = uint32(s[2*q]) | uint32(s[2*q+1])<<16
		}
	}
}
