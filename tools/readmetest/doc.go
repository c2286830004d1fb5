// Package readmetest checks the project's Markdown as a reader meets it:
// the training script in README.md is a complete program (it builds it as
// a module of its own against this checkout, as a user who pastes it
// would, and runs it); every relative link and #fragment in README.md,
// docs/ and the other Markdown files resolves; every repository path cited
// in backticks exists; the README stays a front door's length; and every
// test that runs only under MIXPREC_LONG=1 is named by the Makefile's
// test-long targets, so that it still runs somewhere.
package readmetest
