package cudaops

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeTree creates the files (empty) and symbolic links ("link -> target")
// of spec under root.
func fakeTree(t *testing.T, root string, spec []string) {
	t.Helper()
	for _, s := range spec {
		link, target, isLink := strings.Cut(s, " -> ")
		p := filepath.Join(root, link)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if isLink {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, nil, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestCublasSearch lays out, in a temporary tree, libcublas where the
// system and NVIDIA's pip wheels put it, and checks the order in which the
// search tries them: newest soname first, and for each, $MIXPREC_CUBLAS
// (a list), the loader, $LD_LIBRARY_PATH, the CUDA toolkit, then the Python environments (a python3 on
// $PATH and the interpreter its link leads to, ~/.local, pyenv, /opt,
// /usr/local, /usr), with the newer Python first within one prefix.
func TestCublasSearch(t *testing.T) {
	root := t.TempDir()
	fakeTree(t, root, []string{
		"mine2/libcublas.so.12",
		"usr/local/cuda/lib64/libcublas.so.12",
		"usr/local/cuda/lib64/libcublasLt.so.12",
		"usr/local/cuda-11.8/lib64/libcublas.so.11",
		"usr/local/lib/python3.9/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublas.so.13",
		"usr/local/lib/python3.12/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.13",
		"usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/lib64/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"opt/torch/.venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"home/u/.local/lib/python3.10/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"home/u/.pyenv/versions/3.12.4/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		// A python3 on $PATH, with the wheels under its own prefix.
		"py/bin/python3",
		"py/lib/python3.13/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"py/lib/python3.13/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
		// A venv's python3 links to its base interpreter, under whose
		// prefix pip may have put the wheels.
		"venv/bin/python3 -> ../../base/bin/python3",
		"base/bin/python3",
		"base/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
	})
	r := func(p string) string { return filepath.Join(root, p) }
	env := map[string]string{
		"MIXPREC_CUBLAS":  r("mine1") + ":" + r("mine2"),
		"LD_LIBRARY_PATH": r("ld"),
		"PATH":            r("py/bin") + ":" + r("venv/bin") + ":" + r("nowhere"),
	}
	p := searchPlaces{getenv: func(k string) string { return env[k] }, home: r("home/u"), root: root}
	dirs := p.dirs()
	if !reflect.DeepEqual(dirs[:4], []string{r("mine1"), r("mine2"), "", r("ld")}) {
		t.Errorf("dirs() starts %q, want $MIXPREC_CUBLAS's two folders, the loader, $LD_LIBRARY_PATH", dirs[:4])
	}

	cs, notes := cublasCandidates(dirs, 13000, fileExists)
	var got []string
	for _, c := range cs {
		got = append(got, strings.TrimPrefix(c.path, root+"/"))
	}
	want := []string{
		"libcublas.so.13",
		"py/lib/python3.13/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"home/u/.local/lib/python3.10/site-packages/nvidia/cu13/lib/libcublas.so.13",
		"usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublas.so.13",
		"mine2/libcublas.so.12",
		"libcublas.so.12",
		"usr/local/cuda/lib64/libcublas.so.12",
		"base/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"home/u/.pyenv/versions/3.12.4/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"opt/torch/.venv/lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/local/lib/python3.9/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/lib/python3/dist-packages/nvidia/cublas/lib/libcublas.so.12",
		"usr/lib64/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12",
		"libcublas.so.11",
		"usr/local/cuda-11.8/lib64/libcublas.so.11",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("candidates with a CUDA 13.0 driver:\ngot  %q\nwant %q", got, want)
	}
	if len(notes) != 0 {
		t.Errorf("notes with a CUDA 13.0 driver: %q, want none", notes)
	}
	// libcublasLt is looked for next to its libcublas.
	if c := cs[1]; c.ltPath != r("py/lib/python3.13/site-packages/nvidia/cu13/lib/libcublasLt.so.13") || c.loaderOnly {
		t.Errorf("candidate %+v: want its libcublasLt in the same folder", c)
	}
	if c := cs[0]; c.ltPath != "libcublasLt.so.13" || !c.loaderOnly {
		t.Errorf("candidate %+v: want the bare sonames for the loader", c)
	}

	// A CUDA 12.4 driver cannot run cuBLAS 13: those are left out, with a note.
	cs, notes = cublasCandidates(dirs, 12040, fileExists)
	if len(cs) != len(want)-4 || cs[0].path != r("mine2/libcublas.so.12") {
		t.Errorf("candidates with a CUDA 12.4 driver: %d starting %q, want the %d of versions 12 and 11", len(cs), cs[0].path, len(want)-4)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "libcublas.so.13: needs a CUDA 13 driver, have 12.4") {
		t.Errorf("notes with a CUDA 12.4 driver: %q", notes)
	}
}

// TestCandidateDirs checks the search as the package runs it, on this
// machine's environment: $MIXPREC_CUBLAS comes first, and a virtualenv's
// nvidia/*/lib folders are searched.
func TestCandidateDirs(t *testing.T) {
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	lib := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MIXPREC_CUBLAS", "/opt/mine")
	t.Setenv("VIRTUAL_ENV", venv)
	dirs := candidateDirs()
	if dirs[0] != "/opt/mine" {
		t.Errorf("candidateDirs()[0] = %q, want $MIXPREC_CUBLAS", dirs[0])
	}
	found := false
	for _, d := range dirs {
		found = found || d == lib
	}
	if !found {
		t.Errorf("candidateDirs() = %v: no %s", dirs, lib)
	}
}

func TestVersionLess(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"python3.9", "python3.12", true},
		{"python3.12", "python3.9", false},
		{"cuda-11.8", "cuda-12.4", true},
		{"python3.12", "python3.12", false},
		{"a007", "a7", false},
		{"a7", "a007", false},
		{"cu13", "cublas", true}, // a digit sorts before a letter
		{"lib", "lib64", true},
	}
	for _, c := range cases {
		if got := versionLess(c.a, c.b); got != c.want {
			t.Errorf("versionLess(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
