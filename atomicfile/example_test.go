package atomicfile_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mixprec/mixprec/atomicfile"
)

// A write that fails part-way leaves the file as it was.
func Example() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "metrics.jsonl")

	atomicfile.WriteFile(path, []byte("{\"step\":1}\n"), 0o600)
	err := atomicfile.Write(path, 0o600, func(w io.Writer) error {
		io.WriteString(w, "{\"step\":")
		return errors.New("the run failed")
	})
	b, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(dir)
	fmt.Printf("%v; %s holds %q; %d file in the directory\n", err, filepath.Base(path), b, len(entries))
	// Output: the run failed; metrics.jsonl holds "{\"step\":1}\n"; 1 file in the directory
}
