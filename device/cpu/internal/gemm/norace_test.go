//go:build !race

package gemm

// raceEnabled: see race_test.go.
const raceEnabled = false
