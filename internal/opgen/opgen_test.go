package opgen

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesUpToDate checks every generated file against what the
// op tables give now: an op added to device/ops.go without running go
// generate ./device (or a hand edit of an output) fails here, before any
// GPU sees the kernels.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := Files(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f.Path, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(root, f.Path))
			if err != nil {
				t.Fatalf("%v (run go generate ./device)", err)
			}
			if !bytes.Equal(got, f.Data) {
				t.Errorf("%s differs from what device's op tables give: run go generate ./device (and make kernels for the CUDA sources)", f.Path)
			}
		})
	}
}
