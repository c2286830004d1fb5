//go:build !race

package cpu

// raceEnabled reports a -race build, whose instrumentation allocates on
// its own account, so allocation counts are not checked under it.
const raceEnabled = false
