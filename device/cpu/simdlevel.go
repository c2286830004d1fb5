package cpu

// simdLevel is how wide a family of assembly loops runs (relu_amd64.s,
// optim_amd64.s, rows_amd64.s). Each family keeps its level in a variable
// that defaults to the highest the CPU supports; tests lower it to check
// every level against the Go loops, bit for bit.
type simdLevel int

const (
	simdGo     simdLevel = iota // the Go loops
	simdAVX2                    // 256-bit YMM loops
	simdAVX512                  // 512-bit ZMM loops
)

// levelOf is the highest level whose features the CPU has.
func levelOf(avx2, avx512 bool) simdLevel {
	switch {
	case avx512:
		return simdAVX512
	case avx2:
		return simdAVX2
	}
	return simdGo
}

// part is how many of n elements of size bytes the loops of level l run: a
// multiple of their lane count, 0 for the Go loops. The caller does the
// rest.
func (l simdLevel) part(n, size int) int {
	var lanes int
	switch l {
	case simdAVX2:
		lanes = 32 / size
	case simdAVX512:
		lanes = 64 / size
	default:
		return 0
	}
	return n &^ (lanes - 1)
}

func (l simdLevel) String() string {
	switch l {
	case simdGo:
		return "go"
	case simdAVX2:
		return "avx2"
	case simdAVX512:
		return "avx512"
	}
	return "simdLevel(?)"
}
