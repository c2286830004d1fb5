//go:build race

package gemm

// raceEnabled: under the race detector sync.Pool drops some of what it is
// given, on purpose, so allocation counts mean nothing.
const raceEnabled = true
