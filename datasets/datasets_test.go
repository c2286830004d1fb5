package datasets_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mixprec/mixprec/datasets"
)

func TestRoot(t *testing.T) {
	tests := []struct {
		flag, env, want string
	}{
		{"", "", "./data"},
		{"", "/srv/data", "/srv/data"},
		{"/mnt/x", "/srv/data", "/mnt/x"},
		{"rel", "", "rel"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("flag=%q,env=%q", tt.flag, tt.env), func(t *testing.T) {
			t.Setenv("MIXPREC_DATA", tt.env)
			if got := datasets.Root(tt.flag); got != tt.want {
				t.Errorf("Root(%q) = %q, want %q", tt.flag, got, tt.want)
			}
		})
	}
}

func TestDir(t *testing.T) {
	t.Setenv("MIXPREC_DATA", "")
	if got, want := datasets.Dir("mnist"), filepath.Join("data", "mnist"); got != want {
		t.Errorf("Dir(%q) = %q, want %q", "mnist", got, want)
	}
	t.Setenv("MIXPREC_DATA", "/srv/data")
	if got, want := datasets.Dir("cifar10"), "/srv/data/cifar10"; got != want {
		t.Errorf("Dir(%q) = %q, want %q", "cifar10", got, want)
	}
}

func TestFashionMNISTDir(t *testing.T) {
	root := t.TempDir()
	t.Setenv("MIXPREC_DATA", root)
	if got, want := datasets.FashionMNISTDir(), datasets.SystemFashionMNISTDir; got != want {
		t.Errorf("without a local copy FashionMNISTDir() = %q, want %q", got, want)
	}
	local := filepath.Join(root, "fashion-mnist")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := datasets.FashionMNISTDir(); got != local {
		t.Errorf("with a local copy FashionMNISTDir() = %q, want %q", got, local)
	}
}

// indexed is a data set whose sample i holds the values i*10, i*10+1, ...
// and label i%classes, so every value says where it came from.
func indexed(n int, shape []int, classes int) *datasets.Dataset {
	m := 1
	for _, s := range shape {
		m *= s
	}
	d := &datasets.Dataset{Name: "indexed", Shape: shape, X: make([]float32, n*m), Y: make([]int32, n), Classes: classes}
	for i := range n {
		for j := range m {
			d.X[i*m+j] = float32(i*10 + j)
		}
		d.Y[i] = int32(i % classes)
	}
	return d
}

func TestReshapeAndSlice(t *testing.T) {
	d := indexed(5, []int{1, 2, 3}, 3)
	flat := d.Reshape(6)
	if !slices.Equal(flat.Shape, []int{6}) || !slices.Equal(d.Shape, []int{1, 2, 3}) {
		t.Errorf("Reshape(6): shapes %v (view), %v (original), want [6], [1 2 3]", flat.Shape, d.Shape)
	}
	if &flat.X[0] != &d.X[0] || &flat.Y[0] != &d.Y[0] || flat.Len() != d.Len() {
		t.Error("Reshape copied the data or lost samples; it should share X and Y")
	}
	part := d.Slice(1, 3)
	if part.Len() != 2 {
		t.Fatalf("Slice(1, 3).Len() = %d, want 2", part.Len())
	}
	x, y := part.Sample(1)
	if wantX, wantY := d.X[12:18], d.Y[2]; &x[0] != &wantX[0] || len(x) != 6 || y != wantY {
		t.Errorf("Slice(1, 3).Sample(1) = %v, %d, want d.X[12:18] = %v, %d", x, y, wantX, wantY)
	}

	panics := []struct {
		name string
		f    func()
		want string
	}{
		{"reshape wrong size", func() { d.Reshape(7) }, "6 elements != 7"},
		{"slice out of range", func() { d.Slice(2, 6) }, "Slice(2, 6) out of range"},
		{"sample out of range", func() { d.Sample(5) }, "Sample(5) out of range"},
	}
	for _, p := range panics {
		t.Run(p.name, func(t *testing.T) { wantPanic(t, p.want, p.f) })
	}
}

// wantPanic fails unless f panics with a message containing want.
func wantPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		if v == nil {
			t.Fatalf("no panic, want one containing %q", want)
		}
		if msg := fmt.Sprint(v); !strings.Contains(msg, want) {
			t.Fatalf("panic %q does not contain %q", msg, want)
		}
	}()
	f()
}

func TestSynthetic(t *testing.T) {
	a := datasets.Synthetic(50, []int{3, 4, 4}, 7, 1)
	b := datasets.Synthetic(50, []int{3, 4, 4}, 7, 1)
	c := datasets.Synthetic(50, []int{3, 4, 4}, 7, 2)
	if !strings.Contains(a.Name, "synthetic") {
		t.Errorf("Name = %q, want it to say synthetic", a.Name)
	}
	if a.Len() != 50 || len(a.X) != 50*48 || !slices.Equal(a.Shape, []int{3, 4, 4}) || a.Classes != 7 {
		t.Errorf("got Len %d, len(X) %d, Shape %v, Classes %d; want 50, 2400, [3 4 4], 7", a.Len(), len(a.X), a.Shape, a.Classes)
	}
	if !slices.Equal(a.X, b.X) || !slices.Equal(a.Y, b.Y) {
		t.Error("two calls with seed 1 differ; want identical data")
	}
	if slices.Equal(a.X, c.X) {
		t.Error("seeds 1 and 2 give identical data; want different")
	}
	seen := map[int32]bool{}
	for _, y := range a.Y {
		if y < 0 || y >= 7 {
			t.Fatalf("label %d outside [0, 7)", y)
		}
		seen[y] = true
	}
	if len(seen) < 5 {
		t.Errorf("only %d of 7 classes among 50 labels; want most of them", len(seen))
	}
	var sum, sq float64
	for _, v := range a.X {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(a.X))
	if mean, variance := sum/n, sq/n-(sum/n)*(sum/n); mean < -0.15 || mean > 0.15 || variance < 0.8 || variance > 1.2 {
		t.Errorf("mean, variance = %.3f, %.3f, want about 0, 1 (standard normal)", mean, variance)
	}
}
