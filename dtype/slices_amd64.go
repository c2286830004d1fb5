//go:build !purego

// The purego tag builds the pure-Go converters only, so the fallback that
// other architectures use can be tested on amd64 too.

package dtype

import "golang.org/x/sys/cpu"

// The assembly kernels convert n elements, n a positive multiple of 8; the Go
// wrappers below hand them the largest such prefix and give the remaining
// len%8 elements to the generic loop, so the assembly needs no scalar tail.

//go:noescape
func encodeF16F16C(dst *uint16, src *float32, n int)

//go:noescape
func decodeF16F16C(dst *float32, src *uint16, n int)

//go:noescape
func encodeBF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func decodeBF16AVX2(dst *float32, src *uint16, n int)

// avx2Converters uses F16C for binary16 and AVX2 integer arithmetic for
// bfloat16. VCVTNEPS2BF16 (AVX-512 BF16) flushes subnormal inputs to zero,
// so on its own it would disagree with F32ToBF16 (0x007fffff must round to
// 0x0080, the instruction gives 0x0000): avx512BF16Converters patch those
// lanes.
var avx2Converters = converters{
	name: "avx2",
	encodeF16: func(dst []uint16, src []float32) {
		dst = dst[:len(src)] // the bounds check that keeps the assembly in range
		n := len(src) &^ 7
		if n > 0 {
			encodeF16F16C(&dst[0], &src[0], n)
		}
		encodeF16Generic(dst[n:], src[n:])
	},
	decodeF16: func(dst []float32, src []uint16) {
		dst = dst[:len(src)]
		n := len(src) &^ 7
		if n > 0 {
			decodeF16F16C(&dst[0], &src[0], n)
		}
		decodeF16Generic(dst[n:], src[n:])
	},
	encodeBF16: func(dst []uint16, src []float32) {
		dst = dst[:len(src)]
		n := len(src) &^ 7
		if n > 0 {
			encodeBF16AVX2(&dst[0], &src[0], n)
		}
		encodeBF16Generic(dst[n:], src[n:])
	},
	decodeBF16: func(dst []float32, src []uint16) {
		dst = dst[:len(src)]
		n := len(src) &^ 7
		if n > 0 {
			decodeBF16AVX2(&dst[0], &src[0], n)
		}
		decodeBF16Generic(dst[n:], src[n:])
	},
}

// avx512Converters take any length in assembly, the last len%16 elements
// in one masked step, so that the many short rows a blocked GEMM or a
// row-wise kernel converts pay no Go tail loop (which cost more than the
// vector part on rows of about a hundred elements). They use the same
// instructions and rounding as avx2Converters, on sixteen lanes.
var avx512Converters = converters{
	name: "avx512",
	encodeF16: func(dst []uint16, src []float32) {
		if n := len(src); n > 0 {
			_ = dst[n-1]
			encodeF16RowsAVX512(&dst[0], n, &src[0], n, 1, n)
		}
	},
	decodeF16: func(dst []float32, src []uint16) {
		if n := len(src); n > 0 {
			_ = dst[n-1]
			decodeF16RowsAVX512(&dst[0], n, &src[0], n, 1, n)
		}
	},
	encodeBF16: func(dst []uint16, src []float32) {
		if n := len(src); n > 0 {
			_ = dst[n-1]
			encodeBF16RowsAVX512(&dst[0], n, &src[0], n, 1, n)
		}
	},
	decodeBF16: func(dst []float32, src []uint16) {
		if n := len(src); n > 0 {
			_ = dst[n-1]
			decodeBF16RowsAVX512(&dst[0], n, &src[0], n, 1, n)
		}
	},
}

//go:noescape
func encodeF16RowsAVX512(dst *uint16, ldd int, src *float32, lds, rows, cols int)

//go:noescape
func decodeF16RowsAVX512(dst *float32, ldd int, src *uint16, lds, rows, cols int)

//go:noescape
func encodeBF16RowsAVX512(dst *uint16, ldd int, src *float32, lds, rows, cols int)

//go:noescape
func decodeBF16RowsAVX512(dst *float32, ldd int, src *uint16, lds, rows, cols int)

//go:noescape
func encodeBF16RowsCvtAVX512(dst *uint16, ldd int, src *float32, lds, rows, cols int)

// avx512BF16Converters are avx512Converters with bfloat16 rounding by
// AVX512_BF16's VCVTNEPS2BF16, a lane that held a subnormal patched with
// the integer rounding (the instruction flushes subnormals): the same bits,
// about a third of the instructions, and no VPMOVDW store.
var avx512BF16Converters = converters{
	name:      "avx512bf16",
	encodeF16: avx512Converters.encodeF16,
	decodeF16: avx512Converters.decodeF16,
	encodeBF16: func(dst []uint16, src []float32) {
		if n := len(src); n > 0 {
			_ = dst[n-1]
			encodeBF16RowsCvtAVX512(&dst[0], n, &src[0], n, 1, n)
		}
	},
	decodeBF16: avx512Converters.decodeBF16,
}

// rowsAVX512 are the Rows converters; EncodeRows and DecodeRows have
// checked the bounds.
var rowsAVX512 = rowConverters{
	encode: func(bf16 bool, dst []uint16, ldd int, src []float32, lds, rows, cols int) {
		if bf16 {
			encodeBF16RowsAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
			return
		}
		encodeF16RowsAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
	},
	decode: func(bf16 bool, dst []float32, ldd int, src []uint16, lds, rows, cols int) {
		if bf16 {
			decodeBF16RowsAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
			return
		}
		decodeF16RowsAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
	},
}

func init() {
	// HasF16C does not include the OS check for YMM state; HasAVX2 does.
	if cpu.X86.HasAVX2 && cpu.X86.HasF16C {
		available = append(available, avx2Converters)
	}
	// The masked 16-bit moves on 256-bit registers need AVX512BW and VL.
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasF16C {
		available = append(available, avx512Converters)
		rowsImpl = rowsAVX512
		if cpu.X86.HasAVX512BF16 {
			available = append(available, avx512BF16Converters)
			rowsImpl.encode = func(bf16 bool, dst []uint16, ldd int, src []float32, lds, rows, cols int) {
				if bf16 {
					encodeBF16RowsCvtAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
					return
				}
				encodeF16RowsAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
			}
		}
	}
	use(available[len(available)-1])
}
