package clitest_test

import (
	"fmt"

	"github.com/mixprec/mixprec/internal/cli/clitest"
)

// A program's error output must be one line, without a stack trace.
func ExampleOneLine() {
	fmt.Printf("%q\n", clitest.OneLine("mnist: invalid value \"0\" for flag -epochs: want an integer >= 1\n"))
	fmt.Printf("%q\n", clitest.OneLine("panic: datasets: Workers(0)\n\ngoroutine 1 [running]:\n"))
	// Output:
	// ""
	// "a panic or stack trace"
}
