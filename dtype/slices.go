package dtype

import "fmt"

// EncodeF16 rounds each src[i] to binary16 into dst[i]. len(dst) must be >= len(src).
func EncodeF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	encodeF16(dst, src)
}

// DecodeF16 widens each binary16 src[i] into dst[i]. len(dst) must be >= len(src).
func DecodeF16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	decodeF16(dst, src)
}

// EncodeBF16 rounds each src[i] to bfloat16 into dst[i]. len(dst) must be >= len(src).
func EncodeBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	encodeBF16(dst, src)
}

// DecodeBF16 widens each bfloat16 src[i] into dst[i]. len(dst) must be >= len(src).
func DecodeBF16(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	decodeBF16(dst, src)
}

// Encode rounds src into 16-bit storage of type d (F16 or BF16).
func Encode(d DType, dst []uint16, src []float32) {
	switch d {
	case F16:
		EncodeF16(dst, src)
	case BF16:
		EncodeBF16(dst, src)
	default:
		panic("dtype: Encode to " + d.String())
	}
}

// Decode widens 16-bit storage of type d (F16 or BF16) into dst.
func Decode(d DType, dst []float32, src []uint16) {
	switch d {
	case F16:
		DecodeF16(dst, src)
	case BF16:
		DecodeBF16(dst, src)
	default:
		panic("dtype: Decode from " + d.String())
	}
}

func encodeF16Generic(dst []uint16, src []float32) {
	for i, f := range src {
		dst[i] = F32ToF16(f)
	}
}

func decodeF16Generic(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = F16ToF32(h)
	}
}

func encodeBF16Generic(dst []uint16, src []float32) {
	for i, f := range src {
		dst[i] = F32ToBF16(f)
	}
}

func decodeBF16Generic(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = BF16ToF32(h)
	}
}

// rowConverters convert rows x cols blocks with row strides, in one call.
type rowConverters struct {
	encode func(bf16 bool, dst []uint16, ldd int, src []float32, lds, rows, cols int)
	decode func(bf16 bool, dst []float32, ldd int, src []uint16, lds, rows, cols int)
}

// rowsImpl is the platform's block converters; nil functions mean a call
// per row.
var rowsImpl rowConverters

// checkRows panics unless a rows x cols block with leading dimension ld
// fits in n elements.
func checkRows(op string, n, ld, rows, cols int) {
	if rows < 0 || cols < 0 || ld < cols || (rows > 0 && cols > 0 && (rows-1)*ld+cols > n) {
		panic(fmt.Sprintf("dtype.%s: %dx%d block with row stride %d in %d elements", op, rows, cols, ld, n))
	}
}

// EncodeRows rounds a rows x cols block of src (rows lds elements apart)
// into dst (rows ldd apart) as type d (F16 or BF16): Encode on each row,
// in one call.
func EncodeRows(d DType, dst []uint16, ldd int, src []float32, lds, rows, cols int) {
	if d != F16 && d != BF16 {
		panic("dtype: EncodeRows to " + d.String())
	}
	checkRows("EncodeRows", len(dst), ldd, rows, cols)
	checkRows("EncodeRows", len(src), lds, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	if rowsImpl.encode != nil {
		rowsImpl.encode(d == BF16, dst, ldd, src, lds, rows, cols)
		return
	}
	for r := 0; r < rows; r++ {
		Encode(d, dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols])
	}
}

// DecodeRows widens a rows x cols block of 16-bit storage of type d into
// dst: Decode on each row, in one call.
func DecodeRows(d DType, dst []float32, ldd int, src []uint16, lds, rows, cols int) {
	if d != F16 && d != BF16 {
		panic("dtype: DecodeRows from " + d.String())
	}
	checkRows("DecodeRows", len(dst), ldd, rows, cols)
	checkRows("DecodeRows", len(src), lds, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	if rowsImpl.decode != nil {
		rowsImpl.decode(d == BF16, dst, ldd, src, lds, rows, cols)
		return
	}
	for r := 0; r < rows; r++ {
		Decode(d, dst[r*ldd:r*ldd+cols], src[r*lds:r*lds+cols])
	}
}
