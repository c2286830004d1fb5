//go:build race

package datasets_test

// raceEnabled lets the tests that read the real data sets skip under -race:
// the race detector makes converting 70,000 images take many seconds, and the
// loaders start no goroutines for it to watch.
const raceEnabled = true
