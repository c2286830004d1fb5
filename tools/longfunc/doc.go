// Package longfunc holds the test that keeps every function of the
// repository's Go code, tests and tools included, within 100 lines, so that
// each does one thing a reader can hold at once (issue 38). Generated files
// (a "Code generated ... DO NOT EDIT." header) are not held to it; a
// function that must be longer is named, with the reason, in the test's
// allow-list.
package longfunc
