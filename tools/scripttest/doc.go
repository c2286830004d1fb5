// Package scripttest tests the repository's shell scripts (tools/*.sh) by
// running them with fake commands first on PATH, and the benchmark runner's
// Python unit tests (tools/peers); it has no code of its own.
package scripttest
