package testdev

import (
	"testing"

	"github.com/mixprec/mixprec/device"
	"github.com/mixprec/mixprec/dtype"
)

func TestDevices(t *testing.T) {
	ds := Devices()
	if len(ds) == 0 || ds[0].Name() != "cpu" {
		t.Fatalf("Devices() = %v, want the CPU first", ds)
	}
	if (CUDAError() == nil) != (len(ds) == 2) {
		t.Errorf("Devices() has %d devices but CUDAError() = %v", len(ds), CUDAError())
	}
}

func TestEach(t *testing.T) {
	var names []string
	Each(t, func(t *testing.T, dev device.Device) {
		names = append(names, dev.Name())
		b := dev.Alloc(dtype.F16, 3, device.Temp)
		defer dev.Free(b)
		dev.Fill(b, 1.5)
		got := make([]float32, 3)
		dev.CopyToHost(got, b)
		if got[2] != 1.5 {
			t.Errorf("Fill then CopyToHost: %v", got)
		}
	})
	if len(names) != len(Devices()) {
		t.Errorf("Each ran on %v, want every device", names)
	}
}
