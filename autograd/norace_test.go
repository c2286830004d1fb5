//go:build !race

package autograd_test

// raceEnabled reports a -race build, in which a test that misuses a Graph
// on purpose would be failed by the race detector.
const raceEnabled = false
