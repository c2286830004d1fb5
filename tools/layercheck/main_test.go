package main

import (
	"os/exec"
	"slices"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{"imports go down", []pkg{
			{rel: "autograd", imports: []string{"tensor", "device", "dtype"}},
			{rel: "runstate", imports: []string{"nn", "optim", "amp", "safetensors"}},
			{rel: "memplan", imports: []string{"nn", "optim", "autograd", "device"}},
		}, nil},
		{"an import up", []pkg{{rel: "tensor", imports: []string{"autograd"}}},
			[]string{"layercheck: tensor (layer 2) imports autograd (layer 3)"}},
		{"an import sideways", []pkg{{rel: "nn", imports: []string{"optim"}}},
			[]string{"layercheck: nn (layer 4) imports optim (layer 4)"}},
		{"the planner beside the run state", []pkg{{rel: "memplan", imports: []string{"runstate"}}},
			[]string{"layercheck: memplan (layer 5) imports runstate (layer 5)"}},
		{"a backend on the contract", []pkg{{rel: "cudaops", imports: []string{"device"}}}, nil},
		{"a sub-package takes its parent's layer", []pkg{{rel: "nn/models", imports: []string{"nn", "autograd"}}, {rel: "device/cpu/internal/gemm", imports: []string{"dtype"}}}, nil},
		{"programs use internal", []pkg{
			{rel: "examples/mnist", imports: []string{"internal/train", "internal/cli"}},
			{rel: "cmd/mixprec", imports: []string{"internal/cli"}},
		}, nil},
		{"internal's packages use one another", []pkg{{rel: "internal/train", imports: []string{"internal/cli", "runstate", "nn"}}}, nil},
		{"a library imports internal", []pkg{{rel: "nn", imports: []string{"internal/cli"}}},
			[]string{"layercheck: nn (layer 4) imports internal/cli (layer 6)"}},
		{"internal imports a program", []pkg{{rel: "internal/train", imports: []string{"examples/mnist"}}},
			[]string{"layercheck: internal/train (layer 6) imports examples/mnist (layer 6)"}},
		{"programs do not import one another", []pkg{{rel: "cmd/mixprec", imports: []string{"examples/mnist"}}},
			[]string{"layercheck: cmd/mixprec (layer 6) imports examples/mnist (layer 6)"}},
		{"test support imports test support", []pkg{
			{rel: "internal/testdev", imports: []string{"cudaops", "device/cpu"}, testing: true},
			{rel: "internal/cli/clitest", imports: []string{"internal/cli", "internal/testdev"}, testing: true},
		}, nil},
		{"a program links test support", []pkg{
			{rel: "internal/testdev", imports: []string{"device"}, testing: true},
			{rel: "cmd/mixprec", imports: []string{"internal/testdev"}},
		}, []string{"layercheck: cmd/mixprec imports internal/testdev, which is test support (it imports testing): only test files may"}},
		{"a tool is outside the layers", []pkg{{rel: "tools/layercheck", imports: []string{"examples/mnist"}}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := check(c.pkgs); !slices.Equal(got, c.want) {
				t.Errorf("check:\ngot  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestModule runs the check on this module, as make lint does.
func TestModule(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	pkgs, err := load("../..")
	if err != nil {
		t.Fatal(err)
	}
	var internal, support int
	for _, p := range pkgs {
		if g, _ := group(p.rel); g == "internal" {
			internal++
		}
		if p.testing {
			support++
		}
	}
	if internal == 0 || support == 0 {
		t.Fatalf("load found %d packages under internal/ and %d test-support packages; want some of each", internal, support)
	}
	if bad := check(pkgs); len(bad) > 0 {
		t.Errorf("the module breaks the layering:\n%q", bad)
	}
}
