package safetensors_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/mixprec/mixprec/dtype"
	"github.com/mixprec/mixprec/safetensors"
)

// Write a layer's weights, one tensor in F32 and one stored as F16 bit
// patterns, and read them back. The file names each tensor with PyTorch's
// state_dict key, so torch's safetensors.torch.load_file reads it as is.
func Example() {
	bias := []float32{0.5, -0.25}
	bits := make([]uint16, len(bias))
	dtype.Encode(dtype.F16, bits, bias)
	tensors := []safetensors.Tensor{
		{Name: "0.weight", DType: dtype.F32, Shape: []int{2, 3}, F32: []float32{1, 2, 3, 4, 5, 6}},
		{Name: "0.bias", DType: dtype.F16, Shape: []int{2}, U16: bits},
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, tensors, map[string]string{"model": "mlp"}); err != nil {
		log.Fatal(err)
	}
	file := buf.Bytes()

	f, err := safetensors.Read(bytes.NewReader(file))
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range f.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Floats())
	}
	fmt.Println("model:", f.Metadata["model"])

	// Write recorded the payload's SHA-256 (under SumKey), which Read
	// checks: one flipped bit in a weight is an error, not a wrong model.
	file[len(file)-1] ^= 1
	_, err = safetensors.Read(bytes.NewReader(file))
	fmt.Println("flipped bit detected:", err != nil)
	// Output:
	// 0.weight f32 [2 3] [1 2 3 4 5 6]
	// 0.bias f16 [2] [0.5 -0.25]
	// model: mlp
	// flipped bit detected: true
}

// A file cut short is an error that says so, never weights read in part.
func ExampleReadFile() {
	dir, err := os.MkdirTemp("", "safetensors-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	w := []safetensors.Tensor{{Name: "w", DType: dtype.F32, Shape: []int{4}, F32: []float32{1, 2, 3, 4}}}
	if err := safetensors.WriteFile(path, w, nil); err != nil {
		log.Fatal(err)
	}
	f, err := safetensors.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Tensor("w").F32)

	// Drop the last float of the file.
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-4], 0o644); err != nil {
		log.Fatal(err)
	}
	_, err = safetensors.ReadFile(path)
	fmt.Println(err != nil)
	// Output:
	// [1 2 3 4]
	// true
}
