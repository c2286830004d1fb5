// Command cmd writes the files generated from device's op tables (see
// package opgen). go generate runs it in device/, so the module's root is
// the parent folder.
package main

import (
	"fmt"
	"os"

	"github.com/mixprec/mixprec/internal/opgen"
)

func main() {
	root := ".."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	if err := opgen.Write(root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
