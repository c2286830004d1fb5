package dtype

// converters is one implementation of the four slice converters. Each function
// is called with len(dst) == len(src).
type converters struct {
	name       string
	encodeF16  func(dst []uint16, src []float32)
	decodeF16  func(dst []float32, src []uint16)
	encodeBF16 func(dst []uint16, src []float32)
	decodeBF16 func(dst []float32, src []uint16)
}

// genericConverters is the pure-Go implementation: the reference every fast
// path is tested against bit for bit, and the one used where no fast path runs.
var genericConverters = converters{
	name:       "generic",
	encodeF16:  encodeF16Generic,
	decodeF16:  decodeF16Generic,
	encodeBF16: encodeBF16Generic,
	decodeBF16: decodeBF16Generic,
}

// available lists every implementation this CPU can run, slowest first. A
// platform file's init appends its fast paths; tests and benchmarks walk the
// whole list so a fast path is checked even when a faster one is selected.
var available = []converters{genericConverters}

// These indirections are where a platform's assembly converters plug in; use
// selects the fastest entry of available.
var (
	encodeF16  = encodeF16Generic
	decodeF16  = decodeF16Generic
	encodeBF16 = encodeBF16Generic
	decodeBF16 = decodeBF16Generic
)

// use makes c the implementation behind the exported slice converters.
func use(c converters) {
	encodeF16, decodeF16 = c.encodeF16, c.decodeF16
	encodeBF16, decodeBF16 = c.encodeBF16, c.decodeBF16
}
