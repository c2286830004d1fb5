package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/internal/cli"
)

func runJSON(t *testing.T, args ...string) cli.Summary {
	t.Helper()
	var out, errb bytes.Buffer
	if err := run(append(args, "-json"), &out, &errb); err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var s cli.Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("last line is not the JSON summary: %q: %v", lines[len(lines)-1], err)
	}
	return s
}

// TestMissingData: without CIFAR-10 the program says where to get it, on
// one line, and fails.
func TestMissingData(t *testing.T) {
	var out, errb bytes.Buffer
	err := run([]string{"-data", t.TempDir(), "-max-steps", "1"}, &out, &errb)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "cifar-10-binary.tar.gz") || !strings.Contains(err.Error(), "-synthetic") {
		t.Errorf("error %v; want one line naming the archive and -synthetic", err)
	}
}

// TestSynthetic runs the acceptance command's shape on a few steps and
// checks the summary says the data were synthetic.
func TestSynthetic(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	s := runJSON(t, "-synthetic", "-max-steps", "3", "-amp", "f16", "-checkpoint", "auto", "-batch", "16")
	if s.Data != "synthetic" || s.Steps != 3 || s.PeakBytes.Activation == 0 || s.PeakBytes.Recompute == 0 {
		t.Errorf("summary %+v; want data synthetic, 3 steps, activation and recompute bytes", s)
	}
	var out, errb bytes.Buffer
	if err := run([]string{"-synthetic", "-max-steps", "1", "-batch", "8"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(line, "[synthetic data]") {
			t.Errorf("line without the synthetic label: %q", line)
		}
	}
}

// TestTrainsOnCIFARFiles writes a tiny data set in the binary format and
// trains on it, through the real loader and augmentation.
func TestTrainsOnCIFARFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("trains ResNet-20 for a few steps")
	}
	dir := filepath.Join(t.TempDir(), "cifar10")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, n int) {
		var b bytes.Buffer
		for i := range n {
			b.WriteByte(byte(i % 10))
			px := make([]byte, 3072)
			for j := range px {
				px[j] = byte((i*7 + j) % 256)
			}
			b.Write(px)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 5; i++ {
		write("data_batch_"+string(rune('0'+i))+".bin", 8)
	}
	write("test_batch.bin", 8)
	s := runJSON(t, "-data", filepath.Dir(dir), "-epochs", "1", "-batch", "16")
	if s.Data != "cifar10" || s.Steps != 2 {
		t.Errorf("summary %+v; want cifar10 data and 2 steps (40 samples, batch 16, last dropped)", s)
	}
}
