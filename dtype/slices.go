package dtype

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
