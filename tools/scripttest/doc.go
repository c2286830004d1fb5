// Package scripttest tests the repository's shell scripts (tools/*.sh) by
// running them with fake commands first on PATH; it has no code of its own.
package scripttest
