// Package readmetest checks that the training script in README.md is a
// complete program: it builds it as a module of its own against this
// checkout, as a user who pastes it would, and runs it.
package readmetest
